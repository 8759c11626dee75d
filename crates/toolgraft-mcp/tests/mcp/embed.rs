//! toolgraft inside an rmcp server of one's own: rmcp tools brought in, the
//! toolset's tools beside the author's handler, the call context a body reads,
//! and content blocks passed through.
// Logging is deprecated in the newest protocol, and still what clients show.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    ContentBlock, ErrorCode, ListPromptsResult, LoggingLevel, LoggingMessageNotificationParam,
    MetaObject, PaginatedRequestParams, Prompt, RequestMetaObject, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{
    ClientHandler, ErrorData, Peer, RoleServer, ServerHandler, tool, tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgraft::context::{self, LogLevel, LogMessage, Progress};
use toolgraft::ext::{Cache, Pool, Timeout};
use toolgraft::prelude::*;
use toolgraft_mcp::call::McpCall;
use toolgraft_mcp::{BadArguments, ERROR_META, McpContent, ToolsetServer, import};

use crate::support::{connect, request, within};

/// The notes server of an author, in plain rmcp: two tools, a prompt.
#[derive(Clone)]
struct Notes {
    searches: Arc<AtomicUsize>,
}

#[derive(Deserialize, JsonSchema)]
struct Search {
    /// What to look for.
    query: String,
}

#[tool_router]
impl Notes {
    fn new() -> Self {
        Self {
            searches: Arc::default(),
        }
    }

    #[tool(
        title = "Search notes",
        description = "Search the notes.",
        annotations(read_only_hint = true, open_world_hint = false),
        meta = MetaObject(json!({"example.com/team": "notes"}).as_object().cloned().unwrap())
    )]
    async fn search(&self, Parameters(search): Parameters<Search>) -> String {
        self.searches.fetch_add(1, Ordering::SeqCst);
        format!("1 note says {}", search.query)
    }

    #[tool(description = "Who is asking.")]
    async fn whoami(&self, peer: Peer<RoleServer>) -> Result<String, ErrorData> {
        let client = peer.peer_info().map(|info| info.client_info.name.clone());
        Ok(client.unwrap_or_else(|| "nobody".to_owned()))
    }
}

#[tool_handler]
impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .build();
        ServerConfig::new(capabilities).with_instructions("Notes of the author's own.")
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompt = Prompt::new("summarize", Some("Summarize the notes."), None);
        Ok(ListPromptsResult::with_all_items(vec![prompt]))
    }
}

/// The notes' tools in a toolset, `cache` on `search` and `timeout` on both.
fn imported(notes: &Notes) -> Toolset {
    let tools = import::tools(Notes::tool_router(), notes.clone()).unwrap();
    let (search, whoami) = (&tools[0], &tools[1]);
    let toolset = Toolset::new();
    toolset
        .bind((
            search
                .combo()
                .with(Cache::default())
                .with(Timeout::new(Duration::from_secs(10))),
            whoami.combo().with(Timeout::new(Duration::from_secs(10))),
        ))
        .unwrap();
    toolset
}

