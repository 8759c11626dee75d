//! `authorize`: an authorization check as a layer of a combo.
//!
//! The check runs the [`Policy`] it holds on the caller's
//! [`Identity`] (and the arguments, for a policy that
//! reads them) before the layers inside it. Its locality is
//! [`Authorizing`]: it sits outside every relocating extension (no job is
//! enqueued for a caller it refuses), and every extension that answers from what
//! it kept, a `cache`, sits inside it (rule `shared-answers-inside-authorization`
//! in the [rulebook](crate::rulebook)): `[cache, authorize]` binds,
//! `[authorize, cache]` does not compile, and is refused from a manifest.
//!
//! A refusal is [`ToolError::UnknownTool`] (the caller is told no more than of a
//! name that does not exist) or, for a [step-up](crate::access::Denied::step_up),
//! [`ToolError::Unauthorized`] naming the scopes. For a name every call of which
//! should be checked, a policy on the toolset's name
//! ([`Edit::authorize`](crate::toolset::Edit::authorize)) is checked before every
//! layer and decides what each caller is shown; this layer is for a check at one
//! point of one combo, over typed calls too.
//!
//! | config (a [`PolicySpec`]) | meaning |
//! |---|---|
//! | `scopes` | every one of these scopes |
//! | `any_scope` | one of these scopes |
//! | `claims` | each claim equal, or held by a list claim |
//! | `when` | a CEL expression that must give `true` (feature `cel`; see [`Cel`](crate::access::Cel)) |
//! | `step_up` | a caller short of scopes is told which to ask for |

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::access::{self, Access, Policy, PolicySpec};
use crate::context::{self, CallName, Identity};
use crate::error::{ToolError, shorten};
use crate::extension::{ConfigError, Configurable, Extension, Next, Stack, Wrap};
use crate::kind::property::Authorizing;

/// An authorization check in a combo; see the [module docs](self).
///
/// ```
/// use serde_json::json;
/// use toolgraft::access::Scopes;
/// use toolgraft::context::{self, Identity};
/// use toolgraft::ext::{Authorize, Cache};
/// use toolgraft::{Tool, ToolError, Toolset};
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Query { q: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let search = Tool::builder().name("search").description("Search.").read_only()
///     .body(|i: Query| async move { Ok(format!("results for {}", i.q)) }).build()?;
/// let toolset = Toolset::new();
/// // The cache inside the check: it answers only callers the check let through.
/// toolset.bind((search.combo().with(Cache::default()).with(Authorize::new(Scopes::all(["search"]))),))?;
///
/// let reader = Identity::new("ann").with_scopes(["search"]);
/// let call = || toolset.call("search_cache_authorize", json!({"q": "rust"}));
/// assert_eq!(context::with(reader, call()).await?, json!("results for rust"));
/// let stranger = context::with(Identity::new("eve"), call()).await.unwrap_err();
/// assert!(matches!(stranger, ToolError::UnknownTool { .. }));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Authorize {
    policy: Arc<dyn Policy>,
    /// The manifest's form of the policy, when it came from one: what the
    /// element's config reports.
    spec: Option<PolicySpec>,
}

impl fmt::Debug for Authorize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authorize")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Authorize {
    /// A check of `policy`.
    ///
    /// ```
    /// let admins = toolgraft::ext::Authorize::new(toolgraft::access::Claim::is("roles", "admin"));
    /// # let _ = admins;
    /// ```
    pub fn new(policy: impl Policy) -> Self {
        Self {
            policy: Arc::new(policy),
            spec: None,
        }
    }
}

impl Default for Authorize {
    /// Any authenticated caller: the check of an empty [`PolicySpec`].
    fn default() -> Self {
        Self {
            policy: Arc::new(PolicySpec::default()),
            spec: Some(PolicySpec::default()),
        }
    }
}

impl Configurable for Authorize {
    type Config = PolicySpec;

    fn from_config(spec: PolicySpec) -> Result<Self, ConfigError> {
        Ok(Self {
            policy: Arc::new(spec.clone()),
            spec: Some(spec),
        })
    }
}

impl Extension for Authorize {
    type Kind = crate::kind::Wrapper;
    type Locality = Authorizing;

    fn name(&self) -> &str {
        "authorize"
    }

    fn policy(&self) -> Option<Arc<dyn Policy>> {
        Some(self.policy.clone())
    }

    fn config(&self) -> Option<Value> {
        self.spec
            .as_ref()
            .filter(|spec| **spec != PolicySpec::default())
            .and_then(|spec| serde_json::to_value(spec).ok())
    }
}

impl<S> Wrap<S> for Authorize
where
    S: Stack<Input: Serialize>,
{
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let identity = context::get::<Identity>();
        let called = context::get::<CallName>();
        let name = called
            .as_ref()
            .map_or(next.branch().as_str(), |called| called.0.as_str());
        let arguments = match self.policy.reads_arguments() {
            true => match serde_json::to_value(&input) {
                Ok(Value::Object(arguments)) => arguments,
                Ok(_) => serde_json::Map::new(),
                Err(error) => {
                    return Err(next.refuse(format!(
                        "the arguments cannot be read for the check: {}",
                        shorten(&error.to_string())
                    )));
                }
            },
            false => serde_json::Map::new(),
        };
        match access::check(
            std::slice::from_ref(&self.policy),
            &Access::call(identity.as_ref(), name, &arguments),
        ) {
            Ok(()) => next.call(input).await,
            Err(denied) => Err(ToolError::access_refused(name, denied)),
        }
    }
}
