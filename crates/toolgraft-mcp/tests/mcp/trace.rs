//! The W3C trace context a client sends (SEP-414: `_meta`'s `traceparent` and
//! `tracestate`; over HTTP, the headers): the body reads the same trace, and a
//! malformed one is ignored, the call going on without it.

use rmcp::model::{CallToolRequestParams, CallToolResult, RequestMetaObject};
use serde_json::{Value, json};
use toolgraft::context::{self, TraceContext};
use toolgraft::prelude::*;
use toolgraft_mcp::ToolsetServer;

use crate::support::{self, within};

pub const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Empty {}

/// `traced`: says which trace its body runs in.
fn toolset() -> Toolset {
    let traced = Tool::builder()
        .name("traced")
        .description("Say which trace the body runs in.")
        .body(|_: Empty| async {
            let trace = context::get::<TraceContext>();
            Ok(json!({
                "trace_id": trace.as_ref().map(TraceContext::trace_id),
                "tracestate": trace.as_ref().map(|trace| trace.tracestate().to_owned()),
            }))
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((traced.combo(),)).unwrap();
    toolset
}

/// A `tools/call` of `traced` with `_meta` = `meta` (none when empty).
fn request(meta: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new("traced").with_arguments(Default::default());
    if let Value::Object(meta) = meta {
        params.meta = Some(RequestMetaObject::from(meta));
    }
    params
}

/// What the body saw, from a call that succeeded.
fn seen(result: &CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let text = &result.content[0].as_text().expect("a text block").text;
    serde_json::from_str(text).unwrap()
}

#[tokio::test]
async fn the_body_reads_the_trace_the_client_sent_in_meta() {
    let client = support::connect(ToolsetServer::new(toolset())).await;
    let call = |meta: Value| within("tools/call", client.call_tool(request(meta)));

    let traced = call(json!({"traceparent": VALID, "tracestate": "rojo=1,congo=2"}))
        .await
        .unwrap();
    assert_eq!(
        seen(&traced),
        json!({"trace_id": TRACE_ID, "tracestate": "rojo=1,congo=2"})
    );
    let untraced = call(Value::Null).await.unwrap();
    assert_eq!(
        seen(&untraced),
        json!({"trace_id": null, "tracestate": null})
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_malformed_trace_context_is_ignored_and_the_call_succeeds() {
    let client = support::connect(ToolsetServer::new(toolset())).await;
    let many: Vec<String> = (0..10_000).map(|i| format!("k{i}=v")).collect();
    for meta in [
        json!({"traceparent": VALID.to_uppercase()}),
        json!({"traceparent": format!("{VALID}-01")}),
        json!({"traceparent": format!("ff{}", &VALID[2..])}),
        json!({"traceparent": VALID.replace(TRACE_ID, &"0".repeat(32))}),
        json!({"traceparent": 1}),
        json!({"traceparent": {"nested": VALID}}),
        json!({"traceparent": "x".repeat(1 << 20), "tracestate": "a=1"}),
    ] {
        let result = within("tools/call", client.call_tool(request(meta.clone())))
            .await
            .unwrap();
        assert_eq!(
            seen(&result),
            json!({"trace_id": null, "tracestate": null}),
            "{:.80}",
            meta.to_string()
        );
    }
    // A bad tracestate beside a valid traceparent: the trace, and what of the
    // state is valid, within the limits.
    let bounded = within(
        "tools/call",
        client.call_tool(request(
            json!({"traceparent": VALID, "tracestate": many.join(",")}),
        )),
    )
    .await
    .unwrap();
    let state = seen(&bounded)["tracestate"].as_str().unwrap().to_owned();
    assert_eq!(state.split(',').count(), 32);
    client.cancel().await.unwrap();
}

#[cfg(feature = "http")]
mod http {
    use std::collections::HashMap;

    use reqwest::header::{HeaderName, HeaderValue};
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use toolgraft_mcp::http::{Guard, McpHttp};

    use super::*;

    /// An rmcp HTTP client whose every request carries `headers`.
    async fn client_with(
        url: String,
        headers: &[(&'static str, &str)],
    ) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
        let headers: HashMap<HeaderName, HeaderValue> = headers
            .iter()
            .map(|(name, value)| {
                (
                    HeaderName::from_static(name),
                    HeaderValue::from_str(value).unwrap(),
                )
            })
            .collect();
        let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
        within(
            "connecting",
            ().serve(StreamableHttpClientTransport::from_config(config)),
        )
        .await
        .expect("the client connects")
    }

    #[tokio::test]
    async fn over_http_the_traceparent_header_is_read_when_meta_has_none() {
        let mcp = McpHttp::new(ToolsetServer::new(toolset()), Guard::off());
        let server = within("serve", mcp.serve(([127, 0, 0, 1], 0)))
            .await
            .unwrap();

        let client = client_with(
            server.url(),
            &[("traceparent", VALID), ("tracestate", "rojo=1")],
        )
        .await;
        let from_headers = within("tools/call", client.call_tool(request(Value::Null)))
            .await
            .unwrap();
        assert_eq!(
            seen(&from_headers),
            json!({"trace_id": TRACE_ID, "tracestate": "rojo=1"})
        );
        // `_meta`'s is the MCP request's own: it wins over the HTTP request's.
        let other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let from_meta = within(
            "tools/call",
            client.call_tool(request(json!({"traceparent": other}))),
        )
        .await
        .unwrap();
        assert_eq!(
            seen(&from_meta),
            json!({"trace_id": "0af7651916cd43dd8448eb211c80319c", "tracestate": ""})
        );
        client.cancel().await.unwrap();

        // Hostile headers: ignored, the call goes on.
        for traceparent in [VALID.to_uppercase(), format!("{VALID}-x"), "x".repeat(4096)] {
            let client = client_with(
                server.url(),
                &[("traceparent", &traceparent), ("tracestate", "a=1")],
            )
            .await;
            let ignored = within("tools/call", client.call_tool(request(Value::Null)))
                .await
                .unwrap();
            assert_eq!(
                seen(&ignored),
                json!({"trace_id": null, "tracestate": null})
            );
            client.cancel().await.unwrap();
        }
        within("shutdown", server.shutdown()).await.unwrap();
    }

    /// What `traced` saw of a raw `tools/call` whose HTTP request carries
    /// `headers` (repeated names as separate fields, which rmcp's client cannot
    /// send), in a session of its own.
    async fn raw_call(url: &str, headers: &[(&str, &str)]) -> Value {
        let http = reqwest::Client::new();
        let post = |body: Value, session: Option<&str>, headers: &[(&str, &str)]| {
            let mut request = http
                .post(url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-11-25")
                .json(&body);
            if let Some(session) = session {
                request = request.header("mcp-session-id", session);
            }
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            request.send()
        };
        let initialize = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}
        });
        let opened = within("initialize", post(initialize, None, &[]))
            .await
            .unwrap();
        let session = opened
            .headers()
            .get("mcp-session-id")
            .map(|id| id.to_str().unwrap().to_owned());
        drop(opened);
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        within("initialized", post(initialized, session.as_deref(), &[]))
            .await
            .unwrap();
        let call = json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "traced", "arguments": {}}
        });
        let answer = within("tools/call", post(call, session.as_deref(), headers))
            .await
            .unwrap();
        let body = within("the answer", answer.text()).await.unwrap();
        // A JSON body, or the one event of a stream.
        let message = body
            .lines()
            .find_map(|line| {
                line.strip_prefix("data:")
                    .map(str::trim)
                    .filter(|data| !data.is_empty())
            })
            .unwrap_or(&body);
        let message: Value = serde_json::from_str(message).unwrap();
        let text = message["result"]["content"][0]["text"]
            .as_str()
            .expect("a result");
        serde_json::from_str(text).unwrap()
    }

    #[tokio::test]
    async fn repeated_headers_are_one_tracestate_and_two_parents_are_none() {
        let mcp = McpHttp::new(ToolsetServer::new(toolset()), Guard::off());
        let server = within("serve", mcp.serve(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let url = server.url();

        let joined = raw_call(
            &url,
            &[
                ("traceparent", VALID),
                ("tracestate", "a=1"),
                ("tracestate", "b=2"),
            ],
        )
        .await;
        assert_eq!(
            joined,
            json!({"trace_id": TRACE_ID, "tracestate": "a=1,b=2"})
        );
        let two_parents = raw_call(
            &url,
            &[
                ("traceparent", VALID),
                ("traceparent", VALID),
                ("tracestate", "a=1"),
            ],
        )
        .await;
        assert_eq!(two_parents, json!({"trace_id": null, "tracestate": null}));
        within("shutdown", server.shutdown()).await.unwrap();
    }
}
