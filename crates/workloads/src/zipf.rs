//! YCSB's Zipfian key chooser (Cooper et al., SoCC'10), after Gray et al.,
//! "Quickly generating billion-record synthetic databases" (SIGMOD'94).
//!
//! Item `i` (0-based rank) is drawn with probability proportional to
//! `1/(i+1)^θ`. Ranks 0 and 1 are exact; the rest follow Gray's closed-form
//! inverse. [`Zipf::scrambled`] spreads the popular ranks over the key
//! space with a 64-bit FNV-1a hash, as YCSB's `ScrambledZipfianGenerator`
//! does, so hot keys are not neighbours in the index.
//!
//! This is not `rand_distr::Zipf` (an exact rejection sampler over
//! `1..=n`); the unscrambled mode is tested against it.

use std::fmt;

use crate::rng::Rng;

/// The item count YCSB's scrambled generator draws ranks from before
/// hashing them onto the key space (`ScrambledZipfianGenerator.ITEM_COUNT`).
const SCRAMBLE_ITEMS: u64 = 10_000_000_000;

/// A bad Zipfian parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum ZipfError {
    /// θ must be in `[0, 1)`: Gray's formula divides by `1 − θ`.
    Theta(f64),
    /// At least one item.
    NoItems,
}

impl fmt::Display for ZipfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZipfError::Theta(t) => write!(f, "Zipfian theta must be in [0, 1), got {t}"),
            ZipfError::NoItems => f.write_str("a Zipfian distribution needs at least one item"),
        }
    }
}

impl std::error::Error for ZipfError {}

/// Draws ranks (or scrambled keys) in `[0, n)`.
#[derive(Clone, Debug)]
pub struct Zipf {
    /// Keys returned are in `[0, n)`.
    n: u64,
    /// Ranks are drawn from `[0, items)` (`items` = n, or
    /// [`SCRAMBLE_ITEMS`] when scrambled).
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    /// `1 + 0.5^θ`: below this (times ζ(n)), the rank is 1.
    two_cut: f64,
    scrambled: bool,
}

impl Zipf {
    /// Ranks `0..n`, rank 0 the most popular.
    ///
    /// # Errors
    /// [`ZipfError`] for θ outside `[0, 1)` or `n` = 0.
    pub fn new(n: u64, theta: f64) -> Result<Zipf, ZipfError> {
        Zipf::build(n, n, theta, false)
    }

    /// YCSB's scrambled Zipfian: a rank from a Zipfian over 10¹⁰ items,
    /// FNV-hashed onto `0..n`.
    ///
    /// # Errors
    /// As for [`Zipf::new`].
    pub fn scrambled(n: u64, theta: f64) -> Result<Zipf, ZipfError> {
        Zipf::build(n, SCRAMBLE_ITEMS, theta, true)
    }

    fn build(n: u64, items: u64, theta: f64, scrambled: bool) -> Result<Zipf, ZipfError> {
        if !(0.0..1.0).contains(&theta) {
            return Err(ZipfError::Theta(theta));
        }
        if n == 0 {
            return Err(ZipfError::NoItems);
        }
        let zetan = zeta(items, theta);
        let zeta2 = zeta(2.min(items), theta);
        let eta = if items <= 2 {
            0.0
        } else {
            (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan)
        };
        Ok(Zipf {
            n,
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
            two_cut: 1.0 + 0.5f64.powf(theta),
            scrambled,
        })
    }

    /// The skew parameter θ.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// Draw one key in `[0, n)`.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let rank = self.rank(rng);
        if self.scrambled {
            fnv1a64(rank) % self.n
        } else {
            rank
        }
    }

    #[inline]
    fn rank(&self, rng: &mut Rng) -> u64 {
        // 53 random bits → u in [0, 1).
        let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let uz = u * self.zetan;
        if uz < 1.0 || self.items == 1 {
            return 0;
        }
        if uz < self.two_cut || self.items == 2 {
            return 1;
        }
        let r = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.items - 1)
    }
}

