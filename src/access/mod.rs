//! Who may see and call what: [`Policy`], decided on the caller's
//! [`Identity`], the name called and its arguments.
//!
//! A policy sits on a name of a toolset ([`Edit::authorize`](crate::toolset::Edit::authorize),
//! or `[access]` in a manifest): a bound name (a tool and every branch built on it,
//! a branch and every branch above it) or a published one. Or it sits in a combo
//! as a layer ([`Authorize`](crate::ext::Authorize)). Either way it is checked before
//! any work of the call (before any layer runs: no job enqueued, no approval asked),
//! and the same policy decides what a caller sees listed: a caller is shown
//! exactly the names it may call, and a name it may not call answers as an
//! unknown one ([`ToolError::UnknownTool`](crate::ToolError::UnknownTool)), so a
//! refusal does not even say the name exists. The one exception is a
//! [step-up](Denied::step_up): a scope the caller could be granted by asking for a
//! new token; such a name is listed, and a call answers
//! [`ToolError::Unauthorized`](crate::ToolError::Unauthorized) naming the scopes.
//!
//! ```
//! use serde_json::json;
//! use toolgraft::access::{Claim, Scopes};
//! use toolgraft::context::{self, Identity};
//! use toolgraft::{Tool, ToolError, Toolset};
//! # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Note { text: String }
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let write = Tool::builder().name("write_note").description("Write a note.")
//!     .body(|n: Note| async move { Ok(n.text) }).build()?;
//! let toolset = Toolset::new();
//! toolset.bind((write.combo(),))?;
//! toolset.edit()
//!     .authorize("write_note", (Scopes::all(["notes:write"]), Claim::is("tenant", "acme")))
//!     .commit()?;
//!
//! let alice = Identity::new("alice").with_scopes(["notes:write"]).with_claim("tenant", "acme");
//! let bob = Identity::new("bob").with_scopes(["notes:write"]).with_claim("tenant", "globex");
//! let call = || toolset.call("write_note", json!({"text": "hi"}));
//! assert_eq!(context::with(alice.clone(), call()).await?, json!("hi"));
//! let refused = context::with(bob.clone(), call()).await.unwrap_err();
//! assert!(matches!(refused, ToolError::UnknownTool { .. }));
//! assert!(toolset.visible(Some(&alice), "write_note") && !toolset.visible(Some(&bob), "write_note"));
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::context::Identity;

mod builtin;
mod cel;
mod spec;

pub use builtin::{
    Anyone, Authenticated, Claim, IdentityFn, PolicyFn, Scopes, identity_fn, policy_fn,
};
pub use cel::{Cel, CelError, MAX_CEL_COST, MAX_CEL_DEPTH, MAX_CEL_LEN};
pub use spec::PolicySpec;

/// One access decision's question: who calls which name with what.
///
/// ```
/// use toolgraft::access::Access;
/// use toolgraft::context::Identity;
/// let alice = Identity::new("alice");
/// let listing = Access::listing(Some(&alice), "search");
/// assert!(listing.arguments.is_none());
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Access<'a> {
    /// The caller, as the server in front authenticated it; `None` for a call
    /// no server identified.
    pub identity: Option<&'a Identity>,
    /// The name called (or listed): published or bound.
    pub name: &'a str,
    /// The call's arguments; `None` when the question is whether to list the
    /// name. A policy that needs them to decide allows a listing.
    pub arguments: Option<&'a Map<String, Value>>,
}

impl<'a> Access<'a> {
    /// The question of a call.
    pub fn call(
        identity: Option<&'a Identity>,
        name: &'a str,
        arguments: &'a Map<String, Value>,
    ) -> Self {
        Self {
            identity,
            name,
            arguments: Some(arguments),
        }
    }

    /// The question of a listing: may the caller see `name`?
    pub fn listing(identity: Option<&'a Identity>, name: &'a str) -> Self {
        Self {
            identity,
            name,
            arguments: None,
        }
    }
}

