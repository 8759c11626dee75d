//! The toolset beside an author's handler, where the two could step on each
//! other: names the toolset hides, the handler's paged tools, the server's
//! info at `initialize`, and a body's progress reported faster than it is sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    Implementation, InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult,
    PaginatedRequestParams, RequestMetaObject, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgraft::context::{self, Progress};
use toolgraft::ext::Cache;
use toolgraft::prelude::*;
use toolgraft::toolset::Publish;
use toolgraft_mcp::{ToolsetServer, import};

use crate::support::{Connection, connect, request, within};

#[derive(Clone)]
struct Notes {
    searches: Arc<AtomicUsize>,
}

#[derive(Deserialize, JsonSchema)]
struct Search {
    query: String,
}

#[tool_router]
impl Notes {
    fn new() -> Self {
        Self {
            searches: Arc::default(),
        }
    }

    #[tool(description = "Search the notes.", annotations(read_only_hint = true))]
    async fn search(&self, Parameters(search): Parameters<Search>) -> String {
        self.searches.fetch_add(1, Ordering::SeqCst);
        format!("1 note says {}", search.query)
    }
}

#[tool_handler]
impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .build();
        ServerConfig::new(capabilities)
    }
}

async fn names(client: &Connection) -> Vec<String> {
    within("listing", client.list_all_tools())
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect()
}

#[derive(Deserialize, JsonSchema)]
struct Steps {
    steps: u32,
}

/// A body that reports every step without yielding in between (a tight loop
/// over an in-memory job): the reports pile up before the server can send any.
fn stepper() -> impl toolgraft::tool::BaseTool + Clone {
    Tool::builder()
        .name("steps")
        .description("Work in steps.")
        .read_only()
        .body(|input: Steps| async move {
            for step in 1..=input.steps {
                context::report_progress(Progress::new(step.into()).with_total(input.steps.into()));
            }
            Ok("done")
        })
        .build()
        .unwrap()
}

/// call.rs says a body reporting faster than the client is sent "loses the
/// ones in between (a later report says more than an earlier one)"; the queue
/// keeps the first 64 and drops every later one, the final `200 of 200`
/// included, so the client's progress bar stops at 64 of 200.
#[tokio::test]
async fn the_last_progress_report_is_never_the_one_dropped() {
    let toolset = Toolset::new();
    toolset.bind((stepper().combo(),)).unwrap();
    let client = connect(ToolsetServer::new(toolset)).await;
    let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(1));
    let mut params = request("steps", json!({"steps": 200}));
    params.meta = Some(RequestMetaObject::with_progress_token(token));
    within("calling", client.call_tool(params)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let progress = client.service().progress.lock().unwrap().clone();
    let last = progress.last().map(|p| p.progress);
    assert_eq!(
        last,
        Some(200.0),
        "{} reports reached the client, the last being {last:?}",
        progress.len()
    );
    client.cancel().await.unwrap();
}

/// The documented way to serve the toolset beside the author's handler, where
/// the author also imported the handler's tools to give them combos, and
/// publishes only the cached branch. `with_handler`'s docs: the handler's own
/// tools are listed "under names the toolset does not bind". The toolset binds
/// `search` (hidden), yet the handler's raw, uncached `search` is listed and
/// called: hiding a base re-exposes it without its combo.
#[tokio::test]
async fn a_name_the_toolset_binds_but_hides_is_not_the_handlers() {
    let notes = Notes::new();
    let tools = import::tools(Notes::tool_router(), notes.clone()).unwrap();
    let toolset = Toolset::new();
    toolset
        .bind(
            tools
                .iter()
                .map(|tool| tool.combo().with(Cache::default()))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    toolset
        .edit()
        .publish("search", Publish::Outermost)
        .commit()
        .unwrap();
    assert!(toolset.contains("search") && !toolset.is_published("search"));

    let client = connect(ToolsetServer::new(toolset).with_handler(notes.clone())).await;
    let listed = names(&client).await;
    assert_eq!(listed, ["search_cache"], "the raw base is back: {listed:?}");
    let raw = within(
        "calling",
        client.call_tool(request("search", json!({"query": "tea"}))),
    )
    .await;
    assert!(raw.is_err(), "{raw:?}");
    assert_eq!(notes.searches.load(Ordering::SeqCst), 0);
    client.cancel().await.unwrap();
}

/// A name published as an alias of a branch is the toolset's: listed, and
/// called through the branch, even when the handler has tools of its own
/// (issue 36, item 3: it was listed, and called on the handler, which answered
/// "tool not found").
#[tokio::test]
async fn an_alias_the_toolset_publishes_is_called_beside_a_handler_with_tools() {
    let notes = Notes::new();
    let tools = import::tools(Notes::tool_router(), notes.clone()).unwrap();
    let toolset = Toolset::new();
    toolset
        .bind(
            tools
                .iter()
                .map(|tool| tool.combo().with(Cache::default()))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    toolset
        .edit()
        .publish(
            "search",
            Publish::only([("search_cached", "search_cache")]).unwrap(),
        )
        .commit()
        .unwrap();

    let client = connect(ToolsetServer::new(toolset).with_handler(notes.clone())).await;
    assert_eq!(names(&client).await, ["search_cached"]);
    for _ in 0..2 {
        let called = within(
            "calling",
            client.call_tool(request("search_cached", json!({"query": "tea"}))),
        )
        .await
        .unwrap();
        assert_eq!(called.content[0].as_text().unwrap().text, "1 note says tea");
    }
    assert_eq!(
        notes.searches.load(Ordering::SeqCst),
        1,
        "the second call is the cache's"
    );
    client.cancel().await.unwrap();
}

/// A handler of its own with no server name or instructions.
#[derive(Clone)]
struct Prompts;

impl ServerHandler for Prompts {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_prompts().build())
    }
}

