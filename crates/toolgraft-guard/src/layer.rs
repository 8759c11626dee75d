//! [`GuardLayer`]: the tower layer (axum middleware) that puts a [`Guard`] in front
//! of a service, and how a server adapts it (a cookie, a sign-in route, its own
//! error bodies).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum_core::body::Body;
use http::header::{RETRY_AFTER, WWW_AUTHENTICATE};
use http::request::Parts;
use http::{Request, Response};
use tower_layer::Layer;
use tower_service::Service;

use crate::authenticated::Authenticated;
use crate::guard::{Guard, Outcome};
use crate::refusal::Refusal;

type Skip = dyn Fn(&Parts) -> bool + Send + Sync;
type Respond = dyn Fn(&Refusal, &Parts) -> Response<Body> + Send + Sync;

impl Guard {
    /// The tower layer that checks every request against this guard; see
    /// [`GuardLayer`].
    ///
    /// ```
    /// # use axum::{Router, routing::get};
    /// let guard = toolgraft_guard::Guard::off();
    /// let app: Router = Router::new().route("/", get(|| async { "hi" })).layer(guard.layer());
    /// ```
    pub fn layer(&self) -> GuardLayer {
        GuardLayer::new(self.clone())
    }
}

/// Checks every request against a [`Guard`] before the inner service sees it;
/// a refused request gets `400`, `401`, `403` (or `503`, when an OAuth guard cannot
/// reach its issuer) and never reaches it. A request let through carries the
/// caller's [`Authenticated`] in its extensions when the guard knows identities (a
/// token table, OAuth). Made by
/// [`Guard::layer`]; for an axum `Router`, `.layer(guard.layer())` (every route and
/// the fallback) or `.route_layer(guard.layer())` (matched routes only).
///
/// ```
/// use axum::{Router, body::Body, routing::get};
/// use http::Request;
/// use tower::ServiceExt;
/// use toolgraft_guard::Guard;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let guard = Guard::bearer("0123456789abcdef")?;
/// let app = Router::new().route("/", get(|| async { "hi" })).layer(guard.layer());
///
/// let request = |token: &str| Request::get("/").header("host", "localhost")
///     .header("authorization", format!("Bearer {token}")).body(Body::empty()).unwrap();
/// assert_eq!(app.clone().oneshot(request("0123456789abcdef")).await?.status(), 200);
/// let refused = app.oneshot(request("guess")).await?;
/// assert_eq!(refused.status(), 401);
/// assert!(refused.headers()["www-authenticate"].to_str()?.starts_with("Bearer"));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct GuardLayer {
    guard: Guard,
    cookie: Option<&'static str>,
    skip_token: Option<Arc<Skip>>,
    respond: Option<Arc<Respond>>,
}

impl fmt::Debug for GuardLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardLayer")
            .field("guard", &self.guard)
            .field("cookie", &self.cookie)
            .field("skip_token", &self.skip_token.is_some())
            .field("respond", &self.respond.is_some())
            .finish()
    }
}

impl GuardLayer {
    pub(crate) fn new(guard: Guard) -> Self {
        Self {
            guard,
            cookie: None,
            skip_token: None,
            respond: None,
        }
    }

    /// Takes the token from the cookie `name` too (a page in a browser cannot set
    /// `Authorization`); the cookie carries the token as it is. Set the cookie
    /// `HttpOnly; SameSite=Strict`: the Origin check and `SameSite` keep other
    /// sites from using it.
    ///
    /// ```
    /// use axum::{Router, body::Body, routing::get};
    /// use tower::ServiceExt;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = toolgraft_guard::Guard::bearer("0123456789abcdef")?.layer().with_token_cookie("session");
    /// let app = Router::new().route("/", get(|| async { "hi" })).layer(layer);
    /// let request = http::Request::get("/").header("host", "localhost")
    ///     .header("cookie", "theme=dark; session=0123456789abcdef").body(Body::empty())?;
    /// assert_eq!(app.oneshot(request).await?.status(), 200);
    /// # Ok(()) }
    /// ```
    pub fn with_token_cookie(mut self, name: &'static str) -> Self {
        self.cookie = Some(name);
        self
    }

