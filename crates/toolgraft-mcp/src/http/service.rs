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
use toolgraft::context::{Identity, Principal};

use super::sessions::{DirectSessions, OPENING, Opening};
use super::whole;
use crate::call::{self, StepUp};
/// Who a request is from, as the application says: the hooks
/// [`McpHttp::with_principal`](super::McpHttp::with_principal) and
/// [`McpHttp::with_identity`](super::McpHttp::with_identity) set.
#[derive(Clone, Default)]
pub(crate) struct Identify {
    pub(crate) principal: Option<Arc<PrincipalOf>>,
    pub(crate) identity: Option<Arc<IdentityOf>>,
}

/// The application's principal of a request.
pub(crate) type PrincipalOf = dyn Fn(&Parts) -> Option<Principal> + Send + Sync;

/// The application's identity of a request.
pub(crate) type IdentityOf = dyn Fn(&Parts) -> Option<Identity> + Send + Sync;

/// rmcp's service for handlers `S` with [`DirectSessions`], and the
/// application's check of who a request is from, shared.
pub(crate) struct McpService<S> {
    rmcp: Arc<StreamableHttpService<S, DirectSessions>>,
    sessions: Arc<DirectSessions>,
    identify: Arc<Identify>,
    /// When the handler may refuse a call for want of scopes (a
    /// [`ToolsetServer`](crate::ToolsetServer)'s toolset with policies), the
    /// challenge that says which: its `POST`s then carry a [`StepUp`] slot.
    step_up: Option<Arc<Challenge>>,
}

/// The `WWW-Authenticate` value of a step-up for the scopes a call needs.
pub(crate) type Challenge = dyn Fn(&[String]) -> axum::http::HeaderValue + Send + Sync;

impl<S> Clone for McpService<S> {
    fn clone(&self) -> Self {
        Self {
            rmcp: self.rmcp.clone(),
            sessions: self.sessions.clone(),
            identify: self.identify.clone(),
            step_up: self.step_up.clone(),
        }
    }
}

impl<S> McpService<S> {
    pub(crate) fn new(
        rmcp: StreamableHttpService<S, DirectSessions>,
        sessions: Arc<DirectSessions>,
        identify: Identify,
        step_up: Option<Arc<Challenge>>,
    ) -> Self {
        Self {
            rmcp: Arc::new(rmcp),
            sessions,
            identify: Arc::new(identify),
            step_up,
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
        let challenge = self.step_up.clone();
        let (request, identity, step_up) = identified(request, &self.identify, challenge.is_some());
        if !may_open_session(&request) {
            return Box::pin(call::CALLER.scope(identity, async move {
                let response = answer(&rmcp, request).await;
                Ok(stepped_up(response, step_up, challenge.as_ref()))
            }));
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
        Box::pin(OPENING.scope(
            opening,
            call::CALLER.scope(identity, async move {
                let response = answer(&rmcp, request).await;
                let refused = OPENING.with(|opening| opening.refused.load(Ordering::Relaxed));
                Ok(if refused {
                    full()
                } else {
                    stepped_up(response, step_up, challenge.as_ref())
                })
            }),
        ))
    }
}

/// The identity a layer in front of the endpoint put in a request's
/// extensions, as the call context carries it: the one place where an
/// authenticating layer's own type of identity is converted.
fn identity_in(extensions: &axum::http::Extensions) -> Option<Identity> {
    if let Some(identity) = extensions.get::<Identity>() {
        return Some(identity.clone());
    }
    // The guard's: a checked OAuth access token, or a static token's entry.
    let checked = extensions.get::<toolgraft_guard::Authenticated>()?;
    let mut identity =
        Identity::new(checked.subject()).with_scopes(checked.scopes().iter().map(String::as_str));
    if let Some(issuer) = checked.issuer() {
        identity = identity.with_issuer(issuer);
    }
    for (name, value) in checked.claims() {
        identity = identity.with_claim(name.clone(), value.clone());
    }
    Some(identity)
}

/// The request with the identity and principal of its caller where rmcp passes
/// them on to every call the request makes (the request's parts, in the call's
/// request context), whatever a client put anywhere else; the identity, for
/// what rmcp asks outside a call; and, on a `POST` to a handler that may refuse
/// a call for want of scopes, the slot where it says which.
///
/// The identity is the application's hook's, else the one a layer in front
/// set ([`identity_in`]); the principal the hook's, else one a layer in front
/// set, else the identity's subject.
fn identified(
    request: Request,
    identify: &Identify,
    step_up: bool,
) -> (Request, Option<Identity>, Option<StepUp>) {
    let (mut parts, body) = request.into_parts();
    let identity = match &identify.identity {
        Some(identity_of) => identity_of(&parts),
        None => identity_in(&parts.extensions),
    };
    parts.extensions.remove::<Identity>();
    if let Some(identity) = &identity {
        parts.extensions.insert(identity.clone());
    }
    // A principal only the application's check put there: none a layer of the
    // client's making could have set before.
    if let Some(principal_of) = &identify.principal {
        parts.extensions.remove::<Principal>();
        if let Some(principal) = principal_of(&parts) {
            parts.extensions.insert(principal);
        }
    }
    if let Some(identity) = &identity
        && parts.extensions.get::<Principal>().is_none()
    {
        parts.extensions.insert(Principal::new(identity.subject()));
    }
    let step_up = (step_up && parts.method == Method::POST).then(StepUp::default);
    if let Some(step_up) = &step_up {
        parts.extensions.insert(step_up.clone());
    }
    (Request::from_parts(parts, body), identity, step_up)
}

/// `response`, or, when its call was refused for want of scopes a new token
/// may bring, the same reply as `403 Forbidden` with the challenge naming them:
/// MCP's step-up, on which a client asks its authorization server for them and
/// sends the request again.
fn stepped_up(
    mut response: Response,
    step_up: Option<StepUp>,
    challenge: Option<&Arc<Challenge>>,
) -> Response {
    let (Some(scopes), Some(challenge)) = (
        step_up.as_ref().and_then(|step_up| step_up.0.get()),
        challenge,
    ) else {
        return response;
    };
    *response.status_mut() = StatusCode::FORBIDDEN;
    response
        .headers_mut()
        .insert(axum::http::header::WWW_AUTHENTICATE, challenge(scopes));
    response
}

/// The `WWW-Authenticate` challenge of a step-up (RFC 6750 section 3.1, as MCP's
/// authorization asks for it): `Bearer error="insufficient_scope",
/// scope="<scopes>"`. A scope that is no scope token (RFC 6749 section 3.3: no
/// space, quote, backslash or control character) is left out rather than let
/// it break the header.
// The challenge without an OAuth resource server in the guard (one with, adds
// `resource_metadata`: `ResourceServer::insufficient_scope_challenge`).
pub(crate) fn insufficient_scope(scopes: &[String]) -> axum::http::HeaderValue {
    let token = |scope: &&String| {
        !scope.is_empty()
            && scope.bytes().all(|byte| {
                byte == 0x21 || (0x23..=0x5b).contains(&byte) || (0x5d..=0x7e).contains(&byte)
            })
    };
    let scope: Vec<&str> = scopes.iter().filter(token).map(String::as_str).collect();
    let challenge = format!(
        r#"Bearer error="insufficient_scope", scope="{}""#,
        scope.join(" ")
    );
    axum::http::HeaderValue::from_str(&challenge).unwrap_or_else(|_| {
        axum::http::HeaderValue::from_static(r#"Bearer error="insufficient_scope""#)
    })
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