/// `with_handler(&self)` is made to be called per session on a template server;
/// it keeps the template's `with_bad_arguments` but drops its
/// `with_server_info` and `with_instructions`: the session calls itself `rmcp`
/// and gives the model no instructions.
#[test]
fn with_handler_keeps_the_templates_server_info_and_instructions() {
    let template = ToolsetServer::new(Toolset::new())
        .with_server_info(Implementation::new("weather", "1.2.0"))
        .with_instructions("Ask for weather.");
    let session = template.with_handler(Prompts);
    let info = session.get_info();
    assert_eq!(info.server_info.name, "weather");
    assert_eq!(info.instructions.as_deref(), Some("Ask for weather."));
}

/// A handler whose `initialize` says something for this client: what it
/// answers at `initialize` is overwritten with what its `get_info` said once,
/// when `with_handler` ran.
#[derive(Clone)]
struct PerClient;

impl ServerHandler for PerClient {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_prompts().build())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let mut result = self.negotiate_initialize(&request)?;
        result.instructions = Some(format!("Hello, {}.", request.client_info.name));
        context.peer.set_peer_info(request);
        Ok(result)
    }
}

#[tokio::test]
async fn initialize_keeps_what_the_handler_answered() {
    let client = connect(ToolsetServer::new(Toolset::new()).with_handler(PerClient)).await;
    let name = ClientHandler::get_info(client.service()).client_info.name;
    let info = client.peer_info().unwrap();
    assert_eq!(
        info.instructions.as_deref(),
        Some(format!("Hello, {name}.").as_str())
    );
    client.cancel().await.unwrap();
}

/// A handler that pages its tools (rmcp's cursor): the merged list answers
/// every page as the whole list, so the handler's later pages are lost.
#[derive(Clone)]
struct Paged;

impl ServerHandler for Paged {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tool = |name: &'static str| {
            McpTool::new(
                name,
                "A tool of the handler's.",
                Arc::new(JsonObject::new()),
            )
        };
        let cursor = request.and_then(|request| request.cursor);
        Ok(match cursor.as_deref() {
            None => ListToolsResult {
                tools: vec![tool("first")],
                next_cursor: Some("2".into()),
                ..ListToolsResult::default()
            },
            Some(_) => ListToolsResult::with_all_items(vec![tool("second")]),
        })
    }
}

#[tokio::test]
async fn a_handlers_paged_tools_are_all_listed_once() {
    let toolset = Toolset::new();
    toolset.bind((stepper().combo(),)).unwrap();
    let client = connect(ToolsetServer::new(toolset).with_handler(Paged)).await;
    let listed = names(&client).await;
    assert_eq!(listed, ["steps", "first", "second"]);
    client.cancel().await.unwrap();
}

/// rmcp's `counter`: the count is a field of the handler, made per session.
#[derive(Clone)]
struct Counter {
    count: Arc<std::sync::Mutex<i32>>,
}

#[tool_router]
impl Counter {
    fn new() -> Self {
        Self {
            count: Arc::default(),
        }
    }

    #[tool(description = "Increment the counter by 1")]
    async fn increment(&self) -> String {
        let mut count = self.count.lock().unwrap();
        *count += 1;
        count.to_string()
    }

    #[tool(
        description = "Get the current counter value",
        annotations(read_only_hint = true)
    )]
    async fn get_value(&self) -> String {
        self.count.lock().unwrap().to_string()
    }
}