/// A rule of who may call a name. Implemented by the built-ins ([`Scopes`],
/// [`Claim`], [`Authenticated`], a manifest's [`PolicySpec`]), by closures through
/// [`policy_fn`] (or [`identity_fn`], over the identity alone), and by tuples of
/// policies (all must allow).
///
/// A policy must be cheap and must not block: it runs on every call of the names
/// it guards, and for every such name on every listing.
///
/// ```
/// use toolgraft::access::{Access, Denied, Missing, Policy};
/// use toolgraft::context::Identity;
///
/// /// Only subjects of the staff domain.
/// struct Staff;
/// impl Policy for Staff {
///     fn check(&self, access: &Access<'_>) -> Result<(), Denied> {
///         match access.identity {
///             Some(who) if who.subject().ends_with("@staff.example.com") => Ok(()),
///             _ => Err(Denied::new(Missing::Condition("a staff account".into()))),
///         }
///     }
/// }
/// let ann = Identity::new("ann@staff.example.com");
/// assert!(Staff.check(&Access::listing(Some(&ann), "x")).is_ok());
/// assert!(Staff.check(&Access::listing(None, "x")).is_err());
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an access policy",
    label = "not a `Policy`",
    note = "a policy is a `toolgraft::access::Policy` impl, a closure through `toolgraft::access::policy_fn(|access| ..)`, a built-in (`Scopes::all([..])`, `Claim::is(..)`), or a tuple of those (all must allow)"
)]
pub trait Policy: Send + Sync + 'static {
    /// Allows the call (or listing), or says what the caller lacks.
    fn check(&self, access: &Access<'_>) -> Result<(), Denied>;

    /// Whether [`check`](Policy::check) reads [`Access::arguments`]: an
    /// [`Authorize`](crate::ext::Authorize) layer over a typed tool turns the
    /// input into JSON for it only if so. Say `false` only for a policy that
    /// never reads them (the built-ins over the identity do).
    fn reads_arguments(&self) -> bool {
        true
    }
}

impl fmt::Debug for dyn Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Policy")
    }
}

impl<P: Policy + ?Sized> Policy for Arc<P> {
    fn check(&self, access: &Access<'_>) -> Result<(), Denied> {
        (**self).check(access)
    }

    fn reads_arguments(&self) -> bool {
        (**self).reads_arguments()
    }
}

impl<P: Policy + ?Sized> Policy for Box<P> {
    fn check(&self, access: &Access<'_>) -> Result<(), Denied> {
        (**self).check(access)
    }

    fn reads_arguments(&self) -> bool {
        (**self).reads_arguments()
    }
}

macro_rules! all_of {
    ($($p:ident),+) => {
        impl<$($p: Policy),+> Policy for ($($p,)+) {
            #[allow(non_snake_case)]
            fn check(&self, access: &Access<'_>) -> Result<(), Denied> {
                let ($($p,)+) = self;
                // As `check`: a refusal without step-up stands over one with.
                let mut step_up = None;
                $(match $p.check(access) {
                    Ok(()) => {}
                    Err(denied) if denied.step_up => {
                        step_up.get_or_insert(denied);
                    }
                    Err(hidden) => return Err(hidden),
                })+
                step_up.map_or(Ok(()), Err)
            }

            #[allow(non_snake_case)]
            fn reads_arguments(&self) -> bool {
                let ($($p,)+) = self;
                false $(|| $p.reads_arguments())+
            }
        }
    };
}

all_of!(A);
all_of!(A, B);
all_of!(A, B, C);
all_of!(A, B, C, D);

/// What a refused caller lacks, in words it may read: never the tool's doings,
/// never another caller's values.
///
/// ```
/// use toolgraft::access::Missing;
/// assert_eq!(Missing::Scopes(vec!["a".into(), "b".into()]).to_string(), "the scopes `a` and `b`");
/// assert_eq!(Missing::Claim("tenant".into()).to_string(), "a matching `tenant` claim");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Missing {
    /// An authenticated caller: the call came with no identity.
    Caller,
    /// Every one of these scopes (those the caller does not hold).
    Scopes(Vec<String>),
    /// One of these scopes.
    AnyScope(Vec<String>),
    /// The claim of that name, with a value the policy accepts (which is not said).
    Claim(String),
    /// A condition of the policy's own, in its words.
    Condition(String),
}

