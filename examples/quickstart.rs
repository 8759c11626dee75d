//! Bind a weather tool with several combos, print every bound name, and call the
//! base and its branches, typed and by name.
//!
//! Run: `cargo run --example quickstart`

use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::ext::{Batch, Cache, CacheParams, Pool, Proxy, ProxyParams, Trace, proxy};
use toolgraft::prelude::*;
use toolgraft::runtime::NameTable;

/// Where to forecast.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
struct ForecastRequest {
    /// City name, e.g. "Lisbon".
    city: String,
    /// Temperature unit.
    #[serde(default)]
    units: Units,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Units {
    #[default]
    Metric,
    Imperial,
}

/// Tomorrow's forecast.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
struct Forecast {
    city: String,
    temperature: f64,
    conditions: String,
    /// Which egress route and thread produced it.
    served_by: String,
}

/// How often the body has run (to show cache hits).
static BODY_RUNS: AtomicUsize = AtomicUsize::new(0);

/// A stand-in for a weather service: deterministic, so the example needs no
/// network, but it does report where it ran.
async fn forecast(request: ForecastRequest) -> Result<Forecast, toolgraft::error::BoxError> {
    BODY_RUNS.fetch_add(1, Ordering::SeqCst);
    if request.city.trim().is_empty() {
        return Err("a city is required".into());
    }
    let seed = request
        .city
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
    let celsius = 5.0 + f64::from(seed % 250) / 10.0;
    let conditions = ["sunny", "cloudy", "rain", "windy"][(seed % 4) as usize];
    let thread = std::thread::current();
    Ok(Forecast {
        city: request.city,
        temperature: match request.units {
            Units::Metric => celsius,
            Units::Imperial => (celsius * 9.0 / 5.0 + 32.0).round(),
        },
        conditions: conditions.to_owned(),
        served_by: format!(
            "route {} on thread {}",
            proxy::current_route().unwrap_or_else(|| "direct".into()),
            thread.name().unwrap_or("unnamed")
        ),
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let weather = Tool::builder()
        .name("weather")
        .description("Tomorrow's forecast for a city.")
        .read_only()
        .body(forecast)
        .build()?;

    let pool = Pool::new(2)?;
    let toolset = Toolset::new();
    // Binds `weather` with every branch of its combos; the typed branches come back.
    let (cached, remote, _batched) = toolset.bind((
        weather.combo().with(Trace).with(Cache::default()),
        weather
            .combo()
            .with(Proxy::allow(["egress-eu", "egress-us"]))
            .with(pool.clone())
            .with(Cache::default()),
        weather
            .combo()
            .with(Batch::max_items(10))
            .with(pool.clone()),
    ))?;

    print!("{}", NameTable(&toolset.tools()));

    println!("\ncalls");
    let lisbon = json!({"city": "Lisbon"});
    show(
        "weather",
        &lisbon,
        toolset.call("weather", lisbon.clone()).await,
    );
    let args = json!({"city": "Oslo", "units": "imperial", "exp": 300});
    show(
        "weather_trace_cache",
        &args,
        toolset.call("weather_trace_cache", args.clone()).await,
    );
    let runs = BODY_RUNS.load(Ordering::SeqCst);
    let again = toolset.call("weather_trace_cache", args.clone()).await;
    show("weather_trace_cache (again)", &args, again);
    println!(
        "    (cache hit: the body ran {} more times)",
        BODY_RUNS.load(Ordering::SeqCst) - runs
    );
    let args = json!({"city": "Nairobi", "proxies": ["egress-us"]});
    let out = toolset.call("weather_proxy_pool_cache", args.clone()).await;
    show("weather_proxy_pool_cache", &args, out);
    let args = json!({"items": [{"city": "Quito"}, {"city": "Hanoi"}, {"city": ""}], "parallel": true, "fail_fast": false});
    show(
        "weather_batch_pool",
        &args,
        toolset.call("weather_batch_pool", args.clone()).await,
    );
    let args = json!({"city": "Lisbon", "exp": 60});
    show(
        "weather (reserved param of a branch)",
        &args,
        toolset.call("weather", args.clone()).await,
    );
    println!("  pool jobs so far: {}", pool.jobs_started());

    println!("\ntyped calls (static dispatch through every layer)");
    let request = ForecastRequest {
        city: "Lima".into(),
        units: Units::Metric,
    };
    // The tool's own input; unset reserved params take their defaults.
    let forecast = cached.call(request.clone()).await?;
    println!("  {} -> {forecast:?}", cached.name());
    // Reserved params by type, in any order.
    let forecast = remote
        .params(ProxyParams {
            proxies: Some(vec!["egress-eu".into()]),
        })
        .params(CacheParams { exp: Some(60.0) })
        .call(request)
        .await?;
    println!("  {} -> {forecast:?}", remote.name());
    Ok(())
}

fn show(
    name: &str,
    args: &serde_json::Value,
    result: Result<serde_json::Value, toolgraft::ToolError>,
) {
    match result {
        Ok(value) => println!("  {name} {args}\n    -> {value}"),
        Err(error) => println!("  {name} {args}\n    -> error: {error}"),
    }
}
