//! Relocated calls, end to end: a caller process and two worker processes (this
//! binary started again), a trivial body, on each tier built in. Reports the round
//! trip's median and p99 (sequential calls), calls per second (64 callers at once),
//! the CPU an idle worker burns (from /proc, over a few seconds) and the round
//! trips a call costs, caller and workers together, as the server counts them
//! (Redis: `total_commands_processed`; PostgreSQL: the statements
//! `pg_stat_statements` counts, `BEGIN` and `COMMIT` among them).
//!
//! Run: `cargo bench -p toolgraft-jobs --all-features --bench relocated`
//! (`TOOLGRAFT_REDIS_URL` names a server, else one is started on a free port;
//! a PostgreSQL server is started with `scripts/postgres`).

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::error::BoxError;
use toolgraft::prelude::*;
use toolgraft_jobs::{Remote, Worker};

const WORKER_URL: &str = "TOOLGRAFT_BENCH_WORKER_URL";
const SEQUENTIAL: usize = 2_000;
const CONCURRENT: usize = 64;
const THROUGHPUT_FOR: Duration = Duration::from_secs(4);
const IDLE_FOR: Duration = Duration::from_secs(5);

#[derive(Deserialize, Serialize, schemars::JsonSchema)]
struct Echo {
    n: u64,
}

fn toolset(remote: &Remote) -> Toolset {
    let echo = Tool::builder()
        .name("echo")
        .description("Return the number.")
        .body(|input: Echo| async move { Ok::<_, BoxError>(input.n) })
        .build()
        .expect("a valid tool");
    let toolset = Toolset::new();
    toolset
        .bind((echo.combo().with(remote.clone()),))
        .expect("binds");
    toolset
}

/// Set: the retention run's number of jobs (Redis only; see `retention`).
const RETENTION_JOBS: &str = "TOOLGRAFT_BENCH_RETENTION_JOBS";

fn remote(url: &str) -> Remote {
    let mut config: toolgraft_jobs::RemoteConfig =
        serde_json::from_value(json!({ "url": url })).expect("a config");
    config.queue = "bench".to_owned();
    config.timeout_ms = 30_000;
    if std::env::var_os(RETENTION_JOBS).is_some() {
        config.retention_s = 1;
    }
    <Remote as toolgraft::extension::Configurable>::from_config(config).expect("a valid config")
}

fn worker_main(url: String) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let remote = remote(&url);
    runtime
        .block_on(Worker::new(toolset(&remote), &remote).run())
        .expect("the worker runs");
}

/// CPU seconds (user + system) a process has used, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After the command: state is field 0; utime 11, stime 12.
    (ticks(11) + ticks(12)) / 100.0
}

struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn start_redis() -> (String, Option<Child>) {
    if let Ok(url) = std::env::var("TOOLGRAFT_REDIS_URL") {
        return (url, None);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (format!("redis://127.0.0.1:{port}"), Some(child))
}

/// A PostgreSQL server of the bench's own (`scripts/postgres`, which loads
/// `pg_stat_statements`): its URL and its directory.
#[cfg(feature = "postgres")]
fn start_postgres() -> (String, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("toolgraft-bench-pg-{}", std::process::id()));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres");
    let out = Command::new(script)
        .arg("start")
        .arg(&dir)
        .output()
        .expect("scripts/postgres runs");
    assert!(
        out.status.success(),
        "scripts/postgres could not start a server"
    );
    let url = String::from_utf8(out.stdout)
        .expect("a URL")
        .trim()
        .to_owned();
    (url, dir)
}

/// Where the server counts what it was asked: Redis's MONITOR (its
/// `total_commands_processed` counts the commands scripts run inside it), and
/// PostgreSQL's `pg_stat_statements`.
#[allow(dead_code)]
enum Counter {
    Redis(String),
    Postgres(String),
    /// A file: no server, no round trips.
    None,
}

impl Counter {
    /// The requests the server has served so far (PostgreSQL's statements).
    async fn read(&self) -> Option<f64> {
        match self {
            #[cfg(feature = "postgres")]
            Counter::Postgres(url) => {
                let pool = sqlx::PgPool::connect(url).await.ok()?;
                let _ = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                    .execute(&pool)
                    .await;
                let calls: Option<f64> =
                    sqlx::query_scalar("SELECT sum(calls)::float8 FROM pg_stat_statements")
                        .fetch_one(&pool)
                        .await
                        .ok()?;
                pool.close().await;
                calls
            }
            _ => None,
        }
    }
}

