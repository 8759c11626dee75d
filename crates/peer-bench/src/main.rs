//! peer-bench: toolgraft-mcp side by side with raw rmcp and tower-mcp, the same
//! `repeat` tool served by each, rounds alternating the order of the systems.
//! See README.md.

// Modules, bottom to top: each imports only those above it in this list.
mod tool;
mod client;
mod systems;
mod args;
mod report;
mod http;
mod inproc;

use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use args::Args;
use report::Table;
use systems::System;

const USAGE: &str = "\
usage: peer-bench <command> [options]
  inproc [--rounds R] [--inproc-secs S]
  http   [--clients 1,16,64] [--secs 2] [--rounds R]
  list   [--tools 10,1000,10000] [--rounds R] [--inproc-secs S]
  all    [--rounds 3] (the three above, with their options)
  serve-http <toolgraft|rmcp|tower-mcp> [--port P]   (URL on stdout; serves until stdin closes)
  drive <url> --calls N [--clients C]
options for toolgraft over HTTP (default: McpHttp::serve):
  --toolgraft-router-plain    McpHttp::router() on plain axum::serve, no TCP_NODELAY
  --toolgraft-router-nodelay  McpHttp::router() on axum::serve with TCP_NODELAY
  --warmup-ms W               warm-up before each measurement (200)";

fn main() {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    // Two workers (the machine's two cores); the work runs on them, not on the
    // main thread, as a server's and a client's tasks would.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let code = runtime.block_on(async move { tokio::spawn(run(args)).await.expect("main task") });
    runtime.shutdown_timeout(Duration::from_secs(1));
    std::process::exit(code);
}

async fn run(args: Args) -> i32 {
    let warmup = Duration::from_millis(args.num("warmup-ms", 200));
    let rounds = args.num("rounds", 3) as usize;
    let inproc_secs = Duration::from_secs_f64(args.float("inproc-secs", 1.0));
    let secs = Duration::from_secs_f64(args.float("secs", 2.0));
    let mode = args.toolgraft_mode();
    let clients = args.list("clients", &[1, 16, 64]);
    let tools = args.list("tools", &[10, 1000, 10000]);
    let calls = || inproc::calls(rounds, warmup, inproc_secs);
    let http = || http::run(rounds, &clients, warmup, secs, mode);
    let lists = || inproc::lists(rounds, &tools, warmup, inproc_secs);
    let tables: Vec<Table> = match args.command.as_str() {
        "inproc" => calls().await,
        "http" => http().await,
        "list" => lists().await,
        "all" => {
            let mut tables = calls().await;
            tables.extend(http().await);
            tables.extend(lists().await);
            tables
        }
        "serve-http" => return serve_http(&args, mode).await,
        "drive" => return drive(&args).await,
        other => {
            eprintln!("unknown command {other:?}\n{USAGE}");
            return 2;
        }
    };
    println!(
        "toolgraft over HTTP: {mode}; warm-up {} ms; rounds {rounds}\n",
        warmup.as_millis()
    );
    for table in tables {
        println!("{}", table.render());
    }
    0
}

/// `serve-http <system>`: the URL on stdout, then serves until stdin closes.
async fn serve_http(args: &Args, mode: systems::ToolgraftHttp) -> i32 {
    let Some(system) = args.positional.first().and_then(|s| System::parse(s)) else {
        eprintln!("serve-http needs a system: toolgraft, rmcp or tower-mcp");
        return 2;
    };
    let served = systems::serve_http(system, args.num("port", 0) as u16, mode).await;
    println!("{}", served.url);
    let mut sink = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), served.stop()).await;
    0
}

/// `drive <url>`: `--calls N` calls over `--clients C` sessions, as fast as
/// they go; a line of totals on stdout.
async fn drive(args: &Args) -> i32 {
    let Some(url) = args.positional.first() else {
        eprintln!("drive needs a URL");
        return 2;
    };
    let calls = args.num("calls", 1000);
    let clients = args.num("clients", 1).max(1);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let url = url.clone();
        let mine = calls / clients + u64::from(c < calls % clients);
        tasks.push(tokio::spawn(async move {
            let mut session = match client::Session::open(&url).await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("session: {e}");
                    return mine;
                }
            };
            let mut errors = 0;
            for _ in 0..mine {
                if let Err(e) = session.call("repeat").await.and_then(|r| client::check(&r)) {
                    eprintln!("call: {e}");
                    errors += 1;
                }
            }
            errors
        }));
    }
    let mut errors = 0;
    for task in tasks {
        errors += task.await.unwrap_or(1);
    }
    let elapsed = start.elapsed();
    println!(
        "calls {calls} clients {clients} errors {errors} secs {:.3} calls/s {:.0}",
        elapsed.as_secs_f64(),
        calls as f64 / elapsed.as_secs_f64()
    );
    i32::from(errors > 0)
}
