//! TPC-C rows (spec clause 1.3) as fixed-layout byte records, and their
//! keys as big-endian composites (so the index orders them as the spec's
//! primary keys).
//!
//! Every field is stored at full spec width (strings as a length plus a
//! fixed buffer), so a row's size never changes and updates overwrite in
//! place, as in Silo's TPC-C. Money is integer cents; rates (tax,
//! discount) are integer basis points (1/10 000).

use std::ops::Range;

use granary_api::TxError;

/// A fixed-capacity string field.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Str<const N: usize> {
    len: u16,
    bytes: [u8; N],
}

impl<const N: usize> Default for Str<N> {
    fn default() -> Self {
        Str {
            len: 0,
            bytes: [0; N],
        }
    }
}

impl<const N: usize> std::fmt::Debug for Str<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

impl<const N: usize> Str<N> {
    /// `s` truncated to the field's width.
    pub fn new(s: &[u8]) -> Self {
        let n = s.len().min(N);
        let mut bytes = [0; N];
        bytes[..n].copy_from_slice(&s[..n]);
        Str {
            len: n as u16,
            bytes,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// `parts` one after another, truncated to the field's width, without
    /// an intermediate buffer.
    pub fn concat(parts: &[&[u8]]) -> Self {
        let mut s = Str::default();
        let mut n = 0;
        for p in parts {
            let k = p.len().min(N - n);
            s.bytes[n..n + k].copy_from_slice(&p[..k]);
            n += k;
        }
        s.len = n as u16;
        s
    }
}

/// A field of a fixed-layout row.
pub trait Field: Sized {
    /// The field's encoded size: every value of the type has it.
    const WIDTH: usize;
    fn put(&self, out: &mut Vec<u8>);
    fn get(b: &mut &[u8]) -> Option<Self>;
    /// Overwrite the first [`Field::WIDTH`] bytes of `out` (at least that
    /// long) with the encoding [`Field::put`] appends.
    fn put_into(&self, out: &mut [u8]);
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
            #[inline]
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn put_into(&self, out: &mut [u8]) {
                out[..Self::WIDTH].copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn get(b: &mut &[u8]) -> Option<Self> {
                const W: usize = std::mem::size_of::<$t>();
                let (h, t) = b.split_first_chunk::<W>()?;
                *b = t;
                Some(<$t>::from_le_bytes(*h))
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64, i64);

impl<const N: usize> Field for Str<N> {
    const WIDTH: usize = 2 + N;
    #[inline]
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.bytes);
    }
    #[inline]
    fn put_into(&self, out: &mut [u8]) {
        self.len.put_into(out);
        out[2..2 + N].copy_from_slice(&self.bytes);
    }
    #[inline]
    fn get(b: &mut &[u8]) -> Option<Self> {
        let len = u16::get(b)?;
        let (h, t) = b.split_first_chunk::<N>()?;
        *b = t;
        (len as usize <= N).then_some(Str { len, bytes: *h })
    }
}

/// The field of type `F` at bytes `part` of a row, read from `bytes`, which
/// hold the row's bytes from `from` on (an update's field: see
/// [`Tx::update_field`](granary_api::Tx::update_field)). `None` if `bytes`
/// end before the field does.
#[inline]
pub fn get_in<F: Field>(bytes: &[u8], from: usize, part: Range<usize>) -> Option<F> {
    let mut b = bytes.get(part.start.checked_sub(from)?..part.end - from)?;
    F::get(&mut b)
}

/// Write `v` as the field at bytes `part` of a row into `bytes`, which
/// hold the row's bytes from `from` on. `None` (and nothing written) if
/// `bytes` end before the field does.
#[inline]
pub fn put_in<F: Field>(bytes: &mut [u8], from: usize, part: Range<usize>, v: &F) -> Option<()> {
    let b = bytes.get_mut(part.start.checked_sub(from)?..part.end - from)?;
    (b.len() == F::WIDTH).then(|| v.put_into(b))
}

/// Add `delta` to the integer field at bytes `part` of a row, in `bytes`
/// (the row's bytes from `from` on): [`get_in`], then [`put_in`].
#[inline]
pub fn add_in<F>(bytes: &mut [u8], from: usize, part: Range<usize>, delta: F) -> Option<()>
where
    F: Field + std::ops::Add<Output = F>,
{
    let v = get_in::<F>(bytes, from, part.clone())?;
    put_in(bytes, from, part, &(v + delta))
}

/// Each field's bytes in the encoded row, as associated consts named after
/// the fields (`Customer::balance` is C_BALANCE's byte range).
macro_rules! spans {
    ($at:expr;) => {};
    ($at:expr; $f:ident : $t:ty $(, $rf:ident : $rt:ty)*) => {
        #[allow(non_upper_case_globals)]
        #[doc = concat!("The bytes of `", stringify!($f), "` in the encoded row.")]
        pub const $f: Range<usize> = $at..$at + <$t as Field>::WIDTH;
        spans!($at + <$t as Field>::WIDTH; $($rf : $rt),*);
    };
}

/// A row that cannot be decoded: the table holds something else.
pub fn corrupt(table: &str) -> TxError {
    TxError::user(format!("tpcc: undecodable {table} row"))
}

macro_rules! row {
    ($(#[$m:meta])* $name:ident { $($f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $name { $(pub $f: $t),* }

        impl $name {
            spans!(0; $($f : $t),*);

            /// Encode into `out` (cleared first).
            #[inline]
            pub fn encode(&self, out: &mut Vec<u8>) {
                out.clear();
                $( Field::put(&self.$f, out); )*
            }

            /// Decode a stored row.
            ///
            /// # Errors
            /// A user error if the bytes are not such a row.
            #[inline]
            pub fn decode(mut b: &[u8]) -> Result<Self, TxError> {
                let b = &mut b;
                let r = (|| Some($name { $( $f: <$t as Field>::get(b)? ),* }))();
                r.ok_or_else(|| corrupt(stringify!($name)))
            }
        }
    };
}

row!(
    /// WAREHOUSE (1.3.1).
    Warehouse {
        name: Str<10>,
        street_1: Str<20>,
        street_2: Str<20>,
        city: Str<20>,
        state: Str<2>,
        zip: Str<9>,
        tax: u32,
        ytd: i64,
    }
);

row!(
    /// DISTRICT (1.3.2).
    District {
        name: Str<10>,
        street_1: Str<20>,
        street_2: Str<20>,
        city: Str<20>,
        state: Str<2>,
        zip: Str<9>,
        tax: u32,
        ytd: i64,
        next_o_id: u32,
    }
);

row!(
    /// CUSTOMER (1.3.3).
    Customer {
        first: Str<16>,
        middle: Str<2>,
        last: Str<16>,
        street_1: Str<20>,
        street_2: Str<20>,
        city: Str<20>,
        state: Str<2>,
        zip: Str<9>,
        phone: Str<16>,
        since: u64,
        credit: Str<2>,
        credit_lim: i64,
        discount: u32,
        balance: i64,
        ytd_payment: i64,
        payment_cnt: u32,
        delivery_cnt: u32,
        data: Str<500>,
    }
);

row!(
    /// HISTORY (1.3.4).
    History {
        c_id: u32,
        c_d_id: u8,
        c_w_id: u32,
        d_id: u8,
        w_id: u32,
        date: u64,
        amount: i64,
        data: Str<24>,
    }
);

row!(
    /// NEW-ORDER (1.3.5): the key is the row; the value is a marker.
    NewOrder { present: u8 }
);

row!(
    /// ORDER (1.3.6). `carrier_id` 0 is null.
    Order {
        c_id: u32,
        entry_d: u64,
        carrier_id: u8,
        ol_cnt: u8,
        all_local: u8,
    }
);

row!(
    /// ORDER-LINE (1.3.7). `delivery_d` 0 is null.
    OrderLine {
        i_id: u32,
        supply_w_id: u32,
        delivery_d: u64,
        quantity: u8,
        amount: i64,
        dist_info: Str<24>,
    }
);

row!(
    /// ITEM (1.3.8).
    Item {
        im_id: u32,
        name: Str<24>,
        price: i64,
        data: Str<50>,
    }
);

row!(
    /// STOCK (1.3.9).
    Stock {
        quantity: u32,
        dist: [Str<24>; 10],
        ytd: u64,
        order_cnt: u32,
        remote_cnt: u32,
        data: Str<50>,
    }
);

row!(
    /// STOCK's updated columns, when STOCK is split as Silo's `tpcc.cc`
    /// splits it ([`super::TpccConfig::split_stock`]): new-order changes
    /// these and only reads the rest ([`StockData`]), so a write (and its
    /// log record) is 20 bytes, not the whole row. S_QUANTITY is first, as
    /// in [`Stock`], so [`Stock::quantity_of`] reads either.
    StockHot {
        quantity: u32,
        ytd: u64,
        order_cnt: u32,
        remote_cnt: u32,
    }
);

row!(
    /// STOCK's columns that new-order only reads (S_DIST_xx, S_DATA), in
    /// their own table when STOCK is split.
    StockData {
        dist: [Str<24>; 10],
        data: Str<50>,
    }
);

/// `order(q, remote)` on the rows with S_QUANTITY, S_YTD, S_ORDER_CNT and
/// S_REMOTE_CNT: new-order's change for `q` items (clause 2.4.2.2),
/// `remote` if another warehouse supplies them; `order_in` makes it on the
/// encoded row's four fields alone.
macro_rules! order_stock {
    ($($row:ty),*) => {$(
        impl $row {
            /// Order `q` items from this stock (clause 2.4.2.2).
            pub fn order(&mut self, q: u32, remote: bool) {
                order_counts(
                    (&mut self.quantity, &mut self.ytd),
                    (&mut self.order_cnt, &mut self.remote_cnt),
                    q,
                    remote,
                );
            }

            /// [`Self::order`] on the encoded row's bytes from `from` on
            /// (through S_REMOTE_CNT at least), changing those four fields
            /// and nothing else. `None` if the bytes end too soon.
            pub fn order_in(b: &mut [u8], from: usize, q: u32, remote: bool) -> Option<()> {
                let mut quantity = get_in::<u32>(b, from, Self::quantity)?;
                let mut ytd = get_in::<u64>(b, from, Self::ytd)?;
                let mut order_cnt = get_in::<u32>(b, from, Self::order_cnt)?;
                let mut remote_cnt = get_in::<u32>(b, from, Self::remote_cnt)?;
                order_counts((&mut quantity, &mut ytd), (&mut order_cnt, &mut remote_cnt), q, remote);
                put_in(b, from, Self::quantity, &quantity)?;
                put_in(b, from, Self::ytd, &ytd)?;
                put_in(b, from, Self::order_cnt, &order_cnt)?;
                put_in(b, from, Self::remote_cnt, &remote_cnt)
            }
        }
    )*};
}

/// Clause 2.4.2.2's stock change for `q` items.
fn order_counts(
    (quantity, ytd): (&mut u32, &mut u64),
    (order_cnt, remote_cnt): (&mut u32, &mut u32),
    q: u32,
    remote: bool,
) {
    *quantity = if *quantity >= q + 10 {
        *quantity - q
    } else {
        *quantity + 91 - q
    };
    *ytd += q as u64;
    *order_cnt += 1;
    *remote_cnt += remote as u32;
}

order_stock!(Stock, StockHot);

impl StockData {
    /// The bytes [`StockData::dist_of`] needs for district `d` (1-based):
    /// S_DIST_xx come first, each a 2-byte length and 24 bytes.
    pub fn dist_bytes(d: u8) -> usize {
        d as usize * (2 + 24)
    }

    /// S_DIST_`d` alone, without decoding the row: new-order needs nothing
    /// else of it.
    ///
    /// # Errors
    /// A user error if the bytes are too short to hold it.
    pub fn dist_of(b: &[u8], d: u8) -> Result<Str<24>, TxError> {
        let at = Self::dist_bytes(d.saturating_sub(1));
        b.get(at..)
            .and_then(|mut b| Str::<24>::get(&mut b))
            .ok_or_else(|| corrupt("StockData"))
    }
}

impl Stock {
    /// The bytes of S_DIST_`d` (1-based) in the encoded row.
    pub fn dist_span(d: u8) -> Range<usize> {
        let at = Self::dist.start + (d.saturating_sub(1) as usize) * <Str<24> as Field>::WIDTH;
        at..at + <Str<24> as Field>::WIDTH
    }

    /// The bytes [`Stock::quantity_of`] needs: S_QUANTITY is the first
    /// field (of [`StockHot`] too).
    pub const QUANTITY_BYTES: usize = std::mem::size_of::<u32>();

    /// S_QUANTITY alone (the first field), without decoding the row:
    /// stock-level reads ~200 stock rows and needs nothing else.
    ///
    /// # Errors
    /// A user error if the bytes are too short to be a stock row.
    #[inline]
    pub fn quantity_of(b: &[u8]) -> Result<u32, TxError> {
        let mut b = b;
        u32::get(&mut b).ok_or_else(|| corrupt("Stock"))
    }
}

impl<T: Field + Default + Copy, const N: usize> Field for [T; N] {
    const WIDTH: usize = N * T::WIDTH;
    fn put(&self, out: &mut Vec<u8>) {
        for x in self {
            x.put(out);
        }
    }
    fn put_into(&self, out: &mut [u8]) {
        for (x, o) in self.iter().zip(out.chunks_mut(T::WIDTH)) {
            x.put_into(o);
        }
    }
    fn get(b: &mut &[u8]) -> Option<Self> {
        let mut a = [T::default(); N];
        for x in &mut a {
            *x = T::get(b)?;
        }
        Some(a)
    }
}

/// Keys: composites packed into one big-endian `u64` wherever they fit, so
/// the index compares them as single integers (keys over 8 bytes are
/// stored out of line and compared with `memcmp`). Field widths: warehouse
/// 14 bits (the spec's limit is 10 000), district 4, customer 12, order 28
/// (268 M orders per district), order-line number 4, item 17; packing
/// high-to-low keeps the primary-key order. Only the customer-by-name
/// index needs a longer key.
pub mod key {
    /// The largest order id a key can hold.
    pub const MAX_ORDER_ID: u32 = (1 << 28) - 1;

    /// The warehouse's width in bits: the top bits of every packed key
    /// (and of the customer-by-name key), the partition key.
    pub const WAREHOUSE_BITS: u32 = 14;
    const W: u32 = WAREHOUSE_BITS;

    #[inline]
    fn pack(fields: &[(u64, u32)]) -> [u8; 8] {
        let mut x = 0u64;
        let mut used = 0;
        for &(v, bits) in fields {
            debug_assert!(v < 1 << bits, "key field {v} over {bits} bits");
            x = x << bits | (v & ((1 << bits) - 1));
            used += bits;
        }
        (x << (64 - used)).to_be_bytes()
    }

    #[inline]
    fn unpack(k: &[u8], shift_from_top: u32, bits: u32) -> Option<u32> {
        let x = u64::from_be_bytes(k.get(..8)?.try_into().ok()?);
        Some(((x << shift_from_top) >> (64 - bits)) as u32)
    }

    #[inline]
    pub fn warehouse(w: u32) -> [u8; 4] {
        w.to_be_bytes()
    }

    #[inline]
    pub fn district(w: u32, d: u8) -> [u8; 8] {
        pack(&[(w as u64, W), (d as u64, 4)])
    }

    #[inline]
    pub fn customer(w: u32, d: u8, c: u32) -> [u8; 8] {
        pack(&[(w as u64, W), (d as u64, 4), (c as u64, 12)])
    }

    /// Customer-by-name index: (w, d, last, first, c). Names are padded
    /// with zero bytes to 16, which keeps them ordered (names have no
    /// zero bytes).
    pub fn customer_name(w: u32, d: u8, last: &[u8], first: &[u8], c: u32) -> [u8; 40] {
        let mut k = [0; 40];
        k[..4].copy_from_slice(&district(w, d)[..4]);
        k[4..4 + last.len().min(16)].copy_from_slice(&last[..last.len().min(16)]);
        k[20..20 + first.len().min(16)].copy_from_slice(&first[..first.len().min(16)]);
        k[36..].copy_from_slice(&c.to_be_bytes());
        k
    }

    /// Prefix of [`customer_name`] for all customers with this last name.
    pub fn customer_name_prefix(w: u32, d: u8, last: &[u8]) -> [u8; 20] {
        let mut k = [0; 20];
        k[..4].copy_from_slice(&district(w, d)[..4]);
        k[4..4 + last.len().min(16)].copy_from_slice(&last[..last.len().min(16)]);
        k
    }

    /// The customer id at the end of a [`customer_name`] key.
    pub fn customer_name_id(k: &[u8]) -> Option<u32> {
        Some(u32::from_be_bytes(k.get(36..40)?.try_into().ok()?))
    }

    /// The customer id of a [`customer`] key.
    pub fn customer_id(k: &[u8]) -> Option<u32> {
        unpack(k, 18, 12)
    }

    /// The warehouse and district of a packed key that has them (a
    /// [`district`], [`customer`], [`order`] or [`order_line`] key).
    pub fn warehouse_district(k: &[u8]) -> Option<(u32, u8)> {
        Some((unpack(k, 0, W)?, unpack(k, W, 4)? as u8))
    }

    /// ORDER and NEW-ORDER: (w, d, o).
    #[inline]
    pub fn order(w: u32, d: u8, o: u32) -> [u8; 8] {
        pack(&[(w as u64, W), (d as u64, 4), (o as u64, 28)])
    }

    /// The order id of an [`order`] or [`order_line`] key.
    pub fn order_id(k: &[u8]) -> Option<u32> {
        unpack(k, 18, 28)
    }

    /// Order-by-customer index: (w, d, c, o).
    pub fn order_customer(w: u32, d: u8, c: u32, o: u32) -> [u8; 8] {
        pack(&[(w as u64, W), (d as u64, 4), (c as u64, 12), (o as u64, 28)])
    }

    /// The order id at the end of an [`order_customer`] key.
    pub fn order_customer_id(k: &[u8]) -> Option<u32> {
        unpack(k, 30, 28)
    }

    /// ORDER-LINE: (w, d, o, number).
    #[inline]
    pub fn order_line(w: u32, d: u8, o: u32, n: u8) -> [u8; 8] {
        pack(&[(w as u64, W), (d as u64, 4), (o as u64, 28), (n as u64, 4)])
    }

    #[inline]
    pub fn item(i: u32) -> [u8; 4] {
        i.to_be_bytes()
    }

    #[inline]
    pub fn stock(w: u32, i: u32) -> [u8; 8] {
        pack(&[(w as u64, W), (i as u64, 17)])
    }

    /// HISTORY has no primary key: (w, thread, sequence) keeps inserts
    /// from different threads apart.
    #[inline]
    pub fn history(w: u32, thread: u16, seq: u64) -> [u8; 8] {
        pack(&[(w as u64, W), (thread as u64, 16), (seq, 34)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_reject_garbage() {
        let mut s = Stock {
            quantity: 42,
            ytd: 7,
            data: Str::new(b"ORIGINAL"),
            ..Stock::default()
        };
        s.dist[3] = Str::new(b"abcdefghijklmnopqrstuvwxyz");
        let mut buf = Vec::new();
        s.encode(&mut buf);
        let back = Stock::decode(&buf).unwrap();
        assert_eq!(Stock::quantity_of(&buf).unwrap(), 42);
        assert_eq!(back, s);
        assert_eq!(back.dist[3].as_bytes(), b"abcdefghijklmnopqrstuvwx");
        assert!(Stock::decode(&buf[..buf.len() - 1]).is_err());
        let hot = StockHot {
            quantity: 17,
            ytd: 3,
            order_cnt: 2,
            remote_cnt: 1,
        };
        hot.encode(&mut buf);
        assert_eq!(buf.len(), 20, "a split stock write is 20 bytes");
        assert_eq!(Stock::quantity_of(&buf).unwrap(), 17);
        assert_eq!(StockHot::decode(&buf).unwrap(), hot);
        let mut data = StockData::default();
        data.dist[6] = Str::new(b"seventh");
        data.encode(&mut buf);
        let d7 = &buf[..StockData::dist_bytes(7)];
        assert_eq!(StockData::dist_of(d7, 7).unwrap().as_bytes(), b"seventh");
        assert!(StockData::dist_of(&d7[..d7.len() - 1], 7).is_err());
        let c = Customer::default();
        c.encode(&mut buf);
        assert!(buf.len() > 600, "full-width customer row: {}", buf.len());
    }

    /// Each field's span is where `encode` puts it: a field read at its
    /// span (from a slice that starts anywhere before it) is the field,
    /// one written there decodes as written, and the spans tile the row.
    #[test]
    fn field_spans_are_where_encode_puts_them() {
        let mut buf = Vec::new();
        let c = Customer {
            last: Str::new(b"BARBARBAR"),
            balance: -1_234_567,
            ytd_payment: 99,
            payment_cnt: 7,
            delivery_cnt: 3,
            data: Str::new(b"x"),
            ..Customer::default()
        };
        c.encode(&mut buf);
        assert_eq!(Customer::first.start, 0);
        assert_eq!(Customer::data.end, buf.len(), "the spans tile the row");
        let from = Customer::balance.start;
        let part = &mut buf[from..Customer::delivery_cnt.end];
        assert_eq!(
            get_in::<i64>(part, from, Customer::balance),
            Some(c.balance)
        );
        assert_eq!(get_in::<u32>(part, from, Customer::delivery_cnt), Some(3));
        assert_eq!(get_in::<u32>(part, from, Customer::payment_cnt), Some(7));
        // Outside the slice: before it, or past its end.
        assert_eq!(get_in::<Str<16>>(part, from, Customer::last), None);
        assert_eq!(get_in::<Str<500>>(part, from, Customer::data), None);
        assert_eq!(
            put_in(part, from, Customer::data, &Str::<500>::new(b"y")),
            None
        );
        put_in(part, from, Customer::delivery_cnt, &2u32).unwrap();
        add_in(part, from, Customer::delivery_cnt, 2u32).unwrap();
        assert_eq!(add_in(part, from, Customer::data, 1u32), None);
        let back = Customer::decode(&buf).unwrap();
        assert_eq!(back.delivery_cnt, 4);
        assert_eq!(
            Customer {
                delivery_cnt: 4,
                ..c
            },
            back
        );

        let l = OrderLine {
            i_id: 5,
            delivery_d: 11,
            quantity: 3,
            amount: 4_200,
            dist_info: Str::new(b"info"),
            ..OrderLine::default()
        };
        l.encode(&mut buf);
        assert_eq!(OrderLine::dist_info.end, buf.len());
        assert_eq!(get_in::<i64>(&buf, 0, OrderLine::amount), Some(4_200));
        assert_eq!(get_in::<u64>(&buf, 0, OrderLine::delivery_d), Some(11));

        let d = District {
            tax: 1_500,
            ytd: 3,
            next_o_id: 3_001,
            ..District::default()
        };
        d.encode(&mut buf);
        assert_eq!(District::next_o_id.end, buf.len());
        assert_eq!(get_in::<u32>(&buf, 0, District::tax), Some(1_500));
        assert_eq!(get_in::<u32>(&buf, 0, District::next_o_id), Some(3_001));

        // `order_in` on the bytes is `order` on the row, for both layouts.
        let mut s = Stock {
            quantity: 12,
            ytd: 5,
            order_cnt: 1,
            data: Str::new(b"ORIGINAL"),
            ..Stock::default()
        };
        s.dist[4] = Str::new(b"fifth");
        s.encode(&mut buf);
        assert_eq!(Stock::data.end, buf.len());
        assert_eq!(
            get_in::<Str<24>>(&buf, 0, Stock::dist_span(5)),
            Some(s.dist[4])
        );
        Stock::order_in(&mut buf, 0, 5, true).unwrap();
        s.order(5, true);
        assert_eq!(Stock::decode(&buf).unwrap(), s);
        let mut hot = StockHot {
            quantity: 50,
            ytd: 0,
            order_cnt: 0,
            remote_cnt: 0,
        };
        hot.encode(&mut buf);
        assert_eq!(StockHot::remote_cnt.end, buf.len());
        StockHot::order_in(&mut buf, 0, 9, false).unwrap();
        hot.order(9, false);
        assert_eq!(StockHot::decode(&buf).unwrap(), hot);
        assert_eq!(StockHot::order_in(&mut buf[..19], 0, 1, false), None);
    }

    #[test]
    fn keys_order_like_the_primary_keys() {
        assert!(key::order(1, 2, 300) < key::order(1, 3, 1));
        assert!(key::order_line(1, 1, 5, 15) < key::order_line(1, 1, 6, 1));
        assert!(
            key::customer_name(1, 1, b"ABLE", b"ZED", 9)
                < key::customer_name(1, 1, b"ABLEX", b"A", 1)
        );
        assert!(key::order_line(1, 1, 5, 15) < key::order_line(1, 2, 1, 1));
        assert!(key::customer(1, 10, 3000) < key::customer(2, 1, 1));
        assert_eq!(
            key::order_id(&key::order_line(77, 9, 123_456, 3)),
            Some(123_456)
        );
        assert_eq!(key::customer_id(&key::customer(77, 9, 2_999)), Some(2_999));
        assert_eq!(
            key::warehouse_district(&key::customer(10_000, 9, 2_999)),
            Some((10_000, 9))
        );
        assert_eq!(
            key::warehouse_district(&key::order_line(3, 10, 5, 1)),
            Some((3, 10))
        );
        assert_eq!(
            key::order_id(&key::order(10_000, 10, key::MAX_ORDER_ID)),
            Some(key::MAX_ORDER_ID)
        );
        assert_eq!(
            key::order_customer_id(&key::order_customer(5, 3, 2999, 4242)),
            Some(4242)
        );
        let k = key::customer_name(3, 4, b"BAR", b"FOO", 1234);
        assert_eq!(key::customer_name_id(&k), Some(1234));
        assert!(k.starts_with(&key::customer_name_prefix(3, 4, b"BAR")));
    }
}
