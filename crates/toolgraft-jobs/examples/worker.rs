//! A worker process: binds the same toolset as its callers and runs their jobs by
//! name until SIGTERM (then finishes the jobs in flight).
//!
//! Run: `cargo run --example worker -p toolgraft-jobs --features redis -- redis://127.0.0.1:6379`
//! (or an `sqlite://path/to/jobs.db` URL shared with the callers; no argument: an
//! SQLite file in the temp directory). Start several for more throughput.

#[path = "remote_toolset/mod.rs"]
mod remote_toolset;

use toolgraft_jobs::{Remote, Worker};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let url = remote_toolset::url();
    let remote = Remote::new(&url)?.with_queue("weather")?;
    let toolset = remote_toolset::toolset(&remote)?;
    eprintln!(
        "worker pid {} serving queue `weather` on {url}",
        std::process::id()
    );
    Worker::new(toolset, &remote)
        .with_concurrency(32)
        .run()
        .await?;
    eprintln!("worker pid {}: stopped cleanly", std::process::id());
    Ok(())
}
