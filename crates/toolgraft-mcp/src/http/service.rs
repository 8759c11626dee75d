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
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::StreamableHttpService;

use super::sessions::DirectSessions;
use super::whole;
/// rmcp's service for handlers `S` with [`DirectSessions`], shared.
pub(crate) struct McpService<S>(Arc<StreamableHttpService<S, DirectSessions>>);

impl<S> Clone for McpService<S> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<S> McpService<S> {
    pub(crate) fn new(rmcp: StreamableHttpService<S, DirectSessions>) -> Self {
        Self(Arc::new(rmcp))
    }
}

impl<S: ServerHandler + Send + 'static> tower_service::Service<Request> for McpService<S> {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let rmcp = self.0.clone();
        Box::pin(async move { Ok(answer(&rmcp, request).await) })
    }
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
    let mut response = rmcp.handle(request).await.map(Body::new);
    if deleting && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    if wants_whole {
        response = whole::send_whole(response).await;
    }
    response
}
