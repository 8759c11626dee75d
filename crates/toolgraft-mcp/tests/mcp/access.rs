//! Access policies over MCP: who is shown which names, a name a caller may not
//! call answered as one that does not exist, a step-up as `403` with its
//! challenge, the identity in every call (a chain's next step, a pool thread),
//! and `list_changed` told only to the sessions whose listing changed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::model::ErrorCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::access::{Claim, Scopes};
use toolgraft::context::{self, Identity};
use toolgraft::prelude::*;
use toolgraft_mcp::{INSUFFICIENT_SCOPE, ToolsetServer};

use crate::support::{connect, request, within};

#[derive(Deserialize, Serialize, JsonSchema)]
struct Note {
    text: String,
}

/// A tool that counts its calls and says who called it, and from which thread.
fn noting(name: &str, calls: &Arc<AtomicUsize>) -> impl toolgraft::tool::BaseTool {
    let calls = calls.clone();
    Tool::builder()
        .name(name)
        .description("Keep a note.")
        .body(move |note: Note| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let who = context::get::<Identity>().map(|who| who.subject().to_owned());
                let thread = std::thread::current().name().unwrap_or("").to_owned();
                Ok(json!({"text": note.text, "who": who, "thread": thread}))
            }
        })
        .build()
        .unwrap()
}

/// `read_notes` (anyone), `write_notes` (team alpha only: hidden from others),
/// `admin_reset` (scope `admin`, with a step-up: listed to all), each counting
/// its calls.
fn guarded() -> (Toolset, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let toolset = Toolset::new();
    toolset
        .bind((
            noting("read_notes", &calls).combo(),
            noting("write_notes", &calls).combo(),
            noting("admin_reset", &calls).combo(),
        ))
        .unwrap();
    toolset
        .edit()
        .authorize("write_notes", Claim::is("team", "alpha"))
        .authorize("admin_reset", Scopes::all(["admin"]).with_step_up())
        .commit()
        .unwrap();
    (toolset, calls)
}

/// Over stdio (or any transport but HTTP) a call has no identity: the names a
/// policy keeps for identified callers are neither listed nor callable, and a
/// step-up names its scopes in a JSON-RPC error.
#[tokio::test]
async fn without_http_a_caller_has_no_identity() {
    let (toolset, calls) = guarded();
    let client = connect(ToolsetServer::new(toolset)).await;
    let names: Vec<String> = within("tools/list", client.list_all_tools())
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.into())
        .collect();
    assert_eq!(names, ["admin_reset", "read_notes"]);

    let hidden = client
        .call_tool(request("write_notes", json!({"text": "x"})))
        .await
        .unwrap_err();
    let unknown = client
        .call_tool(request("wrote_notes", json!({"text": "x"})))
        .await
        .unwrap_err();
    assert_eq!(
        hidden.to_string().replace("write_notes", "NAME"),
        unknown.to_string().replace("wrote_notes", "NAME")
    );
    let step_up = client
        .call_tool(request("admin_reset", json!({"text": "x"})))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(step_up) = step_up else {
        panic!("a protocol error: {step_up}");
    };
    assert_eq!(step_up.code, ErrorCode(INSUFFICIENT_SCOPE));
    assert_eq!(step_up.data.unwrap()["scopes"], json!(["admin"]));
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no body ran");
    client.cancel().await.unwrap();
}

#[cfg(feature = "http")]
mod http {
    use std::collections::HashMap;
    use std::time::Duration;

    use rmcp::model::CallToolRequestParams;
    use rmcp::service::{NotificationContext, RunningService};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::{ClientHandler, RoleClient, ServiceExt};
    use tokio::sync::Notify;
    use toolgraft::ext::{Chain, Pool};
    use toolgraft_mcp::http::{Guard, McpHttp, Serving};

    use serde_json::Value;

    use super::*;
    use crate::support::args;

