//! [`PolicySpec`]: a policy as a manifest writes it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::builtin::{check_claim, check_scopes};
use super::{Access, Authenticated, Cel, Denied, Policy};

/// A policy in a manifest's `[access]` table (or an `authorize` element's config):
/// the caller must be authenticated, hold every scope of `scopes`, one of
/// `any_scope` (when given), and every claim of `claims` (equal, or held by a
/// list claim), and, with toolgraft's `cel` feature, satisfy `when`: a [CEL
/// expression](Cel) over the caller, the name called and the arguments. `step_up`
/// lets a caller short of scopes see the name and be told which to ask for.
///
/// | field | meaning |
/// |---|---|
/// | `scopes` | every one of these scopes |
/// | `any_scope` | one of these scopes |
/// | `claims` | each claim equal, or held by a list claim |
/// | `when` | a [CEL expression](Cel) that must give `true` (the `cel` feature) |
/// | `step_up` | a caller short of scopes is told which to ask for |
///
/// A claim or a `when` that refuses hides the name (checked before the scopes,
/// so a caller of another tenant is never offered a step-up).
///
/// ```
/// use toolgraft::access::{Access, Policy, PolicySpec};
/// use toolgraft::context::Identity;
/// let spec: PolicySpec = toml::from_str(r#"
///     scopes = ["notes:write"]
///     claims = { tenant = "acme" }
///     step_up = true
/// "#)?;
/// let alice = Identity::new("alice").with_scopes(["notes:write"]).with_claim("tenant", "acme");
/// assert!(spec.check(&Access::listing(Some(&alice), "write_note")).is_ok());
/// assert!(spec.check(&Access::listing(None, "write_note")).is_err());
/// # Ok::<(), toml::de::Error>(())
/// ```
///
/// With `when` (the `cel` feature): here the tenant's callers may search, at most
/// 100 results at a time unless they hold `search:bulk`.
///
/// ```
/// # #[cfg(feature = "cel")] {
/// use serde_json::json;
/// use toolgraft::access::{Access, Policy, PolicySpec};
/// use toolgraft::context::Identity;
/// let spec: PolicySpec = toml::from_str(r#"
///     claims = { tenant = "acme" }
///     when = 'arguments.limit <= 100 || "search:bulk" in scopes'
/// "#)?;
/// let alice = Identity::new("alice").with_claim("tenant", "acme");
/// let args = |limit: i64| json!({"limit": limit}).as_object().cloned().unwrap();
/// assert!(spec.check(&Access::call(Some(&alice), "search", &args(20))).is_ok());
/// assert!(spec.check(&Access::call(Some(&alice), "search", &args(500))).is_err());
/// let bulk = alice.clone().with_scopes(["search:bulk"]);
/// assert!(spec.check(&Access::call(Some(&bulk), "search", &args(500))).is_ok());
/// # }
/// # Ok::<(), toml::de::Error>(())
/// ```
///
/// Without the feature, a `when` is refused where the policy is read, saying to
/// enable it:
///
/// ```
/// # #[cfg(not(feature = "cel"))] {
/// use toolgraft::access::PolicySpec;
/// let refused = toml::from_str::<PolicySpec>("when = 'true'").unwrap_err();
/// assert!(refused.to_string().contains("toolgraft's `cel` feature"));
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicySpec {
    /// Every one of these scopes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// At least one of these scopes (ignored when empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub any_scope: Vec<String>,
    /// Each claim equal to its value, or a list claim holding it.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub claims: Map<String, Value>,
    /// A [CEL expression](Cel) that must give `true`; written as a string.
    /// Without toolgraft's `cel` feature a policy that has one is refused
    /// where it is read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<Cel>,
    /// A caller short of scopes sees the name and is told which to ask for.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub step_up: bool,
}

impl Policy for PolicySpec {
    fn check(&self, access: &Access<'_>) -> Result<(), Denied> {
        Authenticated.check(access)?;
        // Claims first: a caller of another tenant is refused as hidden, even
        // where a scope it lacks would allow a step-up.
        for (name, value) in &self.claims {
            check_claim(access, name, value)?;
        }
        if let Some(when) = &self.when {
            when.check(access)?;
        }
        check_scopes(access, &self.scopes, true, self.step_up)?;
        check_scopes(access, &self.any_scope, false, self.step_up)?;
        Ok(())
    }

    fn reads_arguments(&self) -> bool {
        self.when.as_ref().is_some_and(Policy::reads_arguments)
    }
}