    /// Requests `skip` picks need no token; they still get the Host and Origin
    /// checks. For a sign-in route that checks the token in its body itself, with
    /// [`Guard::accepts_token`].
    ///
    /// ```
    /// use axum::{Router, body::Body, routing::post};
    /// use tower::ServiceExt;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = toolgraft_guard::Guard::bearer("0123456789abcdef")?
    ///     .layer()
    ///     .with_token_skipped_for(|request| request.uri.path() == "/login");
    /// let app = Router::new().route("/login", post(|| async { "checked here" })).layer(layer);
    /// let sign_in = |host: &str| http::Request::post("/login").header("host", host)
    ///     .body(Body::empty()).unwrap();
    /// assert_eq!(app.clone().oneshot(sign_in("localhost")).await?.status(), 200);
    /// assert_eq!(app.oneshot(sign_in("evil.example")).await?.status(), 403);
    /// # Ok(()) }
    /// ```
    pub fn with_token_skipped_for(
        mut self,
        skip: impl Fn(&Parts) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.skip_token = Some(Arc::new(skip));
        self
    }

    /// Writes refusals with `respond` instead of [`Refusal::into_response`] (say, as
    /// the server's JSON errors, or a sign-in page). The status stays the
    /// refusal's, and its `WWW-Authenticate` challenge is added when `respond`
    /// sets none, so the answer keeps its meaning whatever the body.
    ///
    /// ```
    /// use axum::{Router, body::Body, routing::get};
    /// use tower::ServiceExt;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = toolgraft_guard::Guard::off().layer().respond_with(|refusal, _request| {
    ///     http::Response::new(Body::from(format!(r#"{{"error": "{}"}}"#, refusal.message())))
    /// });
    /// let app = Router::new().route("/", get(|| async { "hi" })).layer(layer);
    /// let request = http::Request::get("/").header("host", "evil.example").body(Body::empty())?;
    /// let refused = app.oneshot(request).await?;
    /// assert_eq!(refused.status(), 403);
    /// let body = axum::body::to_bytes(refused.into_body(), 1024).await?;
    /// assert!(body.starts_with(br#"{"error": "the `Host` header"#));
    /// # Ok(()) }
    /// ```
    pub fn respond_with(
        mut self,
        respond: impl Fn(&Refusal, &Parts) -> Response<Body> + Send + Sync + 'static,
    ) -> Self {
        self.respond = Some(Arc::new(respond));
        self
    }

    /// The answer to a refused request.
    fn refuse(&self, refusal: Refusal, parts: &Parts) -> Response<Body> {
        let Some(respond) = &self.respond else {
            return refusal.into_response();
        };
        let mut response = respond(&refusal, parts);
        *response.status_mut() = refusal.status();
        if let Some(challenge) = refusal.challenge() {
            response
                .headers_mut()
                .entry(WWW_AUTHENTICATE)
                .or_insert(challenge);
        }
        if let Some(retry_after) = refusal.retry_after() {
            response
                .headers_mut()
                .entry(RETRY_AFTER)
                .or_insert(retry_after);
        }
        response
    }
}

impl<S> Layer<S> for GuardLayer {
    type Service = GuardService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GuardService {
            inner,
            layer: Arc::new(self.clone()),
        }
    }
}

/// The service [`GuardLayer`] wraps around an inner one.
///
/// ```
/// use tower::{ServiceExt, service_fn};
/// use tower::Layer;
/// use axum::body::Body;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let inner = service_fn(|_request: http::Request<Body>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(Body::from("inner")))
/// });
/// let service = toolgraft_guard::Guard::off().layer().layer(inner);
/// let request = http::Request::get("/").header("host", "[::1]:8080").body(Body::empty())?;
/// assert_eq!(service.oneshot(request).await?.status(), 200);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct GuardService<S> {
    inner: S,
    layer: Arc<GuardLayer>,
}

/// What to do once a waiting check has settled: call the inner service, or answer
/// with the refusal.
type Then<F> = Box<dyn FnOnce(Result<Authenticated, Refusal>) -> GuardFuture<F> + Send>;

