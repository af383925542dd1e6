//! Which runtime serves `get` faster from 2 threads: one multi-thread
//! runtime shared by all callers, or a current-thread runtime (and
//! connection) per caller. `URL=http://127.0.0.1:PORT cargo run --release
//! --example get_runtimes`.
use std::time::Instant;

use etcd_client::Client;
use tokio::runtime::{Builder, Runtime};

const N: usize = 4000;

fn main() {
    let url = std::env::var("URL").expect("URL of an etcd");
    let setup = Builder::new_current_thread().enable_all().build().unwrap();
    setup.block_on(async {
        let mut c = Client::connect([&url], None).await.unwrap();
        for i in 0..1000 {
            c.put(format!("g/{i}"), vec![7u8; 100], None).await.unwrap();
        }
    });
    for threads in [1, 2] {
        for workers in [1, 2] {
            let rt = Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .unwrap();
            let c = rt.block_on(Client::connect([&url], None)).unwrap();
            let t = Instant::now();
            std::thread::scope(|s| {
                for th in 0..threads {
                    let (rt, c) = (&rt, c.clone());
                    s.spawn(move || {
                        let mut kv = c.kv_client();
                        for i in 0..N {
                            rt.block_on(kv.get(format!("g/{}", (i * 7 + th) % 1000), None))
                                .unwrap();
                        }
                    });
                }
            });
            let s = t.elapsed().as_secs_f64();
            println!(
                "shared multi-thread runtime, {workers} workers, {threads} callers: {:.0} gets/s",
                (threads * N) as f64 / s
            );
        }
        let rts: Vec<(Runtime, Client)> = (0..threads)
            .map(|_| {
                let rt = Builder::new_current_thread().enable_all().build().unwrap();
                let c = rt.block_on(Client::connect([&url], None)).unwrap();
                (rt, c)
            })
            .collect();
        let t = Instant::now();
        std::thread::scope(|s| {
            for (th, (rt, c)) in rts.iter().enumerate() {
                s.spawn(move || {
                    let mut kv = c.kv_client();
                    for i in 0..N {
                        rt.block_on(kv.get(format!("g/{}", (i * 7 + th) % 1000), None))
                            .unwrap();
                    }
                });
            }
        });
        let s = t.elapsed().as_secs_f64();
        println!(
            "current-thread runtime per caller, {threads} callers: {:.0} gets/s",
            (threads * N) as f64 / s
        );
    }
}
