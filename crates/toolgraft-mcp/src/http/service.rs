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
use rmcp::transport::streamable_http_server::StreamableHttpService;

use super::sessions::DirectSessions;
use super::whole;
use crate::ToolsetServer;

/// rmcp's service for [`ToolsetServer`]s with [`DirectSessions`], shared.
#[derive(Clone)]
pub(crate) struct McpService(Arc<StreamableHttpService<ToolsetServer, DirectSessions>>);

impl McpService {
    pub(crate) fn new(rmcp: StreamableHttpService<ToolsetServer, DirectSessions>) -> Self {
        Self(Arc::new(rmcp))
    }
}

impl tower_service::Service<Request> for McpService {
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
async fn answer(
    rmcp: &StreamableHttpService<ToolsetServer, DirectSessions>,
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
