//! Bind tools with combos from a manifest file, the way an operator configures a
//! server: print the catalogue, the bound names and the refused tools, then call a
//! few branches by name with JSON.
//!
//! Run: `cargo run --example manifest` (reads `examples/manifest.json`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::error::BoxError;
use toolgraft::ext::{Batch, Cache, Chain, OutputSchema, Pool, Proxy, Trace, proxy};
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::runtime::{DynTool, NameTable};
use toolgraft::toolset::BaseTools;
use toolgraft::{Registry, Tool, Toolset};

#[derive(Deserialize, Serialize, JsonSchema)]
struct City {
    /// City name, e.g. "Lisbon".
    city: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct UserId {
    user_id: i64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Translate {
    text: String,
    to: String,
}

/// Tomorrow's weather.
#[derive(Deserialize, Serialize, JsonSchema)]
struct Weather {
    city: String,
    celsius: i64,
    /// The egress route the lookup used.
    route: String,
}

async fn weather(input: City) -> Result<Weather, BoxError> {
    Ok(Weather {
        celsius: 5 + input.city.len() as i64 * 3 % 25,
        route: proxy::current_route().unwrap_or_else(|| "direct".into()),
        city: input.city,
    })
}

async fn get_user(input: UserId) -> Result<serde_json::Value, BoxError> {
    match input.user_id {
        1 => Ok(json!({"name": "Alice", "email": "alice@example.com"})),
        2 => Ok(json!({"name": "Al"})),
        _ => Err(format!("no user {}", input.user_id).into()),
    }
}

async fn translate(input: Translate) -> Result<String, BoxError> {
    Ok(format!("[{}] {}", input.to, input.text))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let toolset = Toolset::new();

    // Tools are code; which combos they carry is the operator's manifest.
    let search = DynTool::builder()
        .name("search")
        .description("Search the city directory; the first hit names a city.")
        .input_schema(schemars::json_schema!({
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"]
        }))
        .body(|args| async move {
            let query = args["query"].as_str().unwrap_or_default().to_owned();
            Ok(json!({"hits": 1, "first": {"city": format!("{query}polis")}}))
        })
        .build()?;
    let bases = BaseTools::new()
        .with(
            &Tool::builder()
                .name("weather")
                .description("Tomorrow's weather for a city.")
                .read_only()
                .body(weather)
                .build()?,
        )
        .with(
            &Tool::builder()
                .name("get_user")
                .description("Look a user up.")
                .read_only()
                .body(get_user)
                .build()?,
        )
        .with(&search)
        .with(
            &Tool::builder()
                .name("translate")
                .description("Translate a text.")
                .read_only()
                .body(translate)
                .build()?,
        );

    let mut registry = Registry::new();
    registry
        .register(Trace)?
        .register(Configured::new(Cache::default()))?
        .register(Configured::new(Batch::default()))?
        .register(Configured::new(Proxy::allow(["egress-eu", "egress-us"])))?
        .register(Pool::new(2)?)?
        .register(Configured::<OutputSchema>::named("output_schema"))?
        .register(Chain::new(&toolset))?;

    println!(
        "catalogue: {}\n",
        serde_json::to_string(&registry.catalogue())?
    );

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/manifest.json");
    let manifest = Manifest::load(path)?;
    let outcome = toolset.bind_manifest(&registry, &bases, &manifest);

    print!("{}", NameTable(&toolset.tools()));
    println!("\nrefused tools");
    for (tool, result) in &outcome {
        if let Err(error) = result {
            println!("  {tool}: {error}");
        }
    }

    println!("\ncalls");
    let calls = [
        ("weather_trace_cache", json!({"city": "Lisbon", "exp": 60})),
        (
            "weather_proxy_pool",
            json!({"city": "Oslo", "proxies": ["egress-us"]}),
        ),
        (
            "weather_batch_pool",
            json!({"items": [{"city": "Quito"}, {"city": "Hanoi"}], "parallel": true}),
        ),
        ("get_user_output_schema", json!({"user_id": 1})),
        ("get_user_output_schema", json!({"user_id": 2})),
        (
            "search_cache_chain",
            json!({"query": "Metro", "next_tool": "weather_trace_cache", "select": "/first"}),
        ),
        ("weather", json!({"city": "Lisbon", "exp": 60})),
        ("translate", json!({"text": "hello", "to": "pt"})),
    ];
    for (name, args) in calls {
        match toolset.call(name, args.clone()).await {
            Ok(value) => println!("  {name} {args}\n    -> {value}"),
            Err(error) => println!("  {name} {args}\n    -> error: {error}"),
        }
    }
    Ok(())
}
