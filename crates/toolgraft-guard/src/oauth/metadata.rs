//! RFC 9728 protected resource metadata: where it is served, and a service that
//! serves it.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum_core::body::Body;
use http::header::{ACCESS_CONTROL_ALLOW_ORIGIN, ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use reqwest::Url;
use tower_service::Service;

/// The well-known path of a resource's metadata (RFC 9728 §3.1): the resource's
/// path after `/.well-known/oauth-protected-resource`, its final `/` dropped.
pub(crate) fn metadata_path(resource: &Url) -> String {
    let path = resource.path().trim_end_matches('/');
    format!("/.well-known/oauth-protected-resource{path}")
}

/// Serves a [`ResourceServer`](crate::ResourceServer)'s metadata document: `GET`
/// (and `HEAD`) answer it as JSON, any other method `405`. Mount it, without the
/// guard, at [`ResourceServer::metadata_path`](crate::ResourceServer::metadata_path):
/// a client reads it before it has a token. Made by
/// [`ResourceServer::metadata_service`](crate::ResourceServer::metadata_service).
///
/// ```
/// use axum::body::Body;
/// use tower::ServiceExt;
/// use toolgraft_guard::ResourceServer;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
/// let request = http::Request::get(server.metadata_path()).body(Body::empty())?;
/// let response = server.metadata_service().oneshot(request).await?;
/// assert_eq!(response.status(), 200);
/// assert_eq!(response.headers()["content-type"], "application/json");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MetadataService {
    document: Arc<str>,
}

impl MetadataService {
    pub(crate) fn new(document: &serde_json::Value) -> Self {
        Self {
            document: document.to_string().into(),
        }
    }

    pub(crate) fn respond(&self, method: &Method) -> Response<Body> {
        let mut response = if method == Method::GET {
            Response::new(Body::from(self.document.to_string()))
        } else if method == Method::HEAD {
            Response::new(Body::empty())
        } else {
            let mut refused = Response::new(Body::empty());
            *refused.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            refused
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            return refused;
        };
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        // Public by design (RFC 9728 §2): a client in a browser reads it from
        // another origin.
        headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
        response
    }
}

impl<B> Service<Request<B>> for MetadataService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        ready(Ok(self.respond(request.method())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_the_resource_path() {
        let path = |url: &str| metadata_path(&Url::parse(url).unwrap());
        assert_eq!(
            path("http://host/mcp"),
            "/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            path("http://host/a/b/"),
            "/.well-known/oauth-protected-resource/a/b"
        );
        assert_eq!(path("http://host"), "/.well-known/oauth-protected-resource");
        assert_eq!(
            path("http://host/"),
            "/.well-known/oauth-protected-resource"
        );
    }
}