#[tool_handler]
impl ServerHandler for Counter {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

async fn text_of(client: &Connection, name: &'static str) -> String {
    let called = within("calling", client.call_tool(request(name, json!({}))))
        .await
        .unwrap();
    called.content[0].as_text().unwrap().text.clone()
}

/// Issue 36, item 1: with tools imported from one instance, every session
/// shared one count, and a handler made per session (as `with_handler` advises)
/// held a count of its own beside the imported tools' (`increment` said 1, 2;
/// `get_value` said 0). Imported per session, each session's tools run on its
/// handler, the layers still apply, and the handler's own tools agree.
#[tokio::test]
async fn tools_imported_per_session_run_on_each_sessions_handler() {
    let tools = import::per_session(Counter::tool_router()).unwrap();
    let toolset = Toolset::new();
    toolset
        .bind_in_place((
            tools["increment"].combo().with(toolgraft::ext::Trace),
            tools["get_value"].combo().with(Cache::default()),
        ))
        .unwrap();
    let template = ToolsetServer::new(toolset.clone());
    let first = connect(template.with_handler(Counter::new())).await;
    let second = connect(template.with_handler(Counter::new())).await;
    assert_eq!(text_of(&first, "increment").await, "1");
    assert_eq!(text_of(&first, "increment").await, "2");
    assert_eq!(text_of(&first, "get_value").await, "2");
    // The cache keeps one answer per session: the first session's is not the
    // second's (no principal tells them apart here).
    assert_eq!(
        text_of(&second, "get_value").await,
        "0",
        "a session of its own"
    );
    assert_eq!(text_of(&second, "increment").await, "1");
    assert_eq!(text_of(&first, "get_value").await, "2");

    let listed = within("listing", first.list_all_tools()).await.unwrap();
    let meta = listed
        .iter()
        .find(|tool| tool.name == "get_value")
        .unwrap()
        .meta
        .clone();
    assert_eq!(
        meta.unwrap().get(import::PER_SESSION_META),
        Some(&json!(true)),
        "clients are told the answers are the session's"
    );

    // Where no session's `Counter` is, the call says so and runs nothing.
    let refused = toolset.call("increment", json!({})).await.unwrap_err();
    assert!(
        refused.to_string().contains("import::per_session")
            && refused.to_string().contains("ToolsetServer::with_handler"),
        "{refused}"
    );
    let other = connect(template.with_handler(Prompts)).await;
    let called = within("calling", other.call_tool(request("increment", json!({})))).await;
    assert!(
        format!("{called:?}").contains("import::per_session"),
        "{called:?}"
    );
    for client in [first, second, other] {
        client.cancel().await.unwrap();
    }
}

/// Issue 36, item 2: rmcp takes a property its tool's schema does not name
/// (`sum` with `c: 3` answers 3), and so does an imported tool now; a server set
/// to refuse them lists every schema as closed, and refuses the call as bad
/// arguments before any layer runs.
#[tokio::test]
async fn an_extra_argument_is_taken_unless_the_server_refuses_them() {
    let notes = Notes::new();
    let tools = import::tools(Notes::tool_router(), notes.clone()).unwrap();
    let toolset = Toolset::new();
    toolset
        .bind_in_place((tools["search"].combo().with(Cache::default()),))
        .unwrap();
    let extra = json!({"query": "tea", "limit": 3});

    let taking = connect(ToolsetServer::new(toolset.clone())).await;
    let called = within(
        "calling",
        taking.call_tool(request("search", extra.clone())),
    )
    .await
    .unwrap();
    assert_eq!(called.content[0].as_text().unwrap().text, "1 note says tea");
    let listed = within("listing", taking.list_all_tools()).await.unwrap();
    assert_eq!(listed[0].input_schema.get("additionalProperties"), None);

    let refusing = connect(
        ToolsetServer::new(toolset).with_unknown_arguments(toolgraft_mcp::UnknownArguments::Refuse),
    )
    .await;
    let listed = within("listing", refusing.list_all_tools()).await.unwrap();
    assert_eq!(
        listed[0].input_schema.get("additionalProperties"),
        Some(&json!(false))
    );
    let refused = within("calling", refusing.call_tool(request("search", extra)))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(refused) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(refused.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    assert_eq!(
        refused.data,
        Some(json!({"tool": "search", "field": "limit", "kind": "unknown_field"}))
    );
    assert_eq!(
        notes.searches.load(Ordering::SeqCst),
        1,
        "refused before the body"
    );
    within(
        "calling",
        refusing.call_tool(request("search", json!({"query": "tea"}))),
    )
    .await
    .unwrap();
    for client in [taking, refusing] {
        client.cancel().await.unwrap();
    }
}

/// Issue 36, item 16: a body reporting 100,000 times in 2 s sent the client
/// 90,831 notifications in process, where the same body on a worker sent 41.
/// In process too, the client gets at most one every `PROGRESS_EVERY` (the
/// newest), and the last one.
#[tokio::test]
async fn in_process_progress_is_folded_as_a_workers_is() {
    #[derive(Deserialize, JsonSchema)]
    struct Rounds {
        rounds: u32,
    }
    let busy = Tool::builder()
        .name("busy")
        .description("Report often, in rounds.")
        .read_only()
        .body(|input: Rounds| async move {
            for round in 0..input.rounds {
                for step in 1..=1000 {
                    let done = f64::from(round * 1000 + step);
                    context::report_progress(Progress::new(done));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok("done")
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((busy.combo(),)).unwrap();
    let client = connect(ToolsetServer::new(toolset)).await;
    let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(1));
    let mut params = request("busy", json!({"rounds": 60}));
    params.meta = Some(RequestMetaObject::with_progress_token(token));
    let started = std::time::Instant::now();
    within("calling", client.call_tool(params)).await.unwrap();
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let progress = client.service().progress.lock().unwrap().clone();
    // One at once, then one per period at most, and the last one.
    let most = elapsed.as_millis() / toolgraft::context::PROGRESS_EVERY.as_millis() + 2;
    assert!(
        (progress.len() as u128) <= most,
        "{} notifications for 60,000 reports in {elapsed:?} (at most {most})",
        progress.len()
    );
    assert_eq!(progress.last().map(|p| p.progress), Some(60_000.0));
    let in_order = progress
        .windows(2)
        .all(|pair| pair[0].progress < pair[1].progress);
    assert!(in_order, "in order");
    client.cancel().await.unwrap();
}

#[derive(Deserialize, JsonSchema)]
struct Labels {
    #[serde(flatten)]
    labels: std::collections::HashMap<String, String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Shape {
    Circle { radius: f64 },
    Square { side: f64 },
}

/// `UnknownArguments::Refuse` closes what names its properties and nothing
/// else: a map input (`additionalProperties` a schema) and a tagged enum
/// (`oneOf`) are listed as they say and stay callable (a hostile review found
/// both refused, and the enum listed so that no argument validated).
#[tokio::test]
async fn refusing_unknown_arguments_leaves_maps_and_alternatives_as_they_say() {
    let labels = Tool::builder()
        .name("labels")
        .description("Count the labels.")
        .read_only()
        .body(|input: Labels| async move { Ok(input.labels.len()) })
        .build()
        .unwrap();
    let area = Tool::builder()
        .name("area")
        .description("The area of a shape.")
        .read_only()
        .body(|input: Shape| async move {
            Ok(match input {
                Shape::Circle { radius } => 3.0 * radius * radius,
                Shape::Square { side } => side * side,
            })
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((labels.combo(), area.combo())).unwrap();
    let client = connect(
        ToolsetServer::new(toolset).with_unknown_arguments(toolgraft_mcp::UnknownArguments::Refuse),
    )
    .await;
    let listed = within("listing", client.list_all_tools()).await.unwrap();
    for tool in &listed {
        assert_ne!(
            tool.input_schema.get("additionalProperties"),
            Some(&json!(false)),
            "{}: {:?}",
            tool.name,
            tool.input_schema
        );
    }
    let counted = within(
        "calling",
        client.call_tool(request("labels", json!({"team": "red", "tier": "gold"}))),
    )
    .await
    .unwrap();
    assert_eq!(counted.content[0].as_text().unwrap().text, "2");
    let square = within(
        "calling",
        client.call_tool(request("area", json!({"kind": "square", "side": 3.0}))),
    )
    .await
    .unwrap();
    assert_eq!(square.content[0].as_text().unwrap().text, "9.0");
    client.cancel().await.unwrap();
}

/// Beside a handler with tools, a name the toolset binds but does not show
/// this caller (a base published through its branch; a name a policy hides
/// alike) must answer as a name nobody serves does: the handler answers those,
/// in its own words, so the toolset's "unknown tool" for its hidden name tells
/// the caller the name exists.
#[tokio::test]
async fn a_hidden_name_beside_a_handler_answers_as_an_unknown_one() {
    let notes = Notes::new();
    let tools = import::tools(Notes::tool_router(), notes.clone()).unwrap();
    let toolset = Toolset::new();
    toolset
        .bind(
            tools
                .iter()
                .map(|tool| tool.combo().with(Cache::default()))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    toolset
        .edit()
        .publish("search", Publish::Outermost)
        .commit()
        .unwrap();
    let client = connect(ToolsetServer::new(toolset).with_handler(notes.clone())).await;
    let call = |name: &'static str| {
        within(
            "calling",
            client.call_tool(request(name, json!({"query": "tea"}))),
        )
    };
    let hidden = call("search").await.unwrap_err().to_string();
    let unknown = call("sreach").await.unwrap_err().to_string();
    assert_eq!(
        hidden.replace("search", "NAME"),
        unknown.replace("sreach", "NAME")
    );
    client.cancel().await.unwrap();
}
