//! [`PolicySpec`]: a policy as a manifest writes it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::builtin::{check_claim, check_scopes};
use super::{Access, Authenticated, Denied, Policy};

/// A policy in a manifest's `[access]` table (or an `authorize` element's config):
/// the caller must be authenticated, hold every scope of `scopes`, one of
/// `any_scope` (when given), and every claim of `claims` (equal, or held by a
/// list claim). `step_up` lets a caller short of scopes see the name and be told
/// which to ask for.
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
        check_scopes(access, &self.scopes, true, self.step_up)?;
        check_scopes(access, &self.any_scope, false, self.step_up)?;
        Ok(())
    }

    fn reads_arguments(&self) -> bool {
        false
    }
}