impl<S, B> Service<Request<B>> for GuardService<S>
where
    S: Service<Request<B>, Response = Response<Body>> + Clone + Send + 'static,
    B: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = GuardFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (mut parts, body) = request.into_parts();
        let layer = &self.layer;
        let token = layer.skip_token.as_ref().is_none_or(|skip| !skip(&parts));
        let outcome =
            layer
                .guard
                .check_parts(&parts.uri, &parts.headers, token, layer.cookie, true);
        // The instance `poll_ready` readied serves this request; a fresh clone
        // waits for the next (tower's documented pattern).
        let clone = self.inner.clone();
        match outcome {
            Ok(Outcome::Pass(who)) => {
                if let Some(who) = who {
                    parts.extensions.insert(who);
                }
                let mut ready = std::mem::replace(&mut self.inner, clone);
                GuardFuture::Inner {
                    future: ready.call(Request::from_parts(parts, body)),
                }
            }
            #[cfg(feature = "oauth")]
            Ok(Outcome::Verify(check)) => {
                let mut ready = std::mem::replace(&mut self.inner, clone);
                let layer = Arc::clone(&self.layer);
                let then: Then<S::Future> = Box::new(move |checked| match checked {
                    Ok(who) => {
                        parts.extensions.insert(who);
                        GuardFuture::Inner {
                            future: ready.call(Request::from_parts(parts, body)),
                        }
                    }
                    Err(refusal) => GuardFuture::Refused {
                        response: Some(layer.refuse(refusal, &parts)),
                    },
                });
                GuardFuture::Checking {
                    check,
                    then: Some(then),
                }
            }
            Err(refusal) => GuardFuture::Refused {
                response: Some(layer.refuse(refusal, &parts)),
            },
        }
    }
}

pin_project_lite::pin_project! {
    /// The answer of a [`GuardService`]: the inner service's, or the refusal.
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use axum::body::Body;
    /// use tower::{Layer, Service, service_fn};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let inner = service_fn(|_: http::Request<Body>| async {
    ///     Ok::<_, Infallible>(http::Response::new(Body::empty()))
    /// });
    /// let mut service = toolgraft_guard::Guard::off().layer().layer(inner);
    /// let request = http::Request::get("/").body(Body::empty()).unwrap(); // no Host
    /// let future: toolgraft_guard::GuardFuture<_> = service.call(request);
    /// assert_eq!(future.await.unwrap().status(), 400);
    /// # }
    /// ```
    #[project = Projection]
    #[allow(missing_docs)] // pin-project's generated items
    pub enum GuardFuture<F> {
        /// Let through: the inner service's future.
        Inner { #[pin] future: F },
        /// Refused: the answer, taken when polled.
        Refused { response: Option<Response<Body>> },
        /// Waiting for an OAuth token's check (the issuer's keys, introspection),
        /// then what to do with its result.
        Checking {
            check: Pin<Box<dyn Future<Output = Result<Authenticated, Refusal>> + Send>>,
            then: Option<Then<F>>,
        },
    }
}

impl<F> fmt::Debug for GuardFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Inner { .. } => "GuardFuture::Inner",
            Self::Refused { .. } => "GuardFuture::Refused",
            Self::Checking { .. } => "GuardFuture::Checking",
        })
    }
}

impl<F, E> Future for GuardFuture<F>
where
    F: Future<Output = Result<Response<Body>, E>>,
{
    type Output = Result<Response<Body>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let next = match self.as_mut().project() {
            Projection::Inner { future } => return future.poll(cx),
            Projection::Checking { check, then } => {
                let checked = std::task::ready!(check.as_mut().poll(cx));
                match then.take() {
                    Some(then) => then(checked),
                    None => GuardFuture::Refused { response: None },
                }
            }
            // Polled again after it answered: the future contract's misuse, answered
            // with an empty 500 rather than a panic.
            Projection::Refused { response } => {
                return Poll::Ready(Ok(response.take().unwrap_or_else(|| {
                    let mut response = Response::new(Body::empty());
                    *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
                    response
                })));
            }
        };
        self.set(next);
        self.poll(cx)
    }
}
