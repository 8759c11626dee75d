//! Over Streamable HTTP: N concurrent clients, each with its own
//! `reqwest::Client` and MCP session, calling `tools/call repeat` for a while.

use std::time::{Duration, Instant};

use crate::client::{self, BodyKind, Session};
use crate::report::{Table, percentile_us};
use crate::systems::{self, System, ToolgraftHttp};

/// What a load run measured.
pub struct Load {
    /// Calls completed in the measured window.
    pub calls: u64,
    /// Failed requests (non-200, JSON-RPC error, wrong result), warm-up included.
    pub errors: u64,
    /// Latencies of the measured calls (ns), sorted.
    pub nanos: Vec<u64>,
    /// The measured window.
    pub window: Duration,
    /// The body kind of `tools/call` answers.
    pub kind: Option<BodyKind>,
}

/// `clients` sessions on `url` calling for `warmup` and then `secs`.
pub async fn load(url: &str, clients: usize, warmup: Duration, secs: Duration) -> Load {
    let mut sessions = Vec::new();
    let mut errors = 0;
    for _ in 0..clients {
        match Session::open(url).await {
            Ok(s) => sessions.push(s),
            Err(e) => {
                eprintln!("  session: {e}");
                errors += 1;
            }
        }
    }
    let measure = Instant::now() + warmup;
    let end = measure + secs;
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|mut session| {
            tokio::spawn(async move {
                let mut nanos = Vec::new();
                let mut errors = 0u64;
                loop {
                    let t0 = Instant::now();
                    if t0 >= end {
                        break;
                    }
                    let ok = match session.call("repeat").await {
                        Ok(result) => client::check(&result),
                        Err(e) => Err(e),
                    };
                    match ok {
                        Ok(()) if t0 >= measure => nanos.push(t0.elapsed().as_nanos() as u64),
                        Ok(()) => {}
                        Err(e) => {
                            if errors < 3 {
                                eprintln!("  call: {e}");
                            }
                            errors += 1;
                        }
                    }
                }
                (nanos, errors, session.last_kind)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut kind = None;
    for task in tasks {
        let (nanos, e, k) = task.await.expect("client task");
        all.extend(nanos);
        errors += e;
        kind = kind.or(k);
    }
    all.sort_unstable();
    Load {
        calls: all.len() as u64,
        errors,
        nanos: all,
        window: secs,
        kind,
    }
}

/// The label of `system` in HTTP tables.
pub fn label(system: System, mode: ToolgraftHttp) -> String {
    match system {
        System::Toolgraft => format!("toolgraft ({mode})"),
        other => other.name().to_owned(),
    }
}

/// Tables of throughput, p50 and p99 per client count and system.
pub async fn run(
    rounds: usize,
    clients: &[usize],
    warmup: Duration,
    secs: Duration,
    mode: ToolgraftHttp,
) -> Vec<Table> {
    let title = "Streamable HTTP: tools/call, one session per client";
    let mut rate = Table::new(title, "calls/s, higher is better");
    let mut p50 = Table::new(title, "p50 µs, lower is better");
    let mut p99 = Table::new(title, "p99 µs, lower is better");
    for &c in clients {
        let group = format!("{c} client{}", if c == 1 { "" } else { "s" });
        for round in 0..rounds {
            for k in 0..System::ALL.len() {
                let system = System::ALL[(round + k) % System::ALL.len()];
                let label = label(system, mode);
                eprintln!("http {group} round {}: {label}", round + 1);
                let served = systems::serve_http(system, 0, mode).await;
                let load = load(&served.url, c, warmup, secs).await;
                let _ = tokio::time::timeout(Duration::from_secs(5), served.stop()).await;
                rate.row(&group, &label, system)
                    .values
                    .push(load.calls as f64 / load.window.as_secs_f64());
                p50.row(&group, &label, system)
                    .values
                    .push(percentile_us(&load.nanos, 50));
                p99.row(&group, &label, system)
                    .values
                    .push(percentile_us(&load.nanos, 99));
                let row = rate.row(&group, &label, system);
                row.errors += load.errors;
                let kind = match load.kind {
                    Some(BodyKind::Json) => "json",
                    Some(BodyKind::Sse) => "sse",
                    None => "?",
                };
                row.note = format!("{} errors, {kind}", row.errors);
            }
        }
    }
    vec![rate, p50, p99]
}
