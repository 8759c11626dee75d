//! rmcp's `counter` example server, adopted: the same tools, prompts and
//! resources (`counter.rs` is rmcp's, but for the three lines marked
//! `toolgraft:`), with layers on five of its tools, served over Streamable HTTP
//! behind a bearer token, or over stdio, and `long_task` run on a worker process
//! as written (its progress goes through its own `Peer`).
//!
//! - `get_value`: `retry`; `increment`: a `rate_limit` of 2 calls a second per
//!   caller; `decrement`: `approve` (the client's user is asked first); these keep
//!   rmcp's session semantics: each session has its own count.
//! - `sum`: `cache` and `timeout`; `long_task`: `remote`, on a worker process.
//! - Every tool keeps its name (each combo is put in place of its tool); the
//!   others (`say_hello`, `echo`, `get_session_id`) are the handler's, as in rmcp.
//!
//! Run a worker, then the server, on one SQLite file (no server needed):
//!
//! ```text
//! cargo run -p toolgraft-jobs --features sqlite --example counter -- worker
//! cargo run -p toolgraft-jobs --features sqlite --example counter -- http --port 8000 --token secret
//! ```
//!
//! `--jobs URL` names the job engine (`sqlite://path` or `redis://host`) for
//! both; a caller is told apart by its `X-Caller` header (behind the token).

mod counter;

use std::time::Duration;

use counter::Counter;
use rmcp::ServiceExt;
use toolgraft::Toolset;
use toolgraft::context::Principal;
use toolgraft::ext::{Approve, Cache, RateLimit, Retry, Timeout, approve::SealKey};
use toolgraft_jobs::{Remote, Worker};
use toolgraft_mcp::http::{Guard, McpHttp};
use toolgraft_mcp::{ToolsetServer, UnknownArguments, import};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The one binding code of the server and its workers.
fn toolset(remote: &Remote) -> Result<Toolset, Error> {
    // The count is the session's: these run on each session's `Counter`.
    let session = import::per_session(Counter::tool_router())?;
    // These keep no state: one instance for every call, on any process.
    let shared = import::tools(Counter::tool_router(), Counter::new())?;
    let approve = Approve::new(SealKey::new(seal_key())?);
    let toolset = Toolset::new();
    toolset.bind_in_place((
        session["get_value"].combo().with(Retry::attempts(3)),
        session["increment"]
            .combo()
            .with(RateLimit::per_second(2).with_per_principal()),
        session["decrement"].combo().with(approve),
        shared["sum"]
            .combo()
            .with(Cache::default())
            .with(Timeout::new(Duration::from_secs(5))),
        shared["long_task"].combo().with(remote.clone()),
    ))?;
    Ok(toolset)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let remote =
        Remote::new(option("--jobs").unwrap_or_else(default_jobs))?.with_queue("counter")?;
    let toolset = toolset(&remote)?;
    let mut template = ToolsetServer::new(toolset.clone());
    // `--refuse-unknown-arguments`: a property a tool's schema does not name is
    // refused (each schema then says so), where rmcp takes it.
    if std::env::args().any(|arg| arg == "--refuse-unknown-arguments") {
        template = template.with_unknown_arguments(UnknownArguments::Refuse);
    }
    match std::env::args().nth(1).as_deref() {
        Some("worker") => Worker::new(toolset, &remote).run().await?,
        Some("stdio") => {
            let serving = template
                .with_handler(Counter::new())
                .serve(rmcp::transport::stdio())
                .await?;
            serving.waiting().await?;
        }
        Some("http") => {
            let token = option("--token").ok_or("--token is required")?;
            let port: u16 = option("--port").unwrap_or_default().parse().unwrap_or(0);
            // One `Counter` per session, as rmcp's `StreamableHttpService` makes one.
            let serving = McpHttp::for_handler(
                move || template.with_handler(Counter::new()),
                Guard::bearer(token)?,
            )
            .with_principal(|parts| {
                let caller = parts.headers.get("x-caller")?.to_str().ok()?;
                Some(Principal::new(caller))
            })
            .serve(([127, 0, 0, 1], port))
            .await?;
            eprintln!("counter: MCP over HTTP at {}", serving.url());
            serving.wait().await?;
        }
        _ => return Err("say `worker`, `stdio` or `http --port P --token T`".into()),
    }
    Ok(())
}

/// The value after `name` on the command line.
fn option(name: &str) -> Option<String> {
    std::env::args().skip_while(|arg| arg != name).nth(1)
}

fn default_jobs() -> String {
    let file = std::env::temp_dir().join("toolgraft-counter.db");
    format!("sqlite://{}", file.display())
}

/// The key approvals are sealed with: `TOOLGRAFT_SEAL_KEY`, else a fixed one for
/// the example (a real server reads a secret).
fn seal_key() -> Vec<u8> {
    std::env::var("TOOLGRAFT_SEAL_KEY")
        .unwrap_or_else(|_| "counter example seal key, 32 bytes!".to_owned())
        .into_bytes()
}
