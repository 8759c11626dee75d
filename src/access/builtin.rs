//! The built-in policies: scopes, claims, any authenticated caller, anyone, and
//! closures.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::{Access, Denied, Missing, Policy};
use crate::context::Identity;

/// The caller must hold scopes: [`all`](Scopes::all) of them or
/// [`any`](Scopes::any) one. A caller with no identity holds none.
///
/// ```
/// use toolgraft::access::{Access, Missing, Policy, Scopes};
/// use toolgraft::context::Identity;
/// let bob = Identity::new("bob").with_scopes(["tools:read"]);
/// let writers = Scopes::all(["tools:read", "notes:write"]).with_step_up();
/// let denied = writers.check(&Access::listing(Some(&bob), "write_note")).unwrap_err();
/// assert_eq!(denied.missing, Missing::Scopes(vec!["notes:write".into()]));
/// assert!(denied.step_up);
/// assert!(Scopes::any(["admin", "tools:read"]).check(&Access::listing(Some(&bob), "x")).is_ok());
/// ```
#[derive(Clone, Debug)]
pub struct Scopes {
    scopes: Arc<[String]>,
    all: bool,
    step_up: bool,
}

impl Scopes {
    /// Every one of `scopes`.
    pub fn all<S: Into<String>>(scopes: impl IntoIterator<Item = S>) -> Self {
        Self::new(scopes, true)
    }

    /// At least one of `scopes`.
    pub fn any<S: Into<String>>(scopes: impl IntoIterator<Item = S>) -> Self {
        Self::new(scopes, false)
    }

    fn new<S: Into<String>>(scopes: impl IntoIterator<Item = S>, all: bool) -> Self {
        Self {
            scopes: scopes.into_iter().map(Into::into).collect(),
            all,
            step_up: false,
        }
    }

    /// A caller short of these scopes may ask its authorization server for them:
    /// the name is listed to it, and a call is refused naming the scopes (over
    /// HTTP: `403` with an `insufficient_scope` challenge), not hidden.
    pub fn with_step_up(mut self) -> Self {
        self.step_up = true;
        self
    }
}

impl Policy for Scopes {
    fn check(&self, access: &Access<'_>) -> Result<(), Denied> {
        check_scopes(access, &self.scopes, self.all, self.step_up)
    }

    fn reads_arguments(&self) -> bool {
        false
    }
}

/// The check of [`Scopes`], over borrowed scopes (a manifest's policy has them).
pub(super) fn check_scopes(
    access: &Access<'_>,
    scopes: &[String],
    all: bool,
    step_up: bool,
) -> Result<(), Denied> {
    let holds = |scope: &String| access.identity.is_some_and(|who| who.has_scope(scope));
    let missing = if all {
        if scopes.iter().all(holds) {
            return Ok(());
        }
        Missing::Scopes(scopes.iter().filter(|s| !holds(s)).cloned().collect())
    } else {
        if scopes.is_empty() || scopes.iter().any(holds) {
            return Ok(());
        }
        Missing::AnyScope(scopes.to_vec())
    };
    let denied = Denied::new(missing);
    Err(if step_up {
        denied.with_step_up()
    } else {
        denied
    })
}

/// The caller's claim `name` must be `value`, or, for a claim that is a list
/// (`roles`), hold it.
///
/// ```
/// use serde_json::json;
/// use toolgraft::access::{Access, Claim, Policy};
/// use toolgraft::context::Identity;
/// let ann = Identity::new("ann").with_claim("roles", json!(["admin", "ops"]));
/// assert!(Claim::is("roles", "ops").check(&Access::listing(Some(&ann), "x")).is_ok());
/// assert!(Claim::is("tenant", "acme").check(&Access::listing(Some(&ann), "x")).is_err());
/// ```
#[derive(Clone, Debug)]
pub struct Claim {
    name: Arc<str>,
    value: Value,
}

impl Claim {
    /// The claim `name` is `value` or, as a list, holds it.
    pub fn is(name: impl Into<Arc<str>>, value: impl Into<Value>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
        }
    }
}

impl Policy for Claim {
    fn check(&self, access: &Access<'_>) -> Result<(), Denied> {
        check_claim(access, &self.name, &self.value)
    }

    fn reads_arguments(&self) -> bool {
        false
    }
}

/// The check of [`Claim`], over a borrowed claim (a manifest's policy has them).
pub(super) fn check_claim(access: &Access<'_>, name: &str, wanted: &Value) -> Result<(), Denied> {
    let held = access.identity.and_then(|who| who.claim(name));
    let matches = |held: &Value| {
        held == wanted || matches!(held, Value::Array(items) if items.contains(wanted))
    };
    match held {
        Some(held) if matches(held) => Ok(()),
        _ => Err(Denied::new(Missing::Claim(name.to_owned()))),
    }
}

