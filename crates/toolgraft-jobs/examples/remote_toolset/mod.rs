//! The toolset of `examples/worker.rs` and `examples/distributed.rs`: one binding
//! code for the caller and its workers, so that every name a caller enqueues is
//! bound in the worker too.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgraft::error::BoxError;
use toolgraft::ext::{Batch, Cache, Proxy, proxy};
use toolgraft::prelude::*;
use toolgraft_jobs::Remote;

/// Where to forecast.
#[derive(Deserialize, Serialize, JsonSchema)]
pub struct City {
    /// City name, e.g. "Lisbon".
    pub city: String,
}

/// Tomorrow's forecast, and where it was computed.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Forecast {
    pub city: String,
    pub celsius: f64,
    /// The egress route the lookup used.
    pub route: String,
    /// The process that ran the body.
    pub pid: u32,
}

/// A stand-in for a slow weather service: deterministic, no network, 20 ms.
async fn forecast(input: City) -> Result<Forecast, BoxError> {
    if input.city.trim().is_empty() {
        return Err("a city is required".into());
    }
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let seed = input
        .city
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    Ok(Forecast {
        celsius: 5.0 + f64::from(seed % 250) / 10.0,
        route: proxy::current_route().unwrap_or_else(|| "direct".into()),
        pid: std::process::id(),
        city: input.city,
    })
}

/// The job-engine URL: the first argument, else `TOOLGRAFT_JOBS_URL`, else an
/// SQLite file in the temp directory (no server needed).
pub fn url() -> String {
    std::env::args()
        .nth(1)
        .or_else(|| std::env::var("TOOLGRAFT_JOBS_URL").ok())
        .unwrap_or_else(|| {
            format!(
                "sqlite://{}",
                std::env::temp_dir().join("toolgraft-jobs.db").display()
            )
        })
}

/// Binds `weather` with three relocated combos:
/// `[proxy, remote]` (the route travels with the body), `[remote, cache]` (the
/// cache stays with the caller), `[batch, remote]` (one job per batch).
pub fn toolset(remote: &Remote) -> Result<Toolset, Box<dyn std::error::Error>> {
    let weather = Tool::builder()
        .name("weather")
        .description("Tomorrow's forecast for a city.")
        .read_only()
        .body(forecast)
        .build()?;
    let toolset = Toolset::new();
    toolset.bind((
        weather
            .combo()
            .with(Proxy::allow(["egress-eu", "egress-us"]))
            .with(remote.clone()),
        weather.combo().with(remote.clone()).with(Cache::default()),
        weather
            .combo()
            .with(Batch::max_items(50))
            .with(remote.clone()),
    ))?;
    Ok(toolset)
}
