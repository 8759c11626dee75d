//! The MCP endpoint as one tower service: rmcp's Streamable HTTP service behind
//! one `Arc`, its answers shaped as clients read them best.
//!
//! rmcp's service clones itself, its whole configuration included, for every
//! request, and a middleware in front of it (`axum::middleware::from_fn`) clones
//! the route it wraps and boxes a second future: here a request costs one `Arc`
//! and one boxed future.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use toolgraft::context::Principal;

use super::sessions::{DirectSessions, OPENING, Opening};
use super::whole;
/// Who a request is from, as the application says (see
/// [`McpHttp::with_principal`](super::McpHttp::with_principal)).
pub(crate) type Identify = dyn Fn(&Parts) -> Option<Principal> + Send + Sync;

/// rmcp's service for handlers `S` with [`DirectSessions`], and the
/// application's check of who a request is from, shared.
pub(crate) struct McpService<S> {
    rmcp: Arc<StreamableHttpService<S, DirectSessions>>,
    sessions: Arc<DirectSessions>,
    identify: Option<Arc<Identify>>,
}

impl<S> Clone for McpService<S> {
    fn clone(&self) -> Self {
        Self {
            rmcp: self.rmcp.clone(),
            sessions: self.sessions.clone(),
            identify: self.identify.clone(),
        }
    }
}

impl<S> McpService<S> {
    pub(crate) fn new(
        rmcp: StreamableHttpService<S, DirectSessions>,
        sessions: Arc<DirectSessions>,
        identify: Option<Arc<Identify>>,
    ) -> Self {
        Self {
            rmcp: Arc::new(rmcp),
            sessions,
            identify,
        }
    }
}

/// How long a client refused for want of sessions is told to wait.
const FULL_RETRY_AFTER_S: u64 = 30;

/// Whether `request` may open a session: a `POST` without a session id (the body
/// is not read here; rmcp opens a session for every `initialize`, whatever
/// protocol it names).
fn may_open_session(request: &Request) -> bool {
    request.method() == Method::POST && !request.headers().contains_key("mcp-session-id")
}

/// Whether `request` says it opens a session: one that may, from a client of a
/// protocol before 2026-07-28 (which has a session for every call). Its room is
/// checked before rmcp reads it; a later protocol's request may be a call
/// without a session, and only the session manager knows (it holds the caps
/// either way).
fn says_it_opens_session(request: &Request) -> bool {
    may_open_session(request)
        && request
            .headers()
            .get("mcp-protocol-version")
            .is_none_or(|version| version.to_str().is_ok_and(|version| version < "2026-07-28"))
}

/// `503 Service Unavailable` with `Retry-After`: as many sessions are open as the
/// server keeps.
fn full() -> Response {
    Response::builder()
        .status(StatusCode::SERVICE_UNAVAILABLE)
        .header(axum::http::header::RETRY_AFTER, FULL_RETRY_AFTER_S.to_string())
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"as many sessions are open as the server keeps: try again later"}}"#,
        ))
        .unwrap_or_default()
}

impl<S: ServerHandler + Send + 'static> tower_service::Service<Request> for McpService<S> {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let rmcp = self.rmcp.clone();
        let request = match &self.identify {
            Some(identify) => identified(request, &**identify),
            None => request,
        };
        if !may_open_session(&request) {
            return Box::pin(async move { Ok(answer(&rmcp, request).await) });
        }
        let principal = request.extensions().get::<Principal>().cloned();
        if says_it_opens_session(&request) && !self.sessions.has_room(principal.as_ref()) {
            return Box::pin(std::future::ready(Ok(full())));
        }
        // The session manager learns who opens the session (for the cap per
        // principal) from the request rmcp handles in this task, and says here
        // when it refused one.
        let opening = Opening {
            principal,
            ..Opening::default()
        };
        Box::pin(OPENING.scope(opening, async move {
            let response = answer(&rmcp, request).await;
            let refused = OPENING.with(|opening| opening.refused.load(Ordering::Relaxed));
            Ok(if refused { full() } else { response })
        }))
    }
}

/// The request with the principal the application found in it, where rmcp
/// passes it on to every call the request makes (the request's parts, in the
/// call's request context), whatever a client put anywhere else.
fn identified(request: Request, identify: &Identify) -> Request {
    let (mut parts, body) = request.into_parts();
    // A principal only the application's check put there: none a layer of the
    // client's making could have set before.
    parts.extensions.remove::<Principal>();
    if let Some(principal) = identify(&parts) {
        parts.extensions.insert(principal);
    }
    Request::from_parts(parts, body)
}

/// The answer to a body that says it is JSON and is not JSON-RPC: `400` with a
/// JSON-RPC parse error (`-32700`, id `null`) saying why.
async fn parse_error(refused: Response) -> Response {
    // rmcp's reason is a short text; more than this is cut.
    const MAX_REASON: usize = 1024;
    let reason = axum::body::to_bytes(refused.into_body(), MAX_REASON)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("Parse error: {reason}")},
    });
    Response::builder()
        .status(StatusCode::BAD_REQUEST)
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap_or_default()
}

/// rmcp's answer, with a reply sent whole ([`whole`]) and a session ended by
/// `DELETE` answered `204 No Content` where rmcp says `202 Accepted`: the session
/// has ended by then, and the official Python SDK reads anything but 200 or 204
/// as a failed termination and logs a warning.
async fn answer<S: ServerHandler + Send + 'static>(
    rmcp: &StreamableHttpService<S, DirectSessions>,
    request: Request,
) -> Response {
    let wants_whole = whole::wants_whole(&request);
    let deleting = request.method() == Method::DELETE;
    let says_json = request.method() == Method::POST
        && request
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.trim_start().starts_with("application/json"));
    let mut response = rmcp.handle(request).await.map(Body::new);
    if deleting && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    // rmcp answers a JSON body it cannot read `415`, as if the media type were
    // wrong: it is the JSON that is, a JSON-RPC parse error.
    if says_json && response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return parse_error(response).await;
    }
    if wants_whole {
        response = whole::send_whole(response).await;
    }
    response
}