/// Any authenticated caller: a call with an [`Identity`](crate::context::Identity).
///
/// ```
/// use toolgraft::access::{Access, Authenticated, Policy};
/// assert!(Authenticated.check(&Access::listing(None, "x")).is_err());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Authenticated;

impl Policy for Authenticated {
    fn check(&self, access: &Access<'_>) -> Result<(), Denied> {
        match access.identity {
            Some(_) => Ok(()),
            None => Err(Denied::new(Missing::Caller)),
        }
    }

    fn reads_arguments(&self) -> bool {
        false
    }
}

/// Everyone, identified or not: the policy that says so out loud (an operator's
/// manifest that opens a name).
///
/// ```
/// use toolgraft::access::{Access, Anyone, Policy};
/// assert!(Anyone.check(&Access::listing(None, "x")).is_ok());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Anyone;

impl Policy for Anyone {
    fn check(&self, _: &Access<'_>) -> Result<(), Denied> {
        Ok(())
    }

    fn reads_arguments(&self) -> bool {
        false
    }
}

/// A policy from a closure: see [`policy_fn`].
#[derive(Clone)]
pub struct PolicyFn<F>(F);

impl<F> fmt::Debug for PolicyFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PolicyFn")
    }
}

/// A policy from a closure over the [`Access`] question.
///
/// ```
/// use toolgraft::access::{Access, Denied, Missing, Policy, policy_fn};
/// use toolgraft::context::Identity;
/// // At most 10 items, unless admin.
/// let bounded = policy_fn(|access: &Access<'_>| {
///     let admin = access.identity.is_some_and(|who| who.has_scope("admin"));
///     let items = access.arguments.and_then(|args| args.get("items")?.as_array().map(Vec::len));
///     match items {
///         Some(n) if n > 10 && !admin => Err(Denied::new(Missing::Condition("at most 10 items".into()))),
///         _ => Ok(()),
///     }
/// });
/// let args = serde_json::json!({"items": vec![0; 11]});
/// let who = Identity::new("bob");
/// let call = Access::call(Some(&who), "sum", args.as_object().unwrap());
/// assert_eq!(bounded.check(&call).unwrap_err().to_string(), "the call needs at most 10 items");
/// assert!(bounded.check(&Access::listing(Some(&who), "sum")).is_ok());
/// ```
pub fn policy_fn<F>(check: F) -> PolicyFn<F>
where
    F: Fn(&Access<'_>) -> Result<(), Denied> + Send + Sync + 'static,
{
    PolicyFn(check)
}

impl<F> Policy for PolicyFn<F>
where
    F: Fn(&Access<'_>) -> Result<(), Denied> + Send + Sync + 'static,
{
    fn check(&self, access: &Access<'_>) -> Result<(), Denied> {
        (self.0)(access)
    }
}

/// A policy from a closure over the caller's identity alone: see [`identity_fn`].
#[derive(Clone)]
pub struct IdentityFn<F>(F);

impl<F> fmt::Debug for IdentityFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IdentityFn")
    }
}

/// A policy from a closure over the caller's identity alone (`None`: an
/// unidentified caller): one that says it reads no arguments, so that it may
/// decide an [audience](crate::toolset::Edit::audience), and an
/// [`Authorize`](crate::ext::Authorize) layer over a typed tool need not turn
/// the input into JSON for it.
///
/// ```
/// use toolgraft::access::{Access, Denied, Missing, Policy, identity_fn};
/// use toolgraft::context::Identity;
/// let staff = identity_fn(|who: Option<&Identity>| match who {
///     Some(who) if who.subject().ends_with("@staff.example.com") => Ok(()),
///     _ => Err(Denied::new(Missing::Condition("a staff account".into()))),
/// });
/// assert!(!staff.reads_arguments());
/// let ann = Identity::new("ann@staff.example.com");
/// assert!(staff.check(&Access::listing(Some(&ann), "x")).is_ok());
/// assert!(staff.check(&Access::listing(None, "x")).is_err());
/// ```
pub fn identity_fn<F>(check: F) -> IdentityFn<F>
where
    F: Fn(Option<&Identity>) -> Result<(), Denied> + Send + Sync + 'static,
{
    IdentityFn(check)
}

impl<F> Policy for IdentityFn<F>
where
    F: Fn(Option<&Identity>) -> Result<(), Denied> + Send + Sync + 'static,
{
    fn check(&self, access: &Access<'_>) -> Result<(), Denied> {
        (self.0)(access.identity)
    }

    fn reads_arguments(&self) -> bool {
        false
    }
}
