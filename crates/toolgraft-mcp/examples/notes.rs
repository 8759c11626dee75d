//! An author's notes server, written with rmcp (three `#[tool]` methods, a
//! prompt, a resource), with toolgraft's `cache` and `timeout` on two of its
//! tools, published under their own names.
//!
//! Run: `cargo run -p toolgraft-mcp --features http --example notes -- --port 8940`
//! (port 0, the default, takes a free one); it prints the endpoint's URL.

use std::sync::{Arc, Mutex};

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, ListPromptsResult,
    ListResourcesResult, PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, RequestMetaObject,
    Resource, ResourceContents, Role, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;
use toolgraft::Toolset;
use toolgraft::ext::{Cache, Timeout};
use toolgraft_mcp::http::{Guard, McpHttp};
use toolgraft_mcp::{BadArguments, ToolsetServer, import};

#[derive(Clone, Default)]
struct Notes {
    notes: Arc<Mutex<Vec<String>>>,
}

#[derive(Deserialize, JsonSchema)]
struct Search {
    /// What to look for.
    query: String,
}

#[derive(Deserialize, JsonSchema)]
struct Add {
    /// The notes to add.
    texts: Vec<String>,
}

#[tool_router]
impl Notes {
    #[tool(description = "Search the notes.", annotations(read_only_hint = true))]
    async fn search(&self, Parameters(search): Parameters<Search>) -> String {
        let notes = self.notes.lock().unwrap();
        let found: Vec<&String> = notes.iter().filter(|n| n.contains(&search.query)).collect();
        format!("{} notes say {}: {found:?}", found.len(), search.query)
    }

    #[tool(description = "Add notes, reporting progress.")]
    async fn add(
        &self,
        Parameters(add): Parameters<Add>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> String {
        let total = add.texts.len();
        for (done, text) in add.texts.into_iter().enumerate() {
            self.notes.lock().unwrap().push(text);
            if let Some(token) = meta.get_progress_token() {
                let progress = ProgressNotificationParam::new(token, (done + 1) as f64)
                    .with_total(total as f64);
                let _ = peer.notify_progress(progress).await;
            }
        }
        format!("added {total} notes")
    }

    #[tool(description = "Count the notes.", annotations(read_only_hint = true))]
    async fn count(&self) -> String {
        self.notes.lock().unwrap().len().to_string()
    }
}

impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_resources()
            .build();
        ServerConfig::new(capabilities).with_instructions("Notes: search, add, count.")
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            "summarize",
            Some("Summarize the notes."),
            None,
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != "summarize" {
            return Err(ErrorData::invalid_params("no such prompt", None));
        }
        let notes = self.notes.lock().unwrap().join("\n");
        let message = PromptMessage::new_text(Role::User, format!("Summarize:\n{notes}"));
        Ok(GetPromptResult::new(vec![message]).into())
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![Resource::new(
            "notes://all",
            "all notes",
        )]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != "notes://all" {
            return Err(ErrorData::resource_not_found("no such resource", None));
        }
        let text = self.notes.lock().unwrap().join("\n");
        Ok(ReadResourceResult::new(vec![ResourceContents::text(text, request.uri)]).into())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let notes = Notes::default();
    let tools = import::tools(Notes::tool_router(), notes.clone())?;
    let toolset = Toolset::new();
    let timeout = || Timeout::new(Duration::from_secs(10));
    // Each combo in place of its tool: clients keep calling `search` and `add`,
    // served by `search_cache_timeout` and `add_timeout`.
    toolset.bind_in_place((
        tools["search"]
            .combo()
            .with(Cache::default())
            .with(timeout()),
        tools["add"].combo().with(timeout()),
        tools["count"].combo(),
    ))?;
    // `--bad-arguments-as-results`: bad arguments as `isError` results the model
    // reads (what rmcp's own tools answer), not `-32602` errors.
    let mut server = ToolsetServer::new(toolset);
    if std::env::args().any(|arg| arg == "--bad-arguments-as-results") {
        server = server.with_bad_arguments(BadArguments::AsToolResult);
    }
    let server = server.with_handler(notes);
    let port = std::env::args()
        .skip_while(|arg| arg != "--port")
        .nth(1)
        .unwrap_or_default();
    let serving = McpHttp::new(server, Guard::off())
        .serve(([127, 0, 0, 1], port.parse().unwrap_or(0)))
        .await?;
    eprintln!("notes: MCP over HTTP at {}", serving.url());
    serving.wait().await?;
    Ok(())
}
