//! Serving a toolset over MCP: rmcp's own client talks to `ToolsetServer` in
//! process (over a duplex pipe, on both lifecycles), and to the `mcp_server`
//! example over stdio, the way an MCP client launches a server.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ErrorCode, JsonObject,
    ProtocolVersion, ServerNotification, SubscriptionFilter, Tool as McpTool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{
    ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient, ServiceExt,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::Notify;
use toolgraft::Registry;
use toolgraft::Wrap;
use toolgraft::error::BoxError;
use toolgraft::ext::{Batch, Cache, Pool, Proxy, Trace, proxy};
use toolgraft::prelude::*;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::ElementSpec;
use toolgraft_mcp::{BadArguments, ERROR_META, ToolsetServer};

use crate::support::{args, within};

// ---------------------------------------------------------------- fixtures

// Closed: its schema says `"additionalProperties": false`, so a call naming a
// field it does not take is refused (the strictness tests read that).
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct City {
    /// City name.
    city: String,
}

#[derive(Clone, Deserialize, Serialize, JsonSchema)]
struct Forecast {
    city: String,
    celsius: f64,
    /// The egress route the lookup used.
    route: String,
}

async fn forecast(input: City) -> Result<Forecast, BoxError> {
    match input.city.as_str() {
        "" => Err("a city is required".into()),
        "Atlantis" => panic!("the map ends here"),
        city => Ok(Forecast {
            celsius: 10.0 + city.len() as f64,
            route: proxy::current_route().unwrap_or_else(|| "direct".into()),
            city: city.to_owned(),
        }),
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Translate {
    text: String,
    to: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Nothing {}

/// Set when the body of `wait` is dropped mid-call.
static WAIT_DROPPED: AtomicBool = AtomicBool::new(false);
/// Woken when the body of `wait` has started.
static WAIT_STARTED: Notify = Notify::const_new();

struct SetOnDrop(&'static AtomicBool);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// `weather` (object output) with `[trace, cache]`, `[proxy, pool]` and
/// `[batch, pool]`; `translate` (string output); `wait` (never returns); and a
/// registry for live changes.
fn toolset() -> (Toolset, Registry) {
    let weather = Tool::builder()
        .name("weather")
        .description("Tomorrow's forecast for a city.")
        .read_only()
        .body(forecast)
        .build()
        .unwrap();
    let translate = Tool::builder()
        .name("translate")
        .description("Translate a text.")
        .read_only()
        .body(|input: Translate| async move {
            Ok::<_, BoxError>(format!("[{}] {}", input.to, input.text))
        })
        .build()
        .unwrap();
    let wait = Tool::builder()
        .name("wait")
        .description("Wait until cancelled.")
        .read_only()
        .body(|_: Nothing| async move {
            let _dropped = SetOnDrop(&WAIT_DROPPED);
            WAIT_STARTED.notify_one();
            std::future::pending::<Result<String, BoxError>>().await
        })
        .build()
        .unwrap();

    let pool = Pool::new(2).unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((
            weather.combo().with(Trace).with(Cache::default()),
            weather
                .combo()
                .with(Proxy::allow(["egress-eu", "egress-us"]))
                .with(pool.clone()),
            weather.combo().with(Batch::max_items(5)).with(pool.clone()),
        ))
        .unwrap();
    toolset.bind((translate.combo(),)).unwrap();
    toolset.bind((wait.combo(),)).unwrap();

    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(pool)
        .unwrap();
    (toolset, registry)
}

/// A client that counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct Client {
    list_changed: Arc<Notify>,
    notifications: Arc<AtomicUsize>,
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notifications.fetch_add(1, Ordering::SeqCst);
        self.list_changed.notify_one();
    }
}

type Connection = RunningService<RoleClient, Client>;

/// Serves `toolset` in process and connects rmcp's client with `lifecycle`.
async fn connect(toolset: &Toolset, lifecycle: ClientLifecycleMode) -> Connection {
    connect_to(ToolsetServer::new(toolset.clone()), lifecycle).await
}

/// Serves `server` in process and connects rmcp's client with `lifecycle`.
async fn connect_to(server: ToolsetServer, lifecycle: ClientLifecycleMode) -> Connection {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    within(
        "connecting",
        Client::default().serve_with_lifecycle(client_io, lifecycle),
    )
    .await
    .expect("the client connects")
}

/// A session opened with `initialize` (what today's MCP clients do).
async fn legacy(toolset: &Toolset) -> Connection {
    connect(toolset, ClientLifecycleMode::Initialize).await
}

/// A `2026-07-28` session: no `initialize`, per-request metadata, SEP-2106 output.
async fn modern(toolset: &Toolset) -> Connection {
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    connect(toolset, lifecycle).await
}

async fn call(
    client: &Connection,
    name: &str,
    arguments: Value,
) -> Result<CallToolResult, rmcp::ServiceError> {
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args(arguments));
    within(name, client.call_tool(params)).await
}

async fn call_ok(client: &Connection, name: &str, arguments: Value) -> CallToolResult {
    call(client, name, arguments)
        .await
        .unwrap_or_else(|err| panic!("{name}: {err}"))
}

/// The protocol error a call ended with.
async fn call_err(client: &Connection, name: &str, arguments: Value) -> ErrorData {
    match call(client, name, arguments).await {
        Err(rmcp::ServiceError::McpError(error)) => error,
        other => panic!("{name}: expected a protocol error, got {other:?}"),
    }
}

fn text(result: &CallToolResult) -> &str {
    assert_eq!(result.content.len(), 1, "one content block: {result:?}");
    &result.content[0].as_text().expect("a text block").text
}

async fn list(client: &Connection) -> Vec<McpTool> {
    within("tools/list", client.list_all_tools())
        .await
        .expect("tools/list")
}

fn find<'a>(tools: &'a [McpTool], name: &str) -> &'a McpTool {
    tools
        .iter()
        .find(|tool| tool.name == name)
        .unwrap_or_else(|| panic!("`{name}` is not listed"))
}