/// The round trips in MONITOR's `lines` (`<time> [<db> <client or lua>]
/// "COMMAND" ..`): a script's own commands are none, a transaction (MULTI ..
/// EXEC) is one.
#[cfg(feature = "redis")]
fn requests(lines: &[String]) -> usize {
    let mut in_transaction = std::collections::BTreeSet::<&str>::new();
    let mut round_trips = 0;
    for line in lines {
        let Some((source, command)) = line
            .split_once(" [")
            .and_then(|(_, rest)| rest.split_once("] "))
        else {
            continue;
        };
        if source.ends_with(" lua") {
            continue;
        }
        let name = command
            .split('"')
            .nth(1)
            .unwrap_or_default()
            .to_ascii_uppercase();
        match name.as_str() {
            "MULTI" => {
                in_transaction.insert(source);
            }
            "EXEC" | "DISCARD" => {
                in_transaction.remove(source);
                round_trips += 1;
            }
            _ if in_transaction.contains(source) => {}
            _ => round_trips += 1,
        }
    }
    round_trips
}

/// How many calls the round trips are counted over, apart from the timed ones
/// (MONITOR slows Redis down).
const COUNTED: u64 = 500;

/// The round trips a call costs, caller and workers together, over [`COUNTED`]
/// sequential calls.
async fn round_trips(counter: &Counter, toolset: &Toolset) -> String {
    let calls = async {
        for n in 0..COUNTED {
            let answer = toolset.call("echo_remote", json!({ "n": n })).await;
            assert_eq!(answer.expect("the call answers"), json!(n));
        }
    };
    match counter {
        #[cfg(feature = "redis")]
        Counter::Redis(url) => {
            use futures_util::StreamExt as _;
            let client = redis::Client::open(url.as_str()).expect("a Redis URL");
            let monitor = client.get_async_monitor().await.expect("MONITOR");
            let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
            let heard = lines.clone();
            let listening = tokio::spawn(async move {
                let mut messages = monitor.into_on_message::<String>();
                while let Some(line) = messages.next().await {
                    heard.lock().expect("lines").push(line);
                }
            });
            tokio::time::sleep(Duration::from_millis(200)).await;
            lines.lock().expect("lines").clear();
            calls.await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            listening.abort();
            let lines = std::mem::take(&mut *lines.lock().expect("lines"));
            format!("{:.1}", requests(&lines) as f64 / COUNTED as f64)
        }
        #[cfg(feature = "postgres")]
        Counter::Postgres(_) => {
            let before = counter.read().await;
            calls.await;
            match (before, counter.read().await) {
                // Less the counter's own statements (three each time).
                (Some(before), Some(after)) => {
                    format!("{:.1}", (after - before - 3.0) / COUNTED as f64)
                }
                _ => "not counted (no pg_stat_statements)".to_owned(),
            }
        }
        _ => {
            calls.await;
            "none (a file)".to_owned()
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

async fn measure(tier: &str, url: &str, counter: Counter) {
    let mut workers = Processes(Vec::new());
    for _ in 0..2 {
        workers.0.push(
            Command::new(std::env::current_exe().expect("this binary"))
                .env(WORKER_URL, url)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("a worker starts"),
        );
    }
    let toolset = Arc::new(toolset(&remote(url)));
    // Warm up: both workers up, connections made.
    for n in 0..200 {
        let answer = toolset.call("echo_remote", json!({ "n": n })).await;
        assert_eq!(answer.expect("the warm-up call answers"), json!(n));
    }
    let round_trips = round_trips(&counter, &toolset).await;
    let mut times = Vec::with_capacity(SEQUENTIAL);
    for n in 0..SEQUENTIAL as u64 {
        let started = Instant::now();
        let answer = toolset.call("echo_remote", json!({ "n": n })).await;
        times.push(started.elapsed());
        assert_eq!(answer.expect("the call answers"), json!(n));
    }
    times.sort();
    let (median, p99) = (percentile(&times, 0.5), percentile(&times, 0.99));

    let started = Instant::now();
    let callers: Vec<_> = (0..CONCURRENT)
        .map(|caller| {
            let toolset = toolset.clone();
            tokio::spawn(async move {
                let mut calls = 0u64;
                while started.elapsed() < THROUGHPUT_FOR {
                    let n = caller as u64 * 1_000_000 + calls;
                    let answer = toolset.call("echo_remote", json!({ "n": n })).await;
                    assert_eq!(answer.expect("the call answers"), json!(n));
                    calls += 1;
                }
                calls
            })
        })
        .collect();
    let mut calls = 0;
    for caller in callers {
        calls += caller.await.expect("a caller task");
    }
    let per_second = calls as f64 / started.elapsed().as_secs_f64();

    tokio::time::sleep(Duration::from_secs(1)).await;
    let pids: Vec<u32> = workers.0.iter().map(Child::id).collect();
    let before: Vec<f64> = pids.iter().map(|&pid| cpu_seconds(pid)).collect();
    tokio::time::sleep(IDLE_FOR).await;
    let idle: f64 = pids
        .iter()
        .zip(&before)
        .map(|(&pid, before)| (cpu_seconds(pid) - before) / IDLE_FOR.as_secs_f64())
        .sum::<f64>()
        / pids.len() as f64;
    println!(
        "| {tier} | {:.2} ms | {:.2} ms | {per_second:.0} | {:.1} % | {round_trips} |",
        median.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        idle * 100.0
    );
}

/// Redis memory while `jobs` relocated calls run (64 callers, 2 workers, a 1 s
/// retention: finished jobs go after 6 s): printed every tenth of the run.
async fn retention(url: &str, jobs: u64) {
    let mut workers = Processes(Vec::new());
    for _ in 0..2 {
        workers.0.push(
            Command::new(std::env::current_exe().expect("this binary"))
                .env(WORKER_URL, url)
                .env(RETENTION_JOBS, jobs.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("a worker starts"),
        );
    }
    let memory = || {
        let out = Command::new("redis-cli")
            .args(["-u", url, "info", "memory"])
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|line| {
                line.strip_prefix("used_memory:")
                    .map(|m| m.trim().to_owned())
            })
            .and_then(|m| m.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1e6
    };
    let toolset = Arc::new(toolset(&remote(url)));
    let started = Instant::now();
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let callers: Vec<_> = (0..CONCURRENT)
        .map(|_| {
            let (toolset, done) = (toolset.clone(), done.clone());
            tokio::spawn(async move {
                loop {
                    let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if n >= jobs {
                        return;
                    }
                    let answer = toolset.call("echo_remote", json!({ "n": n })).await;
                    assert_eq!(answer.expect("the call answers"), json!(n));
                }
            })
        })
        .collect();
    let mut next = 0;
    while callers.iter().any(|caller| !caller.is_finished()) {
        let at = done.load(std::sync::atomic::Ordering::SeqCst).min(jobs);
        if at >= next {
            println!(
                "{at:>7} jobs, {:>5.1} s: used_memory {:.2} MB",
                started.elapsed().as_secs_f64(),
                memory()
            );
            next += jobs / 10;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "{jobs:>7} jobs, {:>5.1} s: used_memory {:.2} MB",
        started.elapsed().as_secs_f64(),
        memory()
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    println!("10 s later: used_memory {:.2} MB", memory());
}

fn main() {
    if let Ok(url) = std::env::var(WORKER_URL) {
        worker_main(url);
        return;
    }
    // `cargo test --benches` runs this with `--test`: nothing to measure then.
    if std::env::args().any(|arg| arg == "--test") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    if let Some(jobs) = std::env::var(RETENTION_JOBS)
        .ok()
        .and_then(|n| n.parse().ok())
    {
        #[cfg(feature = "redis")]
        {
            let (url, server) = start_redis();
            let _server = Processes(server.into_iter().collect());
            runtime.block_on(retention(&url, jobs));
        }
        let _ = jobs;
        return;
    }
    println!(
        "| tier | median | p99 | calls/s (64 callers) | idle CPU per worker | round trips per call |"
    );
    println!("|---|---|---|---|---|---|");
    #[cfg(feature = "redis")]
    {
        let (url, server) = start_redis();
        let _server = Processes(server.into_iter().collect());
        runtime.block_on(measure("Redis", &url, Counter::Redis(url.clone())));
    }
    #[cfg(feature = "postgres")]
    {
        let (url, dir) = start_postgres();
        runtime.block_on(measure("PostgreSQL", &url, Counter::Postgres(url.clone())));
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres");
        let _ = Command::new(script).arg("stop").arg(&dir).status();
        let _ = std::fs::remove_dir_all(&dir);
    }
    #[cfg(feature = "sqlite")]
    {
        let path = std::env::temp_dir().join(format!("toolgraft-bench-{}.db", std::process::id()));
        let url = format!("sqlite://{}", path.display());
        runtime.block_on(measure("SQLite", &url, Counter::None));
        for suffix in [
            "",
            "-wal",
            "-shm",
            ".lock",
            ".replies",
            ".replies-wal",
            ".replies-shm",
        ] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
