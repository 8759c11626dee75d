//! Reading a tool's combos, and changing several of them in one atomic step (what
//! an authoring API needs beside `attach`, `detach` and `replace`).

use crate::bind;
use crate::error::{BindError, listed};
use crate::runtime::Registry;
use crate::runtime::manifest::ComboSpec;

use super::Toolset;

impl Toolset {
    /// The combos attached to the bound base tool `tool`, in the order they were
    /// attached, as a manifest writes them (an empty config is no config). A
    /// branch or an unknown name is refused, as for a change.
    ///
    /// ```
    /// use toolgraft::runtime::manifest::ElementSpec;
    /// use toolgraft::{BindError, Registry, Tool, Toolset};
    /// use toolgraft::ext::{Cache, Trace};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// let shout = Tool::builder().name("shout").description("Return the text.")
    ///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind_tool(&shout)?;
    /// let mut registry = Registry::new();
    /// registry.register(Trace)?.register_configurable(Cache::default())?;
    /// let cached = vec![ElementSpec::named("trace"), ElementSpec::configured("cache", serde_json::json!({"capacity": 8}))];
    /// toolset.attach(&registry, "shout", &cached)?;
    /// assert_eq!(toolset.combos("shout")?, [cached]);
    /// assert!(matches!(toolset.combos("shout_trace"), Err(BindError::NotABase { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn combos(&self, tool: &str) -> Result<Vec<ComboSpec>, BindError> {
        let group = self.group(tool)?;
        Ok(group
            .combos
            .into_iter()
            .map(|attached| attached.elements)
            .collect())
    }

    /// Detaches every combo of `remove` from the bound base tool `tool` and
    /// attaches every combo of `add`, as one change: all of it or, on any error,
    /// none of it (the previous binding stays, callable).
    ///
    /// Checked in this order: the tool (unknown, or a branch); membership (each
    /// removed combo must be attached, each added one must not be, after the
    /// removals, nor be listed twice); then each added combo through the binding
    /// engine, and the tool's names as a whole. Typed combos stay as they are
    /// unless removed.
    ///
    /// ```
    /// use toolgraft::runtime::manifest::ElementSpec;
    /// use toolgraft::{BindError, Registry, Tool, Toolset};
    /// use toolgraft::ext::{Pool, Proxy, Trace};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// let shout = Tool::builder().name("shout").description("Return the text.")
    ///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind_tool(&shout)?;
    /// let mut registry = Registry::new();
    /// registry.register(Trace)?.register(Pool::new(1)?)?.register(Proxy::allow(["eu"]))?;
    /// let trace = vec![ElementSpec::named("trace")];
    /// let pool = vec![ElementSpec::named("pool")];
    /// toolset.edit(&registry, "shout", &[], &[trace.clone()])?;
    ///
    /// // Swap `trace` for `pool` in one step.
    /// toolset.edit(&registry, "shout", &[trace.clone()], &[pool.clone()])?;
    /// assert_eq!(toolset.names(), ["shout", "shout_pool"]);
    ///
    /// // A refused combo refuses the whole change: `pool` stays attached.
    /// let outside = vec![ElementSpec::named("pool"), ElementSpec::named("proxy")];
    /// let err = toolset.edit(&registry, "shout", &[pool], &[outside]).unwrap_err();
    /// assert_eq!(err.rule(), Some(toolgraft::rulebook::Rule::LocalityInsideRelocation));
    /// assert_eq!(toolset.names(), ["shout", "shout_pool"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn edit(
        &self,
        registry: &Registry,
        tool: &str,
        remove: &[ComboSpec],
        add: &[ComboSpec],
    ) -> Result<(), BindError> {
        self.change(tool, |group| {
            let base = group.base.running.base.clone();
            let mut kept = group.combos.clone();
            for combo in remove {
                let key = bind::combo_key(combo);
                match kept.iter().position(|attached| attached.elements == key) {
                    Some(at) => {
                        kept.remove(at);
                    }
                    None => {
                        let attached: Vec<String> = group
                            .combos
                            .iter()
                            .map(|attached| format!("[{}]", listed(&attached.elements)))
                            .collect();
                        return Err(BindError::NotAttached {
                            tool: base,
                            combo: listed(&key),
                            attached: if attached.is_empty() {
                                "none".to_owned()
                            } else {
                                attached.join(", ")
                            },
                        });
                    }
                }
            }
            let mut keys: Vec<ComboSpec> = kept.iter().map(|a| a.elements.clone()).collect();
            for combo in add {
                let key = bind::combo_key(combo);
                if keys.contains(&key) {
                    return Err(BindError::AlreadyAttached {
                        tool: base,
                        combo: listed(&key),
                    });
                }
                keys.push(key);
            }
            let limits = self.limits();
            for combo in add {
                kept.push(registry.combo(&group.base, combo, &limits)?);
            }
            group.combos = kept;
            Ok(())
        })
    }
}