#[tokio::test]
async fn an_rmcp_router_comes_in_with_all_it_says_of_its_tools() {
    let notes = Notes::new();
    let toolset = imported(&notes);
    assert_eq!(
        toolset.names(),
        [
            "search",
            "search_cache",
            "search_cache_timeout",
            "whoami",
            "whoami_timeout"
        ]
    );
    let client = connect(ToolsetServer::new(toolset)).await;
    let tools = client.list_all_tools().await.unwrap();
    let listed = |name: &str| tools.iter().find(|tool| tool.name == name).unwrap().clone();
    for name in ["search", "search_cache_timeout"] {
        let search = listed(name);
        assert_eq!(search.title.as_deref(), Some("Search notes"), "{name}");
        let hints = search.annotations.as_ref().unwrap();
        assert_eq!(
            (hints.read_only_hint, hints.open_world_hint),
            (Some(true), Some(false))
        );
        assert_eq!(search.meta.as_ref().unwrap().0["example.com/team"], "notes");
        assert_eq!(search.input_schema["properties"]["query"]["type"], "string");
    }
    // `cache` adds its reserved param to the branch, as on any tool.
    assert!(
        listed("search_cache").input_schema["properties"]
            .get("exp")
            .is_some()
    );
    assert!(
        listed("search").output_schema.is_none(),
        "content, not a schema"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn imported_tools_are_called_through_their_combos_with_the_request_they_came_in() {
    let notes = Notes::new();
    let client = connect(ToolsetServer::new(imported(&notes))).await;
    for _ in 0..2 {
        let found = client
            .call_tool(request("search_cache_timeout", json!({"query": "rust"})))
            .await
            .unwrap();
        assert_eq!(found.content[0].as_text().unwrap().text, "1 note says rust");
    }
    assert_eq!(
        notes.searches.load(Ordering::SeqCst),
        1,
        "the second was cached"
    );

    // The rmcp method asked for the peer: it is the client this call came from.
    let who = client
        .call_tool(request("whoami_timeout", json!({})))
        .await
        .unwrap();
    let name = ClientHandler::get_info(client.service()).client_info.name;
    assert_eq!(who.content[0].as_text().unwrap().text, name);
    client.cancel().await.unwrap();

    // Not over MCP, there is no client behind the peer.
    let toolset = imported(&notes);
    let who = toolset.call("whoami", json!({})).await.unwrap();
    assert_eq!(who["content"][0]["text"], "nobody");
}

#[tokio::test]
async fn bad_arguments_of_an_imported_tool_are_answered_in_either_mapping() {
    let notes = Notes::new();
    let client = connect(ToolsetServer::new(imported(&notes))).await;
    // `Parameters<Search>` does not decode `query: 3`: rmcp says invalid params.
    let refused = client
        .call_tool(request("search", json!({"query": 3})))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(error) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(error.data.as_ref().unwrap()["tool"], "search");
    client.cancel().await.unwrap();

    let server =
        ToolsetServer::new(imported(&notes)).with_bad_arguments(BadArguments::AsToolResult);
    let client = connect(server).await;
    let result = client
        .call_tool(request("search_cache", json!({"query": 3})))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    let data = &result.meta.as_ref().unwrap().0[ERROR_META];
    // The tool the client called, whichever layer found the arguments wrong.
    assert_eq!(data["tool"], "search_cache");
    assert_eq!(data["kind"], "invalid_value");
    assert!(
        result.content[0]
            .as_text()
            .unwrap()
            .text
            .contains("expected a string"),
        "{result:?}"
    );
    client.cancel().await.unwrap();
}

#[derive(Deserialize, JsonSchema)]
struct Steps {
    steps: u32,
}

/// A body that reports each step, on whatever thread it runs.
fn stepper() -> impl toolgraft::tool::BaseTool + Clone {
    Tool::builder()
        .name("steps")
        .description("Work in steps.")
        .read_only()
        .body(|input: Steps| async move {
            for step in 1..=input.steps {
                context::report_progress(
                    Progress::new(step.into())
                        .with_total(input.steps.into())
                        .with_message(format!("step {step}")),
                );
            }
            Ok(std::thread::current()
                .name()
                .unwrap_or("unnamed")
                .to_owned())
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn progress_from_a_pool_thread_reaches_the_client_in_order_before_the_reply() {
    let toolset = Toolset::new();
    toolset
        .bind((stepper().combo().with(Pool::new(1).unwrap()),))
        .unwrap();
    let client = connect(ToolsetServer::new(toolset)).await;
    let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(7));
    let mut params = request("steps_pool", json!({"steps": 5}));
    params.meta = Some(RequestMetaObject::with_progress_token(token));
    let answer = client.call_tool(params).await.unwrap();
    let thread = answer.content[0].as_text().unwrap().text.clone();
    assert_ne!(
        thread,
        std::thread::current().name().unwrap_or("unnamed"),
        "the body ran on a pool thread"
    );
    // Notifications before the reply are handled before it; a moment for the
    // client's handler to have run them all.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let progress = client.service().progress.lock().unwrap().clone();
    // Reported in a tight loop: folded into the newest (`PROGRESS_EVERY`), the
    // last of which goes before the reply.
    let seen: Vec<_> = progress.iter().map(|p| (p.progress, p.total)).collect();
    assert_eq!(seen.last(), Some(&(5.0, Some(5.0))), "{seen:?}");
    assert!(
        seen.windows(2).all(|pair| pair[0].0 < pair[1].0),
        "in order: {seen:?}"
    );
    // rmcp's client sends a token of its own making in place of ours: one for
    // the whole call.
    let token = &progress[0].progress_token;
    assert!(
        progress.iter().all(|p| &p.progress_token == token),
        "{progress:?}"
    );
    assert_eq!(progress.last().unwrap().message.as_deref(), Some("step 5"));

    client.cancel().await.unwrap();
}

/// A body that logs through the call context, from whatever thread it runs:
/// a debug message, then `burst` info messages in a tight loop, then an error.
fn logger() -> impl toolgraft::tool::BaseTool + Clone {
    Tool::builder()
        .name("chatty")
        .description("Log as it works.")
        .read_only()
        .body(|input: Steps| async move {
            let debug = context::log(LogMessage::new(LogLevel::Debug, "not asked for"));
            for step in 0..input.steps {
                context::log(LogMessage::new(LogLevel::Info, json!({"step": step})));
            }
            let error =
                context::log(LogMessage::new(LogLevel::Error, "done").with_logger("chatty"));
            Ok(format!("debug taken: {debug}, error taken: {error}"))
        })
        .build()
        .unwrap()
}

/// A body's `context::log` reaches the client as `notifications/message`, at
/// the level the request asks for and above, in order, before the reply; a
/// burst past `LOG_BACKLOG` loses its oldest, and the client is told how many.
#[tokio::test]
async fn a_bodys_log_reaches_the_client_at_its_level_in_order_and_bounded() {
    let toolset = Toolset::new();
    toolset
        .bind((logger().combo().with(Pool::new(1).unwrap()),))
        .unwrap();
    let client = connect(ToolsetServer::new(toolset)).await;
    let call = |steps: u32| {
        let mut params = request("chatty_pool", json!({"steps": steps}));
        let mut meta = RequestMetaObject::new();
        meta.set_log_level(LoggingLevel::Info);
        params.meta = Some(meta);
        params
    };

    let answer = client.call_tool(call(3)).await.unwrap();
    assert_eq!(
        answer.content[0].as_text().unwrap().text,
        "debug taken: false, error taken: true"
    );
    // Notifications before the reply are handled before it; a moment for the
    // client's handler to have run them all.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let logs = std::mem::take(&mut *client.service().logs.lock().unwrap());
    let seen: Vec<_> = logs
        .iter()
        .map(|log| (log.level, log.data.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (LoggingLevel::Info, json!({"step": 0})),
            (LoggingLevel::Info, json!({"step": 1})),
            (LoggingLevel::Info, json!({"step": 2})),
            (LoggingLevel::Error, json!("done")),
        ]
    );
    assert_eq!(logs[3].logger.as_deref(), Some("chatty"));

    // A burst: the body runs on its pool thread, faster than the client takes
    // messages; the newest are kept, and what went is counted.
    let burst = 10 * toolgraft::context::LOG_BACKLOG as u32;
    client.call_tool(call(burst)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let logs = client.service().logs.lock().unwrap().clone();
    let steps: Vec<u64> = logs
        .iter()
        .filter_map(|log| log.data.get("step")?.as_u64())
        .collect();
    let dropped: u64 = logs
        .iter()
        .filter_map(|log| log.data.get("dropped")?.as_u64())
        .sum();
    assert!(logs.len() < burst as usize, "bounded: {} sent", logs.len());
    assert_eq!(
        steps.len() as u64 + dropped,
        u64::from(burst),
        "each one sent or counted"
    );
    assert!(
        steps.windows(2).all(|pair| pair[0] < pair[1]),
        "in order: {steps:?}"
    );
    assert_eq!(
        steps.last(),
        Some(&u64::from(burst - 1)),
        "the newest is kept"
    );
    assert_eq!(logs.last().unwrap().data, json!("done"));
    client.cancel().await.unwrap();
}

/// Without a level in the request, a session's log is what its client set
/// with `logging/setLevel` (the server declares `logging`): nothing until it
/// sets one, so a call nobody listens to costs no log queue.
#[tokio::test]
#[allow(deprecated)] // logging, deprecated by SEP-2577 and still served.
async fn a_sessions_log_level_is_what_its_client_set() {
    let toolset = Toolset::new();
    toolset.bind((logger().combo(),)).unwrap();
    let client = connect(ToolsetServer::new(toolset)).await;
    let logging = client
        .peer_info()
        .and_then(|info| info.capabilities.logging.clone());
    assert!(logging.is_some(), "the server declares logging");
    let call = || request("chatty", json!({"steps": 2}));

    let answer = client.call_tool(call()).await.unwrap();
    assert_eq!(
        answer.content[0].as_text().unwrap().text,
        "debug taken: false, error taken: false",
        "no level set: nobody listens"
    );
    client
        .set_level(rmcp::model::SetLevelRequestParams::new(
            LoggingLevel::Warning,
        ))
        .await
        .unwrap();
    let answer = client.call_tool(call()).await.unwrap();
    assert_eq!(
        answer.content[0].as_text().unwrap().text,
        "debug taken: false, error taken: true"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let logs = client.service().logs.lock().unwrap().clone();
    let seen: Vec<_> = logs
        .iter()
        .map(|log| (log.level, log.data.clone()))
        .collect();
    assert_eq!(seen, [(LoggingLevel::Error, json!("done"))]);
    client.cancel().await.unwrap();
}

#[derive(Deserialize, JsonSchema)]
struct Say {
    text: String,
}

#[tokio::test]
async fn the_request_meta_crosses_to_a_worker_process_and_the_peer_does_not() {
    // What a backend to a worker process sends with its job: the context's wire.
    let wire = Tool::builder()
        .name("wire")
        .description("The context that would cross to a worker process.")
        .read_only()
        .body(|_: Steps| async move {
            let below = toolgraft::Name::new("wire")?;
            let wire = toolgraft::relocation::Departure::new("remote", &below)?.to_wire()?;
            let names: Vec<String> = wire.names().map(str::to_owned).collect();
            // On the worker, the same entries read the same.
            let meta = wire
                .arrive(async { context::get::<toolgraft_mcp::call::RequestMeta>() })
                .await;
            Ok(json!({"names": names, "trace": meta.and_then(|meta| meta.get("trace").cloned())}))
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((wire.combo(),)).unwrap();
    let client = connect(ToolsetServer::new(toolset)).await;
    let mut params = request("wire", json!({"steps": 1}));
    let mut meta = RequestMetaObject::default();
    meta.0.insert("trace".to_owned(), json!("t-42"));
    params.meta = Some(meta);
    let answer = client.call_tool(params).await.unwrap();
    let answer = answer.structured_content.unwrap_or_else(|| {
        serde_json::from_str(&answer.content[0].as_text().unwrap().text).unwrap()
    });
    assert_eq!(answer["trace"], "t-42", "{answer}");
    let names: Vec<&str> = answer["names"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(names.contains(&"toolgraft_mcp.request_meta"), "{names:?}");
    assert!(
        !names.contains(&"toolgraft_mcp.call"),
        "the peer stays behind: {names:?}"
    );
    assert!(
        !names.contains(&"toolgraft.asker"),
        "so does the way to ask the user: {names:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_body_logs_to_the_client_through_the_calls_peer() {
    let say = Tool::builder()
        .name("say")
        .description("Log the text to the client.")
        .read_only()
        .body(|input: Say| async move {
            let call = McpCall::current().ok_or("not an MCP call")?;
            let mut message =
                LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(input.text));
            message.logger = Some("say".into());
            call.peer().notify_logging_message(message).await?;
            Ok(format!("{:?}", call.id()))
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((say.combo().with(Timeout::new(Duration::from_secs(10))),))
        .unwrap();
    let client = connect(ToolsetServer::new(toolset.clone())).await;
    client
        .call_tool(request("say_timeout", json!({"text": "hello"})))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let logs = client.service().logs.lock().unwrap().clone();
    assert_eq!(logs.len(), 1);
    assert_eq!(logs[0].data, json!("hello"));
    client.cancel().await.unwrap();

    // The same body outside MCP: an empty context, the same API.
    let outside = toolset
        .call("say", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert!(outside.to_string().contains("not an MCP call"), "{outside}");
}

#[tokio::test]
async fn the_toolset_serves_beside_the_authors_handler_and_its_own_tools() {
    let notes = Notes::new();
    let toolset = Toolset::new();
    toolset.bind((stepper().combo(),)).unwrap();
    let server = ToolsetServer::new(toolset.clone()).with_handler(notes.clone());
    let client = connect(server).await;
    let info = client.peer_info().unwrap();
    assert!(info.capabilities.prompts.is_some());
    assert_eq!(
        info.capabilities.tools.as_ref().unwrap().list_changed,
        Some(true)
    );
    assert_eq!(
        info.instructions.as_deref(),
        Some("Notes of the author's own.")
    );

    let names: Vec<_> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert_eq!(names, ["steps", "search", "whoami"]);
    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "summarize");

    // The handler's own tool is called by the handler, the toolset's by the toolset.
    let found = client
        .call_tool(request("search", json!({"query": "tea"})))
        .await
        .unwrap();
    assert_eq!(found.content[0].as_text().unwrap().text, "1 note says tea");
    client
        .call_tool(request("steps", json!({"steps": 1})))
        .await
        .unwrap();

    // A change of the toolset reaches the client of the merged server.
    let more = Tool::builder()
        .name("more")
        .description("More.")
        .read_only()
        .body(|_: Steps| async { Ok(1) })
        .build()
        .unwrap();
    toolset.bind((more.combo(),)).unwrap();
    within("list_changed", client.service().list_changed.notified()).await;
    let listed = client.list_all_tools().await.unwrap();
    assert_eq!(listed[0].name, "more");
    client.cancel().await.unwrap();
}

#[derive(Deserialize, serde::Serialize, JsonSchema)]
struct Chart {}

#[tokio::test]
async fn content_blocks_pass_through_and_a_cached_image_is_still_an_image() {
    let drawn = Arc::new(AtomicUsize::new(0));
    let chart = Tool::builder()
        .name("chart")
        .description("Draw the chart.")
        .read_only()
        .body({
            let drawn = drawn.clone();
            move |_: Chart| {
                drawn.fetch_add(1, Ordering::SeqCst);
                async move {
                    Ok(McpContent::new(vec![
                        ContentBlock::text("Sales:"),
                        ContentBlock::image("iVBORw0KGgo=", "image/png"),
                    ]))
                }
            }
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((chart.combo().with(Cache::default()),))
        .unwrap();
    let client = connect(ToolsetServer::new(toolset)).await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().all(|tool| tool.output_schema.is_none()));
    for _ in 0..2 {
        let answer = client
            .call_tool(request("chart_cache", json!({})))
            .await
            .unwrap();
        assert_eq!(answer.content.len(), 2);
        let image = answer.content[1].as_image().expect("an image block");
        assert_eq!(image.mime_type, "image/png");
        assert!(answer.structured_content.is_none());
    }
    assert_eq!(drawn.load(Ordering::SeqCst), 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn clients_list_and_call_the_published_names_only() {
    let notes = Notes::new();
    let toolset = imported(&notes);
    let alias = toolgraft::toolset::Publish::only([("search", "search_cache_timeout")]).unwrap();
    toolset
        .edit()
        .publish("search", alias)
        .publish("whoami", toolgraft::toolset::Publish::Outermost)
        .commit()
        .unwrap();
    let client = connect(ToolsetServer::new(toolset.clone())).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|tool| tool.name.to_string()).collect();
    assert_eq!(names, ["search", "whoami_timeout"]);
    // `search` is the branch: its reserved param and the base's annotations.
    assert!(tools[0].input_schema["properties"].get("exp").is_some());
    assert_eq!(tools[0].title.as_deref(), Some("Search notes"));

    let found = client
        .call_tool(request("search", json!({"query": "tea"})))
        .await
        .unwrap();
    assert_eq!(found.content[0].as_text().unwrap().text, "1 note says tea");
    client
        .call_tool(request("search", json!({"query": "tea"})))
        .await
        .unwrap();
    assert_eq!(
        notes.searches.load(Ordering::SeqCst),
        1,
        "served by the cache"
    );

    // A hidden name is unknown to clients, and errors name what the client called.
    let hidden = client
        .call_tool(request("search_cache", json!({"query": "tea"})))
        .await
        .unwrap_err();
    assert!(hidden.to_string().contains("search_cache"), "{hidden}");
    let rmcp::ServiceError::McpError(bad) = client
        .call_tool(request("search", json!({"query": 3})))
        .await
        .unwrap_err()
    else {
        panic!()
    };
    assert_eq!(bad.data.as_ref().unwrap()["tool"], "search");

    // What is published changes live, and the client hears of it.
    toolset
        .edit()
        .publish("search", toolgraft::toolset::Publish::All)
        .commit()
        .unwrap();
    within("list_changed", client.service().list_changed.notified()).await;
    assert_eq!(client.list_all_tools().await.unwrap().len(), 4);
    client.cancel().await.unwrap();
}

/// rmcp tools that use their request: its progress token, its peer.
#[derive(Clone)]
struct Relayed;

#[tool_router]
impl Relayed {
    #[tool(description = "Report progress to the request's token.")]
    async fn report(&self, context: RequestContext<RoleServer>) -> Result<String, ErrorData> {
        let token = context
            .meta
            .get_progress_token()
            .ok_or_else(|| ErrorData::invalid_params("No progress token", None))?;
        for step in 1..=3 {
            let progress = rmcp::model::ProgressNotificationParam::new(token.clone(), step.into());
            let sent = context.peer.notify_progress(progress).await;
            sent.map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        }
        Ok(format!("reported to {}", json!(token)))
    }

    #[tool(description = "Ask the user.")]
    async fn ask(&self, peer: Peer<RoleServer>) -> Result<String, ErrorData> {
        let question = serde_json::from_value(json!({
            "mode": "form", "message": "Go on?",
            "requestedSchema": {"type": "object", "properties": {"go": {"type": "boolean"}}},
        }))
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        let answer = peer
            .create_elicitation(question)
            .await
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        Ok(format!("{:?}", answer.action))
    }
}

/// What a worker process gives an imported tool (the call's progress sink and
/// the request's `_meta`, no MCP request): its progress token and
/// `notify_progress` work, and asking the client fails citing the rule.
#[tokio::test]
async fn an_imported_tool_without_an_mcp_request_reports_progress_and_cannot_ask() {
    let tools = import::tools(Relayed::tool_router(), Relayed).unwrap();
    let toolset = Toolset::new();
    toolset.bind((tools[0].combo(), tools[1].combo())).unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = context::ProgressSink::new({
        let seen = seen.clone();
        move |progress: Progress| seen.lock().unwrap().push(progress.progress)
    });
    let meta = toolgraft_mcp::call::RequestMeta(
        json!({"progressToken": "p-1"})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let called = context::Context::current()
        .with(sink)
        .with(meta)
        .scope(toolset.call("report", json!({})))
        .await
        .unwrap();
    assert_eq!(called["content"][0]["text"], "reported to \"p-1\"");
    assert_eq!(*seen.lock().unwrap(), [1.0, 2.0, 3.0]);

    let refused = toolset.call("ask", json!({})).await.unwrap_err();
    assert_eq!(
        refused.rule(),
        Some(toolgraft::rulebook::Rule::CallerOutsideRelocation),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .contains("`elicitation/create` asks the MCP client"),
        "{refused}"
    );
}
