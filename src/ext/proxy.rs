//! `proxy`: routes the body's egress through a proxy chosen from an allow-list.
//!
//! The route is a task-local of the task that runs the body, which is why `proxy`
//! requires body locality: it must sit inside any backend.

use std::future::Future;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ToolError, shorten};
use crate::extension::{ConfigError, Configurable, Wrap};
use crate::kind::property::BodyLocal;
use crate::name::Name;
use crate::stack::params::Params;
use crate::stack::{Next, Stack};

tokio::task_local! {
    static ROUTE: String;
}

/// The egress route the current tool body should use, set by [`Proxy`]; `None`
/// outside a proxy branch (or where a proxy does not reach: across a backend).
///
/// ```
/// assert_eq!(toolgraft::ext::proxy::current_route(), None);
/// ```
pub fn current_route() -> Option<String> {
    ROUTE.try_with(Clone::clone).ok()
}

/// Appends `separator` and the current route to `key`, if a proxy set one.
pub(crate) fn append_route(key: &mut String, separator: char) {
    let _outside_any_proxy = ROUTE.try_with(|route| {
        key.push(separator);
        key.push_str(route);
    });
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxies: Option<Vec<String>>,
}

impl Params for ProxyParams {}

/// Sets a task-local egress route for the body, from an operator allow-list; a
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
        proxy.check_config()?;
        Ok(proxy)
    }
}

impl Wrap for Proxy {
    type Locality = BodyLocal;
    type Params = ProxyParams;

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

    fn around<S: Stack>(
        &self,
        next: Next<'_, S, Self>,
        params: ProxyParams,
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send {
        let route = self.choose(params.proxies);
        async move {
            let route = route.map_err(|reason| ToolError::Refused {
                tool: next.branch().clone(),
                extension: Name::unchecked("proxy"),
                reason,
            })?;
            ROUTE.scope(route, next.call(input)).await
        }
    }
}
