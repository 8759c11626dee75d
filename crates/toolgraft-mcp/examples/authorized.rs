//! A team's notes server that is an OAuth 2.1 resource server: who calls is a
//! checked access token, and each caller is shown exactly the tools it may call.
//!
//! - `whoami`: any caller with a valid token;
//! - `list_notes`: scope `tools:read`, through `[cache, authorize]` (the cache
//!   inside the check: `[authorize, cache]` would not compile), published as
//!   `list_notes`;
//! - `write_note`: scope `notes:write`, with a step-up: a caller short of it sees
//!   the tool, and a call answers `403` with an `insufficient_scope` challenge, so
//!   its client can ask for the scope;
//! - `acme_report`: only callers whose token says `tenant: acme` (hidden from
//!   others, who are answered as for a tool that does not exist);
//! - `admin_reset`: scope `admin` (hidden from everyone else).
//!
//! Run it against an authorization server (its issuer URL in
//! `TOOLGRAFT_OIDC_ISSUER`, e.g. `scripts/conformance.d/oidc.mjs`, which
//! `scripts/conformance` starts):
//! `TOOLGRAFT_OIDC_ISSUER=http://127.0.0.1:9000 cargo run -p toolgraft-mcp --features http,oauth --example authorized -- --port 8950`
//! (port 0, the default, takes a free one). It prints the endpoint's URL; the
//! protected resource metadata is at `/.well-known/oauth-protected-resource/mcp`.
//!
//! Opaque access tokens (not JWTs) are checked by token introspection (RFC 7662)
//! when `TOOLGRAFT_OIDC_CLIENT_ID` and `TOOLGRAFT_OIDC_CLIENT_SECRET` name the
//! client this server introspects as: the endpoint is the one the issuer's
//! RFC 8414 metadata names (`introspection_endpoint`). Without them, an opaque
//! token is refused (`401 invalid_token`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgraft::access::{Authenticated, Claim, Scopes};
use toolgraft::context::{self, Identity};
use toolgraft::ext::{Authorize, Cache};
use toolgraft::prelude::*;
use toolgraft::toolset::Publish;
use toolgraft_mcp::ToolsetServer;
use toolgraft_mcp::http::{Guard, McpHttp, ResourceServer, no_delay};

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Nothing {}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Note {
    /// The note.
    text: String,
}

/// The caller's tenant, as its token says.
fn tenant() -> String {
    context::get::<Identity>()
        .and_then(|who| who.claim("tenant")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "nobody".to_owned())
}

fn toolset() -> Result<Toolset, Box<dyn std::error::Error>> {
    let notes: Arc<Mutex<HashMap<String, Vec<String>>>> = Arc::default();
    let whoami = Tool::builder()
        .name("whoami")
        .description("Say who the caller is.")
        .read_only()
        .body(|_: Nothing| async move {
            let subject = context::get::<Identity>().map(|who| who.subject().to_owned());
            Ok(format!("{} of {}", subject.unwrap_or_default(), tenant()))
        })
        .build()?;
    let kept = notes.clone();
    let list_notes = Tool::builder()
        .name("list_notes")
        .description("List the notes of the caller's tenant.")
        .read_only()
        .body(move |_: Nothing| {
            let notes = kept
                .lock()
                .unwrap()
                .get(&tenant())
                .cloned()
                .unwrap_or_default();
            async move { Ok(format!("{notes:?}")) }
        })
        .build()?;
    let write_note = Tool::builder()
        .name("write_note")
        .description("Write a note for the caller's tenant.")
        .body(move |note: Note| {
            let tenant = tenant();
            notes
                .lock()
                .unwrap()
                .entry(tenant.clone())
                .or_default()
                .push(note.text);
            async move { Ok(format!("noted for {tenant}")) }
        })
        .build()?;
    let acme_report = Tool::builder()
        .name("acme_report")
        .description("Acme's report.")
        .read_only()
        .body(|_: Nothing| async move { Ok("acme: all well".to_owned()) })
        .build()?;
    let admin_reset = Tool::builder()
        .name("admin_reset")
        .description("Forget every note.")
        .body(|_: Nothing| async move { Ok("reset".to_owned()) })
        .build()?;

    let toolset = Toolset::new();
    let readers = Authorize::new(Scopes::all(["tools:read"]));
    toolset.bind((
        whoami.combo(),
        list_notes.combo().with(Cache::default()).with(readers),
        write_note.combo(),
        acme_report.combo(),
        admin_reset.combo(),
    ))?;
    toolset
        .edit()
        .publish(
            "list_notes",
            Publish::only([("list_notes", "list_notes_cache_authorize")])?,
        )
        .authorize("whoami", Authenticated)
        .authorize("write_note", Scopes::all(["notes:write"]).with_step_up())
        .authorize("acme_report", Claim::is("tenant", "acme"))
        .authorize("admin_reset", Scopes::all(["admin"]))
        .commit()?;
    Ok(toolset)
}

/// The introspection endpoint the issuer's RFC 8414 metadata names.
async fn introspection_endpoint(issuer: &str) -> Result<String, Box<dyn std::error::Error>> {
    let metadata = format!(
        "{}/.well-known/oauth-authorization-server",
        issuer.trim_end_matches('/')
    );
    let metadata: serde_json::Value = reqwest::get(&metadata)
        .await?
        .error_for_status()?
        .json()
        .await?;
    let endpoint = metadata["introspection_endpoint"]
        .as_str()
        .ok_or("the issuer's metadata names no introspection_endpoint")?;
    Ok(endpoint.to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut port = 0u16;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => port = args.next().ok_or("--port needs a number")?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let issuer = std::env::var("TOOLGRAFT_OIDC_ISSUER")
        .map_err(|_| "set TOOLGRAFT_OIDC_ISSUER to the authorization server's issuer URL")?;
    // The resource (the tokens' audience) is this endpoint's URL, so the port is
    // known before the guard is made.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let mut resource = ResourceServer::new(url.as_str(), issuer.as_str())?
        .with_scopes_supported(["tools:read"])?
        .with_kept_claims(["tenant"]);
    if let (Ok(client_id), Ok(client_secret)) = (
        std::env::var("TOOLGRAFT_OIDC_CLIENT_ID"),
        std::env::var("TOOLGRAFT_OIDC_CLIENT_SECRET"),
    ) {
        let endpoint = introspection_endpoint(&issuer).await?;
        eprintln!("authorized: opaque tokens introspected at {endpoint} as {client_id}");
        resource = resource.with_introspection(endpoint, client_id, client_secret)?;
    }
    let router = McpHttp::new(ToolsetServer::new(toolset()?), Guard::oauth(resource)).router();
    eprintln!("authorized: MCP over HTTP at {url}");
    axum::serve(no_delay(listener), router).await?;
    Ok(())
}