impl Missing {
    /// The scopes a new token would need, for a step-up challenge.
    pub fn scopes(&self) -> &[String] {
        match self {
            Self::Scopes(scopes) | Self::AnyScope(scopes) => scopes,
            _ => &[],
        }
    }
}

fn listed(words: &[String], join: &str) -> String {
    let quoted: Vec<String> = words.iter().map(|word| format!("`{word}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} {join} {last}", rest.join(", ")),
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Caller => f.write_str("an authenticated caller"),
            Self::Scopes(scopes) if scopes.len() == 1 => {
                write!(f, "the scope {}", listed(scopes, "and"))
            }
            Self::Scopes(scopes) => write!(f, "the scopes {}", listed(scopes, "and")),
            Self::AnyScope(scopes) => write!(f, "one of the scopes {}", listed(scopes, "or")),
            Self::Claim(name) => write!(f, "a matching `{name}` claim"),
            Self::Condition(words) => f.write_str(crate::quote::shorten(words).as_ref()),
        }
    }
}

/// A policy's refusal: what is [missing](Missing), and whether a new token could
/// bring it ([`step_up`](Denied::step_up)).
///
/// ```
/// use toolgraft::access::{Denied, Missing};
/// let denied = Denied::new(Missing::Scopes(vec!["admin".into()])).with_step_up();
/// assert!(denied.step_up);
/// assert_eq!(denied.to_string(), "the call needs the scope `admin`");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the call needs {missing}")]
#[non_exhaustive]
pub struct Denied {
    /// What the caller lacks.
    pub missing: Missing,
    /// Whether the caller may ask for a new token that brings it (a scope the
    /// authorization server may grant): the name is then listed to the caller,
    /// and a call is refused with the scopes to ask for, not hidden.
    pub step_up: bool,
}

impl Denied {
    /// A refusal for want of `missing`, with no step-up.
    pub fn new(missing: Missing) -> Self {
        Self {
            missing,
            step_up: false,
        }
    }

    /// The same, with a step-up: see [`Denied::step_up`].
    pub fn with_step_up(mut self) -> Self {
        self.step_up = true;
        self
    }
}

/// The policies that decide one name, in the order they are checked: a
/// tool's, then each branch's on the way up to the name, then the published
/// name's.
pub(crate) type Guards = Arc<[Arc<dyn Policy>]>;

/// The authorization checks of a bound name's layers, innermost first: what a
/// toolset checks before the call, and lists by, beside its own policies.
#[derive(Clone, Default)]
pub(crate) struct Checks(pub(crate) Arc<[Arc<dyn Policy>]>);

impl Checks {
    /// These checks, then `policy`.
    pub(crate) fn and(&self, policy: Option<&Arc<dyn Policy>>) -> Self {
        match policy {
            None => self.clone(),
            Some(policy) => Self(self.0.iter().chain([policy]).cloned().collect()),
        }
    }
}

impl fmt::Debug for Checks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Checks({})", self.0.len())
    }
}

/// Checks every guard: a refusal without step-up stands over one with (the
/// name is then hidden whatever else the caller could bring), else the first
/// refusal with a step-up.
pub(crate) fn check(guards: &[Arc<dyn Policy>], access: &Access<'_>) -> Result<(), Denied> {
    let mut step_up = None;
    for guard in guards {
        match guard.check(access) {
            Ok(()) => {}
            Err(denied) if denied.step_up => {
                step_up.get_or_insert(denied);
            }
            Err(hidden) => return Err(hidden),
        }
    }
    step_up.map_or(Ok(()), Err)
}

/// Whether a listing shows a name `guards` decide: allowed, or refused with a
/// step-up only (the caller may come back with what it lacks).
pub(crate) fn shows(guards: &[Arc<dyn Policy>], access: &Access<'_>) -> bool {
    match check(guards, access) {
        Ok(()) => true,
        Err(denied) => denied.step_up,
    }
}
