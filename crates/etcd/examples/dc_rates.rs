//! What `EtcdDc` does per second on a local etcd started for the run:
//! gets from 1 and 2 threads, and applied operations in batches of
//! several sizes. `cargo run --release --example dc_rates`.
use std::time::Instant;

use granary_etcd::{EtcdDc, EtcdOptions, EtcdServer};
use granary_protocols::deuteronomy::dc::{DataComponent, Op};

const N: usize = 4000;

fn main() {
    let dir = std::env::temp_dir().join(format!("granary-etcd-gets-{}", std::process::id()));
    let server = EtcdServer::start(&dir).expect("etcd").scratch();
    let dc = EtcdDc::connect(EtcdOptions::new(vec![server.endpoint()])).expect("connect");
    let keys: Vec<[u8; 8]> = (0..1000u64).map(|i| i.to_be_bytes()).collect();
    let ops: Vec<Op<'_>> = keys
        .iter()
        .map(|k| Op {
            table: 1,
            key: k,
            value: Some(&[7; 100]),
            lsn: 1,
        })
        .collect();
    dc.apply(&ops).unwrap();
    for threads in [1, 2] {
        let t = Instant::now();
        std::thread::scope(|s| {
            for th in 0..threads {
                let (dc, keys) = (&dc, &keys);
                s.spawn(move || {
                    let mut out = Vec::new();
                    for i in 0..N {
                        dc.get(1, &keys[(i * 7 + th) % 1000], &mut out).unwrap();
                    }
                });
            }
        });
        let s = t.elapsed().as_secs_f64();
        println!(
            "get, {threads} threads: {:.0} gets/s",
            (threads * N) as f64 / s
        );
    }
    let keys: Vec<[u8; 8]> = (0..100_000u64).map(|i| i.to_be_bytes()).collect();
    for batch in [1, 4, 64, 1024, 16 << 10] {
        let t = Instant::now();
        let total = (batch * 200).min(keys.len());
        for (lsn, chunk) in (2..).zip(keys[..total].chunks(batch)) {
            let ops: Vec<Op<'_>> = chunk
                .iter()
                .map(|k| Op {
                    table: 2,
                    key: k,
                    value: Some(&[9; 100]),
                    lsn,
                })
                .collect();
            dc.apply(&ops).unwrap();
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "apply, batches of {batch}: {:.0} ops/s, {:.2} ms per batch",
            total as f64 / s,
            1000.0 * s / total.div_ceil(batch) as f64
        );
    }
}
