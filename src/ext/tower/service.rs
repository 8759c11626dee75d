//! A branch as a `tower::Service`: a typed [`Branch`] takes its input, a
//! [`ToolService`] a bound name's JSON arguments. Both are `Clone`, always ready,
//! and fail with [`ToolError`], so they sit under `ServiceBuilder` layers and in
//! an axum router (`Router::route_service`, after mapping the request).
//!
//! ```
//! use std::time::Duration;
//! use tower::{ServiceBuilder, ServiceExt};
//! use toolgraft::{Tool, Toolset};
//! # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tower::BoxError> {
//! let shout = Tool::builder().name("shout").description("Return the text.")
//!     .body(|input: Shout| async move { Ok(input.text.to_uppercase()) })
//!     .build()?;
//! let (branch,) = Toolset::new().bind((shout.combo(),))?;
//! let service = ServiceBuilder::new()
//!     .concurrency_limit(8)
//!     .timeout(Duration::from_secs(5))
//!     .service(branch);
//! assert_eq!(service.oneshot(Shout { text: "hi".into() }).await?, "HI");
//! # Ok(()) }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::tower::Service;
use serde_json::Value;

use crate::combo::Branch;
use crate::error::ToolError;
use crate::extension::Stack;
use crate::toolset::Toolset;

/// A typed branch as a service of its whole input (the base tool's input, or
/// [`WithParams`](crate::extension::WithParams) around it when a wrapper
/// reserves params): see the [module](self)'s example. Each call clones the
/// branch's stack (which shares its state) into its future.
impl<S: Stack> Service<S::Input> for Branch<S> {
    type Response = S::Output;
    type Error = ToolError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Output, ToolError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, input: S::Input) -> Self::Future {
        let stack = self.stack().clone();
        Box::pin(async move { stack.call(input).await })
    }
}

/// A bound name as a service of JSON arguments: each call is
/// [`Toolset::call`], so it reaches what the name is bound to at the time (an
/// edit that rebinds it is seen by the next call), and an unbound name answers
/// [`ToolError::UnknownTool`].
///
/// ```
/// use serde_json::json;
/// use tower::{ServiceBuilder, ServiceExt};
/// use toolgraft::ext::Trace;
/// use toolgraft::ext::tower::ToolService;
/// use toolgraft::{Tool, ToolError, Toolset};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let shout = Tool::builder().name("shout").description("Return the text.")
/// #     .body(|input: Shout| async move { Ok(input.text) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((shout.combo().with(Trace),))?;
/// let service = ServiceBuilder::new()
///     .concurrency_limit(8)
///     .service(ToolService::new(&toolset, "shout_trace"));
/// assert_eq!(service.oneshot(json!({"text": "hi"})).await?, json!("hi"));
///
/// let missing = ToolService::new(&toolset, "nope").oneshot(json!({})).await;
/// assert!(matches!(missing, Err(ToolError::UnknownTool { .. })));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ToolService {
    toolset: Toolset,
    name: Arc<str>,
}

impl ToolService {
    /// The name `name` of `toolset` (which the service keeps alive), as a service.
    pub fn new(toolset: &Toolset, name: impl Into<Arc<str>>) -> Self {
        Self {
            toolset: toolset.clone(),
            name: name.into(),
        }
    }

    /// The name it calls.
    ///
    /// ```
    /// let service = toolgraft::ext::tower::ToolService::new(&toolgraft::Toolset::new(), "shout");
    /// assert_eq!(service.name(), "shout");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Service<Value> for ToolService {
    type Response = Value;
    type Error = ToolError;
    type Future = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, args: Value) -> Self::Future {
        let service = self.clone();
        Box::pin(async move { service.toolset.call(&service.name, args).await })
    }
}