/// The θ for which the `hot_keys` most popular of `n` items draw
/// `hot_share` of the accesses, under the exact Zipfian distribution:
/// ζ(h, θ) / ζ(n, θ) = `hot_share` with h = ⌈`hot_keys` · n⌉. For the "80%
/// of accesses to 20% of keys" skew (Deuteronomy §6.1) that is θ ≈ 0.95 at
/// 10⁴ keys, 0.894 at 10⁶ and 0.878 at 5·10⁷. (Gray's sampler, which
/// [`Zipf`] uses, then gives the hot set 80.0–80.4%.)
///
/// `None` when no θ in `[0, 1)` gets there (too few items: even θ → 1 is
/// not skewed enough), or for fractions outside `(0, 1)`.
pub fn theta_for_hot_set(n: u64, hot_keys: f64, hot_share: f64) -> Option<f64> {
    let unit = |x: f64| x > 0.0 && x < 1.0;
    if n == 0 || !unit(hot_keys) || !unit(hot_share) {
        return None;
    }
    let h = ((hot_keys * n as f64).ceil() as u64).clamp(1, n);
    // ζ(h)/ζ(n) rises with θ, from h/n at θ = 0.
    let share = |t: f64| zeta_with(h, t, 10_000) / zeta_with(n, t, 10_000);
    let (mut lo, mut hi) = (0.0f64, 1.0 - 1e-9);
    if share(lo) >= hot_share {
        return Some(0.0);
    }
    if share(hi) < hot_share {
        return None;
    }
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if share(mid) < hot_share {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi)
}

/// ζ(n, θ) = Σ_{i=1..n} i^−θ. Summed exactly up to 10⁶ terms; beyond, the
/// tail is the Euler–Maclaurin estimate (error far below 10⁻⁹ there).
fn zeta(n: u64, theta: f64) -> f64 {
    zeta_with(n, theta, 1_000_000)
}

/// ζ(n, θ), summed exactly up to `exact` terms, Euler–Maclaurin beyond
/// (the first omitted correction is about θ³·`exact`^(−θ−3)/720).
fn zeta_with(n: u64, theta: f64, exact: u64) -> f64 {
    let m = n.min(exact);
    // Sum small terms first for accuracy.
    let mut s: f64 = (1..=m).rev().map(|i| (i as f64).powf(-theta)).sum();
    if n > m {
        let f = |x: f64| x.powf(-theta);
        let integral = |x: f64| x.powf(1.0 - theta) / (1.0 - theta);
        let (a, b) = (m as f64, n as f64);
        // Σ_{i=m+1..n} f(i) ≈ ∫_m^n f + (f(n) − f(m))/2 − (f'(n) − f'(m))/12
        let df = |x: f64| -theta * x.powf(-theta - 1.0);
        s += integral(b) - integral(a) + (f(b) - f(a)) / 2.0 + (df(b) - df(a)) / 12.0;
    }
    s
}

/// YCSB's `Utils.fnvhash64`: FNV-1a over the value's 8 bytes, low byte
/// first, made non-negative as Java's `Math.abs` on a `long` does.
#[inline]
pub fn fnv1a64(mut v: u64) -> u64 {
    const OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01B3;
    let mut h = OFFSET;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(PRIME);
        v >>= 8;
    }
    (h as i64).unsigned_abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_parameters() {
        assert_eq!(Zipf::new(10, 1.0).unwrap_err(), ZipfError::Theta(1.0));
        assert_eq!(Zipf::new(10, -0.1).unwrap_err(), ZipfError::Theta(-0.1));
        assert!(Zipf::new(10, f64::NAN).is_err());
        assert_eq!(Zipf::new(0, 0.5).unwrap_err(), ZipfError::NoItems);
    }

    #[test]
    fn zeta_tail_matches_exact_sum() {
        // Compare the Euler–Maclaurin tail against brute force at 3M.
        let n = 3_000_000u64;
        let exact: f64 = (1..=n).rev().map(|i| (i as f64).powf(-0.99)).sum();
        let est = zeta(n, 0.99);
        assert!((exact - est).abs() < 1e-9, "{exact} vs {est}");
        // YCSB's precomputed ζ(10¹⁰, 0.99).
        assert!((zeta(SCRAMBLE_ITEMS, 0.99) - 26.469_028_201_783_02).abs() < 1e-6);
    }

    #[test]
    fn stays_in_range_and_theta_zero_is_uniform() {
        let mut rng = Rng::new(7, 0);
        for (n, theta) in [(1u64, 0.5), (2, 0.99), (3, 0.99), (1000, 0.0), (1000, 0.99)] {
            for z in [
                Zipf::new(n, theta).unwrap(),
                Zipf::scrambled(n, theta).unwrap(),
            ] {
                for _ in 0..10_000 {
                    assert!(z.next(&mut rng) < n);
                }
            }
        }
        let z = Zipf::new(10, 0.0).unwrap();
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[z.next(&mut rng) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn fnv_matches_ycsb() {
        // FNV-1a of eight zero bytes, as YCSB's fnvhash64(0) computes it.
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(0x100_0000_01B3);
        }
        assert_eq!(fnv1a64(0), (h as i64).unsigned_abs());
        assert_ne!(fnv1a64(1), fnv1a64(256));
    }
}