    /// alice: team alpha, scopes `admin` and `notes`; bob: team beta, scope
    /// `notes`; as a test header says (an authenticating proxy's, say).
    fn identity_of(request: &axum::http::request::Parts) -> Option<Identity> {
        match request.headers.get("x-user")?.to_str().ok()? {
            "alice" => Some(
                Identity::new("alice")
                    .with_scopes(["admin", "notes"])
                    .with_claim("team", "alpha"),
            ),
            "bob" => Some(
                Identity::new("bob")
                    .with_scopes(["notes"])
                    .with_claim("team", "beta"),
            ),
            _ => None,
        }
    }

    async fn serve(toolset: &Toolset) -> Serving {
        let mcp = McpHttp::new(ToolsetServer::new(toolset.clone()), Guard::off())
            .with_identity(identity_of);
        within("serve", mcp.serve(([127, 0, 0, 1], 0)))
            .await
            .expect("serves on a loopback port")
    }

    #[derive(Clone, Default)]
    struct Client {
        list_changed: Arc<Notify>,
        notifications: Arc<AtomicUsize>,
    }

    impl ClientHandler for Client {
        async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
            self.notifications.fetch_add(1, Ordering::SeqCst);
            self.list_changed.notify_one();
        }
    }

    type Connection = RunningService<RoleClient, Client>;

    /// An rmcp client (a session of protocol 2025-11-25) sending `x-user: user`.
    async fn connect_as(url: &str, user: &str) -> Connection {
        let headers = HashMap::from([("x-user".parse().unwrap(), user.parse().unwrap())]);
        let config =
            StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(headers);
        let transport = StreamableHttpClientTransport::from_config(config);
        within("connecting", Client::default().serve(transport))
            .await
            .expect("the client connects")
    }

    async fn names(client: &Connection) -> Vec<String> {
        within("tools/list", client.list_all_tools())
            .await
            .expect("tools/list")
            .into_iter()
            .map(|tool| tool.name.into())
            .collect()
    }

    async fn call(client: &Connection, name: &str, arguments: Value) -> Value {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args(arguments));
        let result = within(name, client.call_tool(params)).await.unwrap();
        let text = &result.content[0].as_text().expect("a text block").text;
        serde_json::from_str(text).expect("the result's JSON")
    }

    /// A `tools/call` of protocol 2026-07-28 (no session) as `user`: its status,
    /// `WWW-Authenticate` and body.
    async fn post_call(url: &str, user: &str, name: &str) -> (u16, Option<String>, String) {
        let body = json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {
                "name": name, "arguments": {"text": "hi"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}
                }
            }
        });
        let response = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .header("x-user", user)
            .json(&body)
            .send();
        let response = within("tools/call", response).await.unwrap();
        let status = response.status().as_u16();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|value| value.to_str().unwrap().to_owned());
        (status, challenge, response.text().await.unwrap())
    }

    #[tokio::test]
    async fn each_caller_is_shown_the_names_it_may_call() {
        let (toolset, _) = guarded();
        let server = serve(&toolset).await;
        let alice = connect_as(&server.url(), "alice").await;
        let bob = connect_as(&server.url(), "bob").await;
        assert_eq!(
            names(&alice).await,
            ["admin_reset", "read_notes", "write_notes"]
        );
        // `admin_reset` is bob's to ask for (a step-up), `write_notes` not at all.
        assert_eq!(names(&bob).await, ["admin_reset", "read_notes"]);
        let wrote = call(&alice, "write_notes", json!({"text": "hi"})).await;
        assert_eq!(wrote["who"], "alice");
        alice.cancel().await.unwrap();
        bob.cancel().await.unwrap();
        within("shutdown", server.shutdown()).await.unwrap();
    }

    /// What bob gets for alice's tool is what he gets for a name that does not
    /// exist, byte for byte but for the name: in a session and without one.
    #[tokio::test]
    async fn a_name_the_caller_may_not_call_answers_as_one_that_does_not_exist() {
        let (toolset, calls) = guarded();
        let server = serve(&toolset).await;
        let url = server.url();
        let (status, _, hidden) = post_call(&url, "bob", "write_notes").await;
        let (unknown_status, _, unknown) = post_call(&url, "bob", "wrote_notes").await;
        assert_eq!(status, unknown_status);
        assert_eq!(
            hidden.replace("write_notes", "NAME"),
            unknown.replace("wrote_notes", "NAME")
        );
        assert!(hidden.contains("-32602"), "{hidden}");

        let bob = connect_as(&url, "bob").await;
        let in_session = |name: &'static str| {
            let params =
                CallToolRequestParams::new(name).with_arguments(args(json!({"text": "x"})));
            bob.call_tool(params)
        };
        let hidden = within("hidden", in_session("write_notes"))
            .await
            .unwrap_err();
        let unknown = within("unknown", in_session("wrote_notes"))
            .await
            .unwrap_err();
        assert_eq!(
            hidden.to_string().replace("write_notes", "NAME"),
            unknown.to_string().replace("wrote_notes", "NAME")
        );
        assert_eq!(calls.load(Ordering::SeqCst), 0, "no body ran");
        let (status, _, answer) = post_call(&url, "alice", "write_notes").await;
        assert_eq!(status, 200);
        assert!(answer.contains(r#""who":"alice""#), "{answer}");
        bob.cancel().await.unwrap();
        within("shutdown", server.shutdown()).await.unwrap();
    }

    /// A step-up: `403` with `WWW-Authenticate: Bearer error="insufficient_scope"`
    /// naming the scopes a new token needs (those held, and those missing),
    /// in a session and without one; the holder's call runs.
    #[tokio::test]
    async fn a_step_up_answers_403_with_the_scopes_to_ask_for() {
        let (toolset, calls) = guarded();
        let server = serve(&toolset).await;
        let url = server.url();
        let (status, challenge, body) = post_call(&url, "bob", "admin_reset").await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(
            challenge.as_deref(),
            Some(r#"Bearer error="insufficient_scope", scope="admin notes""#)
        );
        let reply: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(reply["error"]["code"], INSUFFICIENT_SCOPE, "{reply}");
        assert_eq!(reply["error"]["data"]["scopes"], json!(["admin"]));

        // In a session (protocol 2025-11-25): the same answer.
        let opened = reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("x-user", "bob")
            .json(&json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"}
                }
            }))
            .send();
        let opened = within("initialize", opened).await.unwrap();
        let session = opened.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let refused = reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", &session)
            .header("x-user", "bob")
            .json(&json!({
                "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "admin_reset", "arguments": {"text": "x"}}
            }))
            .send();
        let refused = within("tools/call", refused).await.unwrap();
        assert_eq!(refused.status(), 403);
        assert_eq!(
            refused.headers()["www-authenticate"],
            r#"Bearer error="insufficient_scope", scope="admin notes""#
        );
        assert_eq!(calls.load(Ordering::SeqCst), 0, "no body ran");

        let (status, challenge, body) = post_call(&url, "alice", "admin_reset").await;
        assert_eq!((status, challenge), (200, None), "{body}");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Other calls of bob's are answered as ever.
        assert_eq!(post_call(&url, "bob", "read_notes").await.0, 200);
        within("shutdown", server.shutdown()).await.unwrap();
    }

    /// A chain runs its next tool as the caller: bob's chain into alice's tool
    /// stops as a chain into a name that does not exist does (no confused
    /// deputy), alice's goes on.
    #[tokio::test]
    async fn a_chain_cannot_reach_a_tool_its_caller_may_not_call() {
        let (toolset, calls) = guarded();
        let first = Tool::builder()
            .name("draft")
            .description("Draft a note.")
            .body(|note: Note| async move { Ok(json!({"text": note.text})) })
            .build()
            .unwrap();
        toolset
            .bind((first.combo().with(Chain::new(&toolset)),))
            .unwrap();
        let server = serve(&toolset).await;
        let (alice, bob) = (
            connect_as(&server.url(), "alice").await,
            connect_as(&server.url(), "bob").await,
        );
        let chain = |next: &str| json!({"text": "hi", "next_tool": next});
        let chained = |next: &str| {
            CallToolRequestParams::new("draft_chain").with_arguments(args(chain(next)))
        };
        let refused = within("bob", bob.call_tool(chained("write_notes"))).await;
        let unknown = within("bob", bob.call_tool(chained("wrote_notes"))).await;
        let text = |outcome: Result<_, rmcp::ServiceError>| match outcome {
            Ok(result) => serde_json::to_string(&result).unwrap(),
            Err(error) => error.to_string(),
        };
        let (refused, unknown) = (text(refused), text(unknown));
        assert_eq!(
            refused.replace("write_notes", "NAME"),
            unknown.replace("wrote_notes", "NAME")
        );
        assert_eq!(calls.load(Ordering::SeqCst), 0, "bob's chain ran nothing");
        let wrote = call(&alice, "draft_chain", chain("write_notes")).await;
        assert_eq!(wrote["who"], "alice");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        alice.cancel().await.unwrap();
        bob.cancel().await.unwrap();
        within("shutdown", server.shutdown()).await.unwrap();
    }

    /// A body relocated to a pool thread reads the caller's identity there, and
    /// the caller's policies decide the relocated name as any other.
    #[tokio::test]
    async fn a_pool_thread_sees_the_identity() {
        let calls = Arc::new(AtomicUsize::new(0));
        let toolset = Toolset::new();
        toolset
            .bind((noting("whoami", &calls).combo().with(Pool::new(1).unwrap()),))
            .unwrap();
        toolset
            .edit()
            .authorize("whoami_pool", Claim::is("team", "alpha"))
            .commit()
            .unwrap();
        let server = serve(&toolset).await;
        let alice = connect_as(&server.url(), "alice").await;
        let answer = call(&alice, "whoami_pool", json!({"text": "?"})).await;
        assert_eq!(answer["who"], "alice");
        assert_eq!(answer["thread"], "toolgraft-pool");
        let bob = connect_as(&server.url(), "bob").await;
        assert_eq!(names(&bob).await, ["whoami"]);
        alice.cancel().await.unwrap();
        bob.cancel().await.unwrap();
        within("shutdown", server.shutdown()).await.unwrap();
    }

    /// A change that changes what bob is shown is told to bob only; one that
    /// changes what both are shown, to both.
    #[tokio::test]
    async fn list_changed_is_told_to_the_sessions_whose_listing_changed() {
        let (toolset, calls) = guarded();
        let server = serve(&toolset).await;
        let (alice, bob) = (
            connect_as(&server.url(), "alice").await,
            connect_as(&server.url(), "bob").await,
        );
        assert_eq!(names(&bob).await, ["admin_reset", "read_notes"]);
        assert_eq!(names(&alice).await.len(), 3);

        // `read_notes` for team alpha only: bob loses it, alice sees the same.
        toolset
            .edit()
            .authorize("read_notes", Claim::is("team", "alpha"))
            .commit()
            .unwrap();
        within("bob told", bob.service().list_changed.notified()).await;
        assert_eq!(names(&bob).await, ["admin_reset"]);
        // Time for a notification alice should not get to arrive, were it sent.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(alice.service().notifications.load(Ordering::SeqCst), 0);

        toolset
            .bind((noting("search_notes", &calls).combo(),))
            .unwrap();
        for client in [&alice, &bob] {
            within("both told", client.service().list_changed.notified()).await;
        }
        assert_eq!(alice.service().notifications.load(Ordering::SeqCst), 1);
        assert_eq!(bob.service().notifications.load(Ordering::SeqCst), 2);
        assert_eq!(names(&bob).await, ["admin_reset", "search_notes"]);
        alice.cancel().await.unwrap();
        bob.cancel().await.unwrap();
        within("shutdown", server.shutdown()).await.unwrap();
    }

    /// Audiences: team alpha is published `search` and its pool branch, everyone
    /// else `search` with the pool branch in its place. Each lists and calls its
    /// own; a name published to the other audience answers as an unknown one;
    /// taking the audience away is told to alpha's session only.
    #[tokio::test]
    async fn each_audience_lists_and_calls_its_own_publication() {
        use toolgraft::toolset::Publish;
        let calls = Arc::new(AtomicUsize::new(0));
        let toolset = Toolset::new();
        toolset
            .bind((noting("search", &calls).combo().with(Pool::new(1).unwrap()),))
            .unwrap();
        toolset
            .edit()
            .publish("search", Publish::InPlace)
            .audience("alpha", Claim::is("team", "alpha"))
            .publish_to("alpha", "search", Publish::All)
            .commit()
            .unwrap();
        let server = serve(&toolset).await;
        let (alice, bob) = (
            connect_as(&server.url(), "alice").await,
            connect_as(&server.url(), "bob").await,
        );
        assert_eq!(names(&alice).await, ["search", "search_pool"]);
        assert_eq!(names(&bob).await, ["search"]);
        let on = |answer: Value| answer["thread"].as_str().unwrap().to_owned();
        let alices = call(&alice, "search", json!({"text": "tea"})).await;
        assert_ne!(on(alices), "toolgraft-pool", "alpha's `search` is the base");
        let bobs = call(&bob, "search", json!({"text": "tea"})).await;
        assert_eq!(on(bobs), "toolgraft-pool", "everyone's is the pool branch");
        assert_eq!(
            on(call(&alice, "search_pool", json!({"text": "tea"})).await),
            "toolgraft-pool"
        );

        let url = server.url();
        let (status, _, hidden) = post_call(&url, "bob", "search_pool").await;
        let (unknown_status, _, unknown) = post_call(&url, "bob", "search_poll").await;
        assert_eq!(status, unknown_status);
        assert_eq!(
            hidden.replace("search_pool", "NAME"),
            unknown.replace("search_poll", "NAME")
        );
        assert_eq!(
            calls.load(Ordering::SeqCst),
            3,
            "bob's hidden call ran nothing"
        );

        toolset.edit().remove_audience("alpha").commit().unwrap();
        within("alice told", alice.service().list_changed.notified()).await;
        assert_eq!(names(&alice).await, ["search"]);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(bob.service().notifications.load(Ordering::SeqCst), 0);
        let now = call(&alice, "search", json!({"text": "tea"})).await;
        assert_eq!(on(now), "toolgraft-pool");
        alice.cancel().await.unwrap();
        bob.cancel().await.unwrap();
        within("shutdown", server.shutdown()).await.unwrap();
    }

    /// `UnknownArguments::Refuse` checks a call against the schema its caller
    /// was listed: team alpha's `search` is the cache branch, which takes
    /// `exp`, where everyone's is the base, which does not.
    #[tokio::test]
    async fn unknown_arguments_are_those_of_the_callers_own_publication() {
        use toolgraft::ext::Cache;
        use toolgraft::toolset::Publish;
        let calls = Arc::new(AtomicUsize::new(0));
        let toolset = Toolset::new();
        let counted = calls.clone();
        let search = Tool::builder()
            .name("search")
            .description("Search.")
            .read_only()
            .body(move |note: Note| {
                counted.fetch_add(1, Ordering::SeqCst);
                async move { Ok(json!({"text": note.text})) }
            })
            .build()
            .unwrap();
        toolset
            .bind((search.combo().with(Cache::default()),))
            .unwrap();
        toolset
            .edit()
            .publish("search", Publish::only([("search", "search")]).unwrap())
            .audience("alpha", Claim::is("team", "alpha"))
            .publish_to(
                "alpha",
                "search",
                Publish::only([("search", "search_cache")]).unwrap(),
            )
            .commit()
            .unwrap();
        let server = ToolsetServer::new(toolset.clone())
            .with_unknown_arguments(toolgraft_mcp::UnknownArguments::Refuse);
        let mcp = McpHttp::new(server, Guard::off()).with_identity(identity_of);
        let server = within("serve", mcp.serve(([127, 0, 0, 1], 0)))
            .await
            .expect("serves on a loopback port");
        let alice = connect_as(&server.url(), "alice").await;
        let listed = within("tools/list", alice.list_all_tools()).await.unwrap();
        assert!(
            listed[0].input_schema["properties"].get("exp").is_some(),
            "alpha is listed the cache branch's schema"
        );
        let params = CallToolRequestParams::new("search")
            .with_arguments(args(json!({"text": "tea", "exp": 5})));
        let result = within("search", alice.call_tool(params)).await.unwrap();
        let text = &result.content[0].as_text().expect("a text block").text;
        assert_ne!(result.is_error, Some(true), "{text}");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        alice.cancel().await.unwrap();
        within("shutdown", server.shutdown()).await.unwrap();
    }
}
