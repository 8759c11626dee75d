//! `proxy`: routes the body's egress through a proxy chosen from an allow-list.
//!
//! The route is a [call-context](crate::context) entry ([`Route`]) of the call
//! that runs the body; `proxy` requires body locality, so it sits inside any
//! backend, which then carries the route to the body.

use std::future::Future;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::{self, Entry, Keyed, Serialized};
use crate::error::{ToolError, shorten};
use crate::extension::Params;
use crate::extension::{ConfigError, Configurable, Extension, Wrap};
use crate::extension::{Next, Stack};
use crate::kind::property::BodyLocal;

/// The egress route a [`Proxy`] chose for the call: a call-context entry. It
/// travels with the body to any worker, and a cache inside the proxy keys on it
/// (the route changes the answer without changing the input).
///
/// ```
/// use toolgraft::context;
/// use toolgraft::ext::proxy::{self, Route};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let route = context::with(Route("eu".into()), async { proxy::current_route() }).await;
/// assert_eq!(route.as_deref(), Some("eu"));
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Route(pub String);

impl Entry for Route {
    const NAME: &'static str = "toolgraft.proxy.route";
    type Travel = Serialized;
    type Key = Keyed;
}

/// The egress route the current tool body should use, set by [`Proxy`] (the
/// [`Route`] entry of the call's context, carried to the body by any backend
/// outside the proxy); `None` outside a proxy branch.
///
/// ```
/// assert_eq!(toolgraft::ext::proxy::current_route(), None);
/// ```
pub fn current_route() -> Option<String> {
    context::get::<Route>().map(|route| route.0)
}

/// The operator's side of a proxy: which routes callers may pick. The first one is
/// the default.
///
/// ```
/// let config: toolgraft::ext::proxy::ProxyConfig = serde_json::from_str(r#"{"allow": ["eu"]}"#)?;
/// assert_eq!(config.allow, ["eu"]);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    /// The allowed routes, the default first.
    pub allow: Vec<String>,
}

/// The caller's side: the `proxies` reserved param.
///
/// ```
/// let params: toolgraft::ext::ProxyParams = serde_json::from_str(r#"{"proxies": ["eu"]}"#)?;
/// assert_eq!(params.proxies.unwrap(), ["eu"]);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProxyParams {
    /// Egress proxies to use, most preferred first; each must be allowed by the
    /// operator. Without it, the operator's default route is used.
    // One line for the model: MCP clients show a description as it is.
    #[schemars(
        description = "Egress proxies to use, most preferred first; each must be allowed by the operator. Without it, the operator's default route is used."
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxies: Option<Vec<String>>,
}

impl Params for ProxyParams {}

/// Sets the body's egress route (the [`Route`] context entry), from an operator allow-list; a
/// requested route not on the list is refused before the body runs. Read the route
/// in the body with [`current_route`].
///
/// Requires body locality: `[proxy, pool]` binds, `[pool, proxy]` does not compile.
///
/// ```
/// use serde_json::json;
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::{proxy, Proxy};
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Fetch { url: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let fetch = Tool::builder().name("fetch").description("Fetch a page.")
///     .body(|input: Fetch| async move {
///         Ok(format!("GET {} via {}", input.url, proxy::current_route().unwrap_or_default()))
///     })
///     .build()?;
/// let toolset = Toolset::new();
/// toolset.bind((fetch.combo().with(Proxy::allow(["eu", "us"])),))?;
///
/// let out = toolset.call("fetch_proxy", json!({"url": "/", "proxies": ["us"]})).await?;
/// assert_eq!(out, json!("GET / via us"));
/// assert!(toolset.call("fetch_proxy", json!({"url": "/", "proxies": ["cn"]})).await.is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Proxy {
    config: Arc<ProxyConfig>,
}

impl Proxy {
    /// A proxy allowing `routes`; the first is the default.
    ///
    /// ```
    /// use toolgraft::Extension;
    /// let proxy = toolgraft::ext::Proxy::allow(["eu", "us"]);
    /// assert_eq!(proxy.config(), Some(serde_json::json!({"allow": ["eu", "us"]})));
    /// ```
    pub fn allow<R: Into<String>>(routes: impl IntoIterator<Item = R>) -> Self {
        Self::new(ProxyConfig {
            allow: routes.into_iter().map(Into::into).collect(),
        })
    }

    /// A proxy with the given config.
    ///
    /// ```
    /// use toolgraft::ext::{proxy::ProxyConfig, Proxy};
    /// let proxy = Proxy::new(ProxyConfig { allow: vec!["eu".into()] });
    /// # let _ = proxy;
    /// ```
    pub fn new(config: ProxyConfig) -> Self {
        Self {
            config: Arc::new(config),
        }
    }

    fn choose(&self, requested: Option<Vec<String>>) -> Result<String, String> {
        let allowed = &self.config.allow;
        match requested {
            Some(requested) if !requested.is_empty() => {
                if let Some(refused) = requested.iter().find(|route| !allowed.contains(route)) {
                    return Err(format!(
                        "route `{}` is not on the allow-list ({})",
                        shorten(refused),
                        shorten(&allowed.join(", "))
                    ));
                }
                Ok(requested[0].clone())
            }
            _ => allowed
                .first()
                .cloned()
                .ok_or_else(|| "the allow-list is empty".to_owned()),
        }
    }
}

impl Configurable for Proxy {
    type Config = ProxyConfig;

    fn from_config(config: ProxyConfig) -> Result<Self, ConfigError> {
        let proxy = Self::new(config);
        Extension::check_config(&proxy)?;
        Ok(proxy)
    }
}

impl crate::Extension for Proxy {
    type Kind = crate::kind::Wrapper;
    type Locality = BodyLocal;

    fn name(&self) -> &str {
        "proxy"
    }

    fn check_config(&self) -> Result<(), ConfigError> {
        if self.config.allow.is_empty() {
            return Err(ConfigError::new(
                "allow",
                "the allow-list needs at least one route",
            ));
        }
        Ok(())
    }

    fn config(&self) -> Option<Value> {
        serde_json::to_value(&*self.config).ok()
    }
}

impl<S: Stack> Wrap<S> for Proxy {
    type Params = ProxyParams;

    fn around(
        &self,
        next: Next<'_, S, Self>,
        params: ProxyParams,
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send {
        let route = self.choose(params.proxies);
        async move {
            let route = route.map_err(|reason| next.refuse(reason))?;
            context::with(Route(route), next.call(input)).await
        }
    }
}