fn names(tools: &[McpTool]) -> Vec<String> {
    tools.iter().map(|tool| tool.name.to_string()).collect()
}

fn schema_json(schema: &toolgraft::schema::Schema) -> Value {
    schema.as_value().clone()
}

fn output_json(tool: &McpTool) -> Option<Value> {
    tool.output_schema
        .as_ref()
        .map(|schema| Value::Object((**schema).clone()))
}

// ---------------------------------------------------------------- in process

#[tokio::test]
async fn tools_list_has_every_bound_name_with_its_schemas() {
    let (toolset, _) = toolset();
    let client = legacy(&toolset).await;

    let info = client.peer_info().expect("initialized");
    let tools_capability = info.capabilities.tools.as_ref().expect("tools capability");
    assert_eq!(tools_capability.list_changed, Some(true));

    let tools = list(&client).await;
    let bound: Vec<String> = toolset.names().iter().map(|n| n.to_string()).collect();
    assert_eq!(names(&tools), bound);
    assert_eq!(
        bound,
        [
            "translate",
            "wait",
            "weather",
            "weather_batch",
            "weather_batch_pool",
            "weather_proxy",
            "weather_proxy_pool",
            "weather_trace",
            "weather_trace_cache"
        ]
    );

    for tool in &tools {
        let info = toolset.info(&tool.name).unwrap();
        assert_eq!(tool.description.as_deref(), Some(info.description.as_str()));
        // Typed inputs are object schemas already: served unchanged.
        assert_eq!(
            Value::Object((*tool.input_schema).clone()),
            schema_json(&info.input_schema),
            "{}",
            tool.name
        );
    }

    // Branches take their layer input's schema plus reserved params.
    let params = |name: &str| -> Vec<String> {
        find(&tools, name).input_schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(params("weather"), ["city"]);
    assert_eq!(params("weather_trace_cache"), ["city", "exp"]);
    assert_eq!(params("weather_proxy"), ["city", "proxies"]);
    assert_eq!(params("weather_proxy_pool"), ["city", "proxies"]);
    assert_eq!(
        params("weather_batch_pool"),
        ["items", "parallel", "max_concurrent", "fail_fast"]
    );

    // Output schemas are inherited through shape-preserving layers (rule `output-schema`).
    let forecast = schema_json(
        toolset
            .info("weather")
            .unwrap()
            .output_schema
            .as_ref()
            .unwrap(),
    );
    assert_eq!(forecast["type"], "object");
    for name in [
        "weather",
        "weather_trace_cache",
        "weather_proxy",
        "weather_proxy_pool",
    ] {
        assert_eq!(
            output_json(find(&tools, name)),
            Some(forecast.clone()),
            "{name}"
        );
    }
    // A batch returns a list and `translate` a string: not object schemas, so a
    // client before 2026-07-28 is shown none.
    for name in ["weather_batch", "weather_batch_pool", "translate"] {
        assert!(
            toolset.info(name).unwrap().output_schema.is_some(),
            "{name}"
        );
        assert_eq!(output_json(find(&tools, name)), None, "{name}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn calls_run_the_base_and_its_branches() {
    let (toolset, _) = toolset();
    let client = legacy(&toolset).await;

    // An object result: structured content, and its JSON as text.
    let base = call_ok(&client, "weather", json!({"city": "Lisbon"})).await;
    let expected = json!({"city": "Lisbon", "celsius": 16.0, "route": "direct"});
    assert_eq!(base.is_error, Some(false));
    assert_eq!(base.structured_content, Some(expected.clone()));
    assert_eq!(
        serde_json::from_str::<Value>(text(&base)).unwrap(),
        expected
    );

    let cached = call_ok(
        &client,
        "weather_trace_cache",
        json!({"city": "Lisbon", "exp": 60}),
    )
    .await;
    assert_eq!(cached.structured_content, Some(expected));

    // proxy inside pool: the client's route choice reaches the body on the worker.
    let remote = call_ok(
        &client,
        "weather_proxy_pool",
        json!({"city": "Oslo", "proxies": ["egress-us"]}),
    )
    .await;
    assert_eq!(
        remote.structured_content,
        Some(json!({"city": "Oslo", "celsius": 14.0, "route": "egress-us"}))
    );
    let proxied = call_ok(&client, "weather_proxy", json!({"city": "Oslo"})).await;
    assert_eq!(proxied.structured_content.unwrap()["route"], "egress-eu");

    // A list result without an advertised schema: its JSON as text only.
    let batch = call_ok(
        &client,
        "weather_batch_pool",
        json!({"items": [{"city": "Quito"}, {"city": "Hanoi"}], "parallel": true}),
    )
    .await;
    assert_eq!(batch.structured_content, None);
    let items: Value = serde_json::from_str(text(&batch)).unwrap();
    assert_eq!(items[0]["city"], "Quito");
    assert_eq!(items[1]["city"], "Hanoi");

    // A string result is the text itself.
    let translated = call_ok(&client, "translate", json!({"text": "hello", "to": "pt"})).await;
    assert_eq!(translated.structured_content, None);
    assert_eq!(text(&translated), "[pt] hello");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_arguments_are_invalid_params_errors() {
    let (toolset, _) = toolset();
    let client = legacy(&toolset).await;

    let missing = call_err(&client, "weather", json!({})).await;
    assert_eq!(missing.code, ErrorCode::INVALID_PARAMS);
    assert!(
        missing
            .message
            .starts_with("invalid arguments for `weather`: "),
        "{}",
        missing.message
    );
    assert!(
        missing.message.contains("missing field `city`"),
        "{}",
        missing.message
    );
    assert_eq!(
        missing.data,
        Some(json!({"tool": "weather", "field": "city", "kind": "missing_field"}))
    );

    // A reserved param of one branch is not an argument of another.
    let unknown = call_err(&client, "weather", json!({"city": "Oslo", "exp": 60})).await;
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
    assert!(
        unknown.message.contains("unknown field `exp`")
            && unknown
                .message
                .contains("(`exp` is a parameter of `weather_trace_cache`)"),
        "{}",
        unknown.message
    );
    assert_eq!(
        unknown.data,
        Some(json!({"tool": "weather", "field": "exp", "kind": "unknown_field"}))
    );

    let wrong_type = call_err(&client, "weather_proxy_pool", json!({"city": 7})).await;
    assert_eq!(wrong_type.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        wrong_type.data.as_ref().unwrap()["tool"],
        "weather_proxy_pool"
    );
    assert_eq!(wrong_type.data.as_ref().unwrap()["field"], "city");
    assert_eq!(wrong_type.data.as_ref().unwrap()["kind"], "invalid_value");

    // Inside a batch, the field path names the item.
    let item = call_err(
        &client,
        "weather_batch",
        json!({"items": [{"city": "Quito"}, {"town": "Hanoi"}]}),
    )
    .await;
    assert_eq!(item.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        item.data.as_ref().unwrap()["field"]
            .as_str()
            .map(|f| f.starts_with("items[1]")),
        Some(true),
        "{item:?}"
    );

    // No arguments at all is "none", which `weather` does not accept either.
    let none = within(
        "no arguments",
        client.call_tool(CallToolRequestParams::new("weather")),
    )
    .await
    .unwrap_err();
    assert!(none.to_string().contains("-32602"), "{none}");

    let unknown_tool = call_err(&client, "weather_loud", json!({})).await;
    assert_eq!(unknown_tool.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(unknown_tool.message, "unknown tool `weather_loud`");
    assert_eq!(unknown_tool.data, Some(json!({"tool": "weather_loud"})));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_arguments_can_be_results_the_model_reads() {
    let (toolset, _) = toolset();
    let server = ToolsetServer::new(toolset).with_bad_arguments(BadArguments::AsToolResult);
    let client = connect_to(server, ClientLifecycleMode::Initialize).await;

    let missing = call_ok(&client, "weather", json!({})).await;
    assert_eq!(missing.is_error, Some(true));
    assert!(
        text(&missing).starts_with("invalid arguments for `weather`: ")
            && text(&missing).contains("missing field `city`"),
        "{}",
        text(&missing)
    );
    let meta = serde_json::to_value(missing.meta.as_ref()).unwrap();
    assert_eq!(
        meta[ERROR_META],
        json!({"tool": "weather", "field": "city", "kind": "missing_field"})
    );
    // An unknown name is still the request being wrong.
    let unknown = call_err(&client, "no_such_tool", json!({})).await;
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
    // Good arguments are answered as ever.
    let fine = call_ok(&client, "weather", json!({"city": "Oslo"})).await;
    assert_ne!(fine.is_error, Some(true));
}

#[tokio::test]
async fn failures_are_tool_results_with_is_error() {
    let (toolset, _) = toolset();
    let client = legacy(&toolset).await;

    let failed = call_ok(&client, "weather", json!({"city": ""})).await;
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(failed.structured_content, None);
    assert_eq!(text(&failed), "tool `weather` failed: a city is required");

    // The same failure through a backend: it happened on a pool thread.
    let remote = call_ok(&client, "weather_proxy_pool", json!({"city": ""})).await;
    assert_eq!(remote.is_error, Some(true));
    assert_eq!(text(&remote), "tool `weather` failed: a city is required");

    let panicked = call_ok(&client, "weather_trace", json!({"city": "Atlantis"})).await;
    assert_eq!(panicked.is_error, Some(true));
    assert_eq!(
        text(&panicked),
        "tool `weather` panicked: the map ends here"
    );

    // An extension refusing the call (a route the operator did not allow).
    let refused = call_ok(
        &client,
        "weather_proxy",
        json!({"city": "Oslo", "proxies": ["egress-mars"]}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    let message = text(&refused);
    assert!(
        message.starts_with("`proxy` refused the call to `weather_proxy`"),
        "{message}"
    );

    // None of them cites a rule of the rulebook, so none names one.
    for result in [&failed, &remote, &panicked, &refused] {
        assert_eq!(result.meta, None, "{result:?}");
    }

    // The connection is still fine after all that.
    let ok = call_ok(&client, "weather", json!({"city": "Lima"})).await;
    assert_eq!(ok.is_error, Some(false));
    client.cancel().await.unwrap();
}

/// A failure that cites a section of the rulebook names it in the result's
/// `_meta`: a tool body that calls a pooled branch from inside a proxy.
#[tokio::test]
async fn a_failure_that_cites_a_rule_names_it_in_meta() {
    let toolset = Toolset::new();
    let (pooled,) = toolset
        .bind((Tool::builder()
            .name("fetch")
            .description("Look a city up.")
            .read_only()
            .body(forecast)
            .build()
            .unwrap()
            .combo()
            .with(Pool::new(1).unwrap()),))
        .unwrap();
    let launder = Tool::builder()
        .name("launder")
        .description("Look a city up through the pool.")
        .read_only()
        .body(move |input: City| {
            let pooled = pooled.clone();
            async move { pooled.call(input).await.map_err(Into::into) }
        })
        .build()
        .unwrap();
    toolset
        .bind((launder.combo().with(Proxy::allow(["egress-eu"])),))
        .unwrap();
    let client = legacy(&toolset).await;

    let refused = call_ok(&client, "launder_proxy", json!({"city": "Oslo"})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("rule `locality-inside-relocation`"),
        "{refused:?}"
    );
    let meta = refused.meta.as_ref().expect("a rule in `_meta`");
    assert_eq!(
        meta.0.get(toolgraft_mcp::RULE_META),
        Some(&json!("locality-inside-relocation"))
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn live_changes_show_in_tools_list_and_are_announced() {
    let (toolset, registry) = toolset();
    let client = legacy(&toolset).await;
    let before = names(&list(&client).await);
    assert!(!before.iter().any(|name| name.starts_with("translate_")));

    toolset
        .edit()
        .attach(
            &registry,
            "translate",
            &[ElementSpec::named("trace"), ElementSpec::named("pool")],
        )
        .commit()
        .unwrap();
    within(
        "list_changed after attach",
        client.service().list_changed.notified(),
    )
    .await;
    let after = list(&client).await;
    assert_eq!(names(&after).len(), before.len() + 2, "{:?}", names(&after));
    let branch = find(&after, "translate_trace_pool");
    assert_eq!(branch.description.as_deref(), Some("Translate a text."));
    let translated = call_ok(
        &client,
        "translate_trace_pool",
        json!({"text": "bom dia", "to": "en"}),
    )
    .await;
    assert_eq!(text(&translated), "[en] bom dia");

    toolset
        .edit()
        .detach(
            "translate",
            &[ElementSpec::named("trace"), ElementSpec::named("pool")],
        )
        .commit()
        .unwrap();
    within(
        "list_changed after detach",
        client.service().list_changed.notified(),
    )
    .await;
    assert_eq!(names(&list(&client).await), before);
    let gone = call_err(
        &client,
        "translate_trace_pool",
        json!({"text": "x", "to": "y"}),
    )
    .await;
    assert_eq!(gone.code, ErrorCode::INVALID_PARAMS);

    // A refused change changes nothing, and announces nothing.
    let notified = client.service().notifications.load(Ordering::SeqCst);
    assert!(
        toolset
            .edit()
            .attach(&registry, "weather_trace", &[ElementSpec::named("cache")])
            .commit()
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        client.service().notifications.load(Ordering::SeqCst),
        notified
    );
    client.cancel().await.unwrap();
}

/// The server remembers per name whether results are structured, until the bound
/// names change: a name unknown at one call and bound at the next is structured.
#[tokio::test]
async fn structured_results_follow_live_changes() {
    let (toolset, registry) = toolset();
    let client = legacy(&toolset).await;
    let city = json!({"city": "Porto"});
    let unknown = call_err(&client, "weather_cache", city.clone()).await;
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);

    toolset
        .edit()
        .attach(&registry, "weather", &[ElementSpec::named("cache")])
        .commit()
        .unwrap();
    let cached = call_ok(&client, "weather_cache", city.clone()).await;
    assert_eq!(cached.structured_content.unwrap()["city"], "Porto");

    toolset
        .edit()
        .detach("weather", &[ElementSpec::named("cache")])
        .commit()
        .unwrap();
    let gone = call_err(&client, "weather_cache", city.clone()).await;
    assert_eq!(gone.code, ErrorCode::INVALID_PARAMS);
    // Names never bound stay protocol errors beside remembered ones.
    for n in 0..3 {
        let missing = call_err(&client, &format!("nothing_{n}"), json!({})).await;
        assert_eq!(missing.code, ErrorCode::INVALID_PARAMS);
    }
    let base = call_ok(&client, "weather", city).await;
    assert!(base.structured_content.is_some());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn each_connection_is_told_of_changes() {
    let (toolset, registry) = toolset();
    let first = legacy(&toolset).await;
    let second = legacy(&toolset).await;
    toolset
        .edit()
        .attach(&registry, "translate", &[ElementSpec::named("cache")])
        .commit()
        .unwrap();
    for client in [&first, &second] {
        within("list_changed", client.service().list_changed.notified()).await;
        assert!(names(&list(client).await).contains(&"translate_cache".to_owned()));
    }
    first.cancel().await.unwrap();

    // The other connection goes on after one ends.
    toolset
        .edit()
        .detach("translate", &[ElementSpec::named("cache")])
        .commit()
        .unwrap();
    within("list_changed", second.service().list_changed.notified()).await;
    assert!(!names(&list(&second).await).contains(&"translate_cache".to_owned()));
    second.cancel().await.unwrap();
}

#[tokio::test]
async fn modern_clients_get_any_output_shape_and_listen_for_changes() {
    let (toolset, registry) = toolset();
    let client = modern(&toolset).await;
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );

    // SEP-2106: any schema is an output schema, and any value structured content.
    let tools = list(&client).await;
    let batch = output_json(find(&tools, "weather_batch_pool")).expect("an output schema");
    assert_eq!(batch["type"], "array");
    assert_eq!(
        batch,
        schema_json(
            toolset
                .info("weather_batch_pool")
                .unwrap()
                .output_schema
                .as_ref()
                .unwrap()
        )
    );
    assert_eq!(
        output_json(find(&tools, "translate")).unwrap()["type"],
        "string"
    );
    let translated = call_ok(&client, "translate", json!({"text": "hello", "to": "pt"})).await;
    assert_eq!(translated.structured_content, Some(json!("[pt] hello")));
    assert_eq!(text(&translated), r#""[pt] hello""#);
    let items = call_ok(
        &client,
        "weather_batch",
        json!({"items": [{"city": "Quito"}]}),
    )
    .await;
    assert_eq!(items.structured_content.unwrap()[0]["city"], "Quito");

    // Errors map the same way on this lifecycle.
    let invalid = call_err(&client, "weather", json!({"town": "Oslo"})).await;
    assert_eq!(invalid.code, ErrorCode::INVALID_PARAMS);
    let failed = call_ok(&client, "weather", json!({"city": ""})).await;
    assert_eq!(failed.is_error, Some(true));

    // On 2026-07-28, list changes arrive on a `subscriptions/listen` stream.
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = within("listen", client.listen(filter.clone()))
        .await
        .expect("listen");
    assert_eq!(subscription.acknowledged(), &filter);
    toolset
        .edit()
        .attach(&registry, "translate", &[ElementSpec::named("trace")])
        .commit()
        .unwrap();
    let notification = within("a notification", subscription.next())
        .await
        .expect("a notification")
        .expect("the stream is open");
    assert!(matches!(
        notification,
        ServerNotification::ToolListChangedNotification(_)
    ));
    assert!(names(&list(&client).await).contains(&"translate_trace".to_owned()));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_call_stops_the_tool() {
    let (toolset, _) = toolset();
    let client = legacy(&toolset).await;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("wait").with_arguments(JsonObject::new()),
    ));
    let started = WAIT_STARTED.notified();
    let handle = within(
        "send",
        client.send_cancellable_request(request, PeerRequestOptions::no_options()),
    )
    .await
    .unwrap();
    within("the body starts", started).await;
    assert!(!WAIT_DROPPED.load(Ordering::SeqCst));
    within("cancel", handle.cancel(Some("changed my mind".into())))
        .await
        .unwrap();
    within("the body is dropped", async {
        while !WAIT_DROPPED.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    client.cancel().await.unwrap();
}

// ---------------------------------------------------------------- over stdio

/// The binary of `examples/mcp_server.rs`.
///
/// A whole `cargo test` builds the package's examples before it runs any test,
/// with the same profile, features and target directory as this test binary, so
/// the example is taken from beside it (`<profile>/examples/`) when it is newer
/// than its sources. Otherwise (`cargo test --test mcp` builds no example) it is
/// built with the same cargo: a build of its own, since cargo unifies the
/// dependencies' features over the packages a command selects.
async fn example_binary() -> PathBuf {
    if let Some(built) = example_beside_this_test() {
        return built;
    }
    let mut build = tokio::process::Command::new(env!("CARGO"));
    build
        .args(["build", "--example", "mcp_server"])
        .args(["--message-format", "json-render-diagnostics"])
        .arg("--manifest-path")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(600), build.output())
        .await
        .expect("building the example timed out")
        .expect("cargo runs");
    assert!(output.status.success(), "building the example failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| message["target"]["name"] == "mcp_server")
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .expect("cargo reports the example's executable")
}

fn example_beside_this_test() -> Option<PathBuf> {
    let modified = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|meta| meta.modified())
            .ok()
    };
    let this_test = std::env::current_exe().ok()?;
    let profile = this_test.parent()?.parent()?;
    let binary = profile
        .join("examples")
        .join(format!("mcp_server{}", std::env::consts::EXE_SUFFIX));
    let built = modified(&binary)?;
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = [
        crate_dir.join("examples/mcp_server.rs"),
        crate_dir.join("src/lib.rs"),
        crate_dir.join("Cargo.toml"),
    ];
    sources
        .iter()
        .all(|source| modified(source).is_some_and(|changed| changed <= built))
        .then_some(binary)
}

/// Writes `text` to `path` in one step, so the server never reads half a file.
fn write_manifest(path: &Path, text: &str) {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text).unwrap();
    std::fs::rename(&partial, path).unwrap();
}

#[tokio::test]
async fn the_example_serves_over_stdio() {
    let binary = example_binary().await;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let manifest =
        std::env::temp_dir().join(format!("toolgraft-mcp-{}-{stamp}.json", std::process::id()));
    write_manifest(&manifest, r#"{"tools": {}}"#);

    let mut command = tokio::process::Command::new(&binary);
    command.arg("--manifest").arg(&manifest);
    // Killed even if this test fails half-way.
    command.kill_on_drop(true);
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .expect("the example starts");
    let mut stderr = stderr.expect("stderr is piped");
    let log = tokio::spawn(async move {
        let mut log = String::new();
        let _ = stderr.read_to_string(&mut log).await;
        log
    });

    let client = within("initialize", Client::default().serve(transport))
        .await
        .expect("the example answers initialize");
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "toolgraft-weather");

    let tools = list(&client).await;
    for name in [
        "weather",
        "weather_trace_cache",
        "weather_proxy",
        "weather_proxy_pool",
        "weather_batch_pool",
        "translate_cache",
        "get_user_output_schema",
    ] {
        find(&tools, name);
    }
    assert_eq!(
        output_json(find(&tools, "weather_proxy_pool")),
        output_json(find(&tools, "weather"))
    );

    let remote = call_ok(
        &client,
        "weather_proxy_pool",
        json!({"city": "Lisbon", "proxies": ["egress-us"]}),
    )
    .await;
    let forecast = remote.structured_content.expect("structured");
    assert_eq!(
        (forecast["city"].as_str(), forecast["route"].as_str()),
        (Some("Lisbon"), Some("egress-us"))
    );

    let invalid = call_err(
        &client,
        "weather_proxy_pool",
        json!({"city": "Lisbon", "exp": 60}),
    )
    .await;
    assert_eq!(invalid.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(invalid.data.as_ref().unwrap()["field"], "exp");

    let failed = call_ok(&client, "get_user_output_schema", json!({"user_id": 2})).await;
    assert_eq!(failed.is_error, Some(true));
    assert!(text(&failed).contains("at `/name`"), "{}", text(&failed));

    // The operator edits the manifest: the running server re-binds and says so.
    write_manifest(&manifest, r#"{"tools": {"translate": [["trace"]]}}"#);
    within(
        "list_changed from the example",
        client.service().list_changed.notified(),
    )
    .await;
    let changed = names(&list(&client).await);
    assert!(
        changed.contains(&"translate_trace".to_owned()),
        "{changed:?}"
    );
    assert!(
        !changed.contains(&"translate_cache".to_owned()),
        "{changed:?}"
    );

    // Closing the client closes the server's stdin; the server must exit on its own.
    within("closing", client.cancel()).await.unwrap();
    let log = within("the server's stderr", log).await.unwrap();
    assert!(log.contains("the client closed the connection"), "{log}");
    let _ = std::fs::remove_file(&manifest);
}

/// A wrapper that panics when told to: its own code, not the body's.
#[derive(Clone)]
struct Fragile;

/// Set to make the next call through `Fragile` panic.
static FRAGILE_PANICS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl toolgraft::Extension for Fragile {
    type Kind = toolgraft::extension::Wrapper;
    type Locality = toolgraft::extension::Anywhere;

    fn name(&self) -> &str {
        "fragile"
    }
}

impl<S: Stack> Wrap<S> for Fragile {
    type Params = ();

    async fn around(
        &self,
        next: toolgraft::extension::Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, toolgraft::ToolError> {
        if FRAGILE_PANICS.swap(false, std::sync::atomic::Ordering::SeqCst) {
            panic!("fragile wrapper gave up");
        }
        next.call(input).await
    }
}

/// A panic in an extension's own code is an `isError` result, arguments nested
/// past the toolset's depth limit are refused as invalid params (`too_deep`), and
/// the server keeps serving.
#[tokio::test]
async fn a_panic_is_an_error_result_and_deep_arguments_are_refused() {
    let weather = Tool::builder()
        .name("weather")
        .description("Tomorrow's forecast for a city.")
        .read_only()
        .body(forecast)
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((weather.combo().with(Fragile),)).unwrap();
    let server = ToolsetServer::new(toolset);
    let shape = toolgraft_mcp::OutputShape::AnyJson;

    let boom = args(json!({"city": "boom"}));
    FRAGILE_PANICS.store(true, std::sync::atomic::Ordering::SeqCst);
    let result = server
        .call("weather_fragile", Some(boom), shape)
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));

    let mut deep = json!(1);
    for _ in 0..1_000 {
        deep = Value::Array(vec![deep]);
    }
    let deep = serde_json::Map::from_iter([("city".to_owned(), deep)]);
    let refused = server.call("weather", Some(deep), shape).await;
    assert_eq!(
        refused.unwrap_err().data.unwrap()["kind"],
        json!("too_deep")
    );

    let fine = server
        .call(
            "weather_fragile",
            Some(args(json!({"city": "Oslo"}))),
            shape,
        )
        .await;
    assert_ne!(fine.unwrap().is_error, Some(true));
}

/// A call a rate limit refuses is a result with `isError` that says why, and
/// when to call again in `_meta` (milliseconds), for a client that retries.
#[tokio::test(start_paused = true)]
async fn an_overloaded_call_says_when_to_call_again() {
    let toolset = Toolset::new();
    let ping = Tool::builder()
        .name("ping")
        .description("Answer pong.")
        .read_only()
        .body(|_: Nothing| async move { Ok::<_, BoxError>("pong".to_owned()) })
        .build()
        .unwrap();
    toolset
        .bind((ping.combo().with(toolgraft::ext::RateLimit::new(
            1,
            Duration::from_millis(400),
        )),))
        .unwrap();
    let client = legacy(&toolset).await;

    let admitted = call_ok(&client, "ping_rate_limit", json!({})).await;
    assert_eq!(admitted.is_error, Some(false), "{admitted:?}");
    let refused = call_ok(&client, "ping_rate_limit", json!({})).await;
    println!("refused: {}  _meta: {:?}", text(&refused), refused.meta);
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("`rate_limit` refused the call to `ping_rate_limit`"),
        "{refused:?}"
    );
    let meta = refused.meta.as_ref().expect("when, in `_meta`");
    let after = meta.0[toolgraft_mcp::RETRY_AFTER_META].as_u64().unwrap();
    assert!(after > 0 && after <= 400, "{after}");
    client.cancel().await.unwrap();
}

/// tools/list carries the hints by rule: a wrapper's branch keeps the base's,
/// a transformer's (a new tool with its own input) has none of what a call
/// does, only the title and open-world.
#[tokio::test]
async fn tools_list_carries_hints_by_rule() {
    let (toolset, _) = toolset();
    let client = legacy(&toolset).await;
    let tools = list(&client).await;
    let hints = |name: &str| {
        find(&tools, name)
            .annotations
            .as_ref()
            .map(|hints| (hints.read_only_hint, hints.idempotent_hint))
    };
    assert_eq!(hints("weather"), Some((Some(true), None)));
    assert_eq!(hints("weather_trace_cache"), Some((Some(true), None)));
    assert_eq!(hints("weather_batch"), None);
    client.cancel().await.unwrap();
}
