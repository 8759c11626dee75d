//! A caller whose tool bodies run in worker processes (start `examples/worker.rs`
//! first, with the same URL): calls relocated branches by name with JSON and
//! shows which process ran each body.
//!
//! Run: `cargo run --example distributed -p toolgraft-jobs --features redis -- redis://127.0.0.1:6379`

#[path = "remote_toolset/mod.rs"]
mod remote_toolset;

use std::time::{Duration, Instant};

use serde_json::json;
use toolgraft_jobs::Remote;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = remote_toolset::url();
    let remote = Remote::new(&url)?
        .with_queue("weather")?
        .with_timeout(Duration::from_secs(10));
    let toolset = remote_toolset::toolset(&remote)?;
    println!("caller pid {}, jobs on {url}\n", std::process::id());

    let calls = [
        (
            "weather_proxy_remote",
            json!({"city": "Lisbon", "proxies": ["egress-us"]}),
        ),
        ("weather_remote_cache", json!({"city": "Oslo", "exp": 60})),
        ("weather_remote_cache", json!({"city": "Oslo", "exp": 60})),
        (
            "weather_batch_remote",
            json!({"items": [{"city": "Quito"}, {"city": "Hanoi"}], "parallel": true}),
        ),
        ("weather_proxy_remote", json!({"town": "Lisbon"})),
        ("weather_proxy_remote", json!({"city": " "})),
    ];
    for (name, args) in calls {
        let started = Instant::now();
        let outcome = toolset.call(name, args.clone()).await;
        let took = started.elapsed().as_secs_f64() * 1e3;
        println!("{name} {args}  ({took:.1} ms)");
        match outcome {
            Ok(value) => println!("  -> {value}"),
            Err(error) => println!("  -> error: {error}"),
        }
    }
    Ok(())
}
