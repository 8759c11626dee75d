//! Binding from an operator's manifest: [`Toolset::bind_manifest`] binds base
//! tools, [`Toolset::apply_manifest`] changes bound ones; each tool on its own.

use std::sync::Arc;

use crate::bind::{self, Attached, Minted};
use crate::error::{BindError, listed, shorten};
use crate::limits::Limits;
use crate::name::Name;
use crate::runtime::Registry;
use crate::runtime::manifest::{ComboSpec, Manifest};
use crate::tool::Annotations;

use super::Toolset;
use super::base_tools::BaseTools;
use super::catalog::{ToolGroup, annotated};

impl Toolset {
    /// Binds every tool of `bases`, each with the combos `manifest` gives it
    /// ([`Manifest::combos_for`]: its entry under `"tools"`, else those of the
    /// `"match"` entries it meets, else none). Tools are independent; a tool that breaks a rule has
    /// none of its names bound (base included), and its key reports why; so does a
    /// manifest key that names no tool of `bases`. Returns each tool with its
    /// outcome: `bases` in order, then unknown manifest keys. A manifest with
    /// `"audiences"` sets the toolset's audiences first, its outcome under the
    /// key `audiences` before the tools'.
    ///
    /// The run-time counterpart of [`bind`](Toolset::bind), and a verb of its own
    /// for the same reason as [`apply_manifest`](Toolset::apply_manifest): an
    /// operator's file is many independent entries, so each tool gets its own
    /// outcome where `bind` is one all-or-nothing call.
    ///
    /// ```
    /// use toolgraft::runtime::manifest::Manifest;
    /// use toolgraft::{BindError, Registry, Tool, Toolset};
    /// use toolgraft::toolset::BaseTools;
    /// use toolgraft::ext::{Pool, Trace};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let tool = |name: &str| Tool::builder().name(name).description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build();
    /// let (shout, whisper) = (tool("shout")?, tool("whisper")?);
    /// let mut registry = Registry::new();
    /// registry.register(Trace)?.register(Pool::new(1)?)?;
    /// let manifest = Manifest::from_json(r#"{"tools": {"shout": ["trace"], "whisper": ["pool", "pool"]}}"#)?;
    ///
    /// let toolset = Toolset::new();
    /// let outcome = toolset.bind_manifest(&registry, &BaseTools::new().with(&shout).with(&whisper), &manifest);
    /// assert!(outcome[0].1.is_ok());
    /// assert!(matches!(outcome[1].1, Err(BindError::MultipleOfKind { .. })));
    /// assert_eq!(toolset.names(), ["shout", "shout_trace"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind_manifest(
        &self,
        registry: &Registry,
        bases: &BaseTools,
        manifest: &Manifest,
    ) -> Vec<(String, Result<(), BindError>)> {
        let mut outcome = self.set_audiences(manifest);
        outcome.extend(bases.tools.iter().map(|base| {
            let tool = &base.running.base;
            let combos = manifest.combos_for(tool, &base.running.presentation.annotations);
            let combos = &combos;
            let limits = self.limits();
            let said = manifest.annotations_of(tool).cloned().unwrap_or_default();
            let mut annotated_base = base.clone();
            annotated_base.running.presentation = annotated(&base.running.presentation, &said);
            let bound =
                build_combos(registry, &annotated_base, combos, &limits).and_then(|combos| {
                    // The tool's own hints stay its own: a later manifest that
                    // says none gets them back, not this manifest's.
                    let mut group = ToolGroup::new(base.clone(), combos);
                    group.annotate(&said);
                    if let Some(publish) = manifest.publish_of(tool) {
                        group.publish = publish.clone();
                    }
                    for (audience, publish) in manifest.publish_to_of(tool).unwrap_or(&[]) {
                        group
                            .publish_to
                            .insert(Name::new(audience)?, publish.clone());
                    }
                    self.install(
                        vec![(group, None)],
                        &[],
                        &manifest_rules(manifest, tool),
                        &[],
                    )
                    .map(drop)
                });
            (tool.as_str().to_owned(), bound)
        }));
        let offered: std::collections::HashSet<&str> = bases
            .tools
            .iter()
            .map(|base| base.running.base.as_str())
            .collect();
        for (key, _) in &manifest.tools {
            if !offered.contains(key.as_str()) {
                outcome.push((
                    key.clone(),
                    Err(BindError::UnknownTool {
                        tool: shorten(key).into_owned(),
                    }),
                ));
            }
        }
        outcome
    }

    /// Gives each tool of `manifest` exactly the manifest's combos. Tools are
    /// independent: one that breaks a rule keeps its previous binding, the others
    /// change. Returns each tool key with its outcome, in manifest order.
    ///
    /// A manifest with `"match"` speaks for every bound base tool: each one it
    /// does not name under `"tools"` gets exactly the combos of the entries it
    /// meets ([`Manifest::combos_for`], on its own hints; none detaches every
    /// combo) and its own hints back, as a named tool without `"annotations"`
    /// does; what it publishes and the policies on its names stay, since a
    /// `"match"` entry says neither. Their outcomes follow the named tools',
    /// by name. Without `"match"`, the tools it does not name are left as they
    /// are.
    ///
    /// Each tool's change is an [`edit`](Toolset::edit) that
    /// [`replace`](super::Edit::replace)s its combos; what sets this apart, and why it is
    /// a verb of its own, is the per-tool outcome: a manifest is an operator's
    /// whole file, and one broken entry must not hold back the others (as for
    /// [`bind_manifest`](Toolset::bind_manifest)). For all-or-nothing across
    /// tools, put the replacements in one edit. A manifest with `"audiences"`
    /// sets the toolset's audiences first, as
    /// [`bind_manifest`](Toolset::bind_manifest) does.
    ///
    /// ```
    /// use toolgraft::runtime::manifest::Manifest;
    /// use toolgraft::{BindError, Registry, Tool, Toolset};
    /// use toolgraft::tool::BaseTool;
    /// use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    ///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// let mut registry = Registry::new();
    /// registry.register(Trace)?;
    /// let manifest = Manifest::from_json(r#"{"tools": {"shout": ["trace"], "ghost": ["trace"]}}"#)?;
    /// let outcome = toolset.apply_manifest(&registry, &manifest);
    /// assert!(outcome[0].1.is_ok());
    /// assert!(matches!(outcome[1].1, Err(BindError::UnknownTool { .. })));
    /// assert_eq!(toolset.names(), ["shout", "shout_trace"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn apply_manifest(
        &self,
        registry: &Registry,
        manifest: &Manifest,
    ) -> Vec<(String, Result<(), BindError>)> {
        let mut outcome = self.set_audiences(manifest);
        outcome.extend(manifest.tools.iter().map(|(tool, combos)| {
            let said = manifest.annotations_of(tool).cloned().unwrap_or_default();
            let mut edit = self.edit().replace_annotated(registry, tool, combos, said);
            if let Some(publish) = manifest.publish_of(tool) {
                edit = edit.publish(tool, publish.clone());
            }
            // The manifest says the tool's whole access: what it no longer
            // names is open again.
            for name in self.ruled_names_of(tool) {
                edit = edit.open(&name);
            }
            for (name, policy) in manifest.access_of(tool) {
                edit = edit.authorize_for(tool, name, policy.clone());
            }
            if let Some(publish_to) = manifest.publish_to_of(tool) {
                // The tool's whole per-audience publication, as its access.
                for audience in self.audiences() {
                    edit = edit.unpublish_to(&audience, tool);
                }
                for (audience, publish) in publish_to {
                    edit = edit.publish_to(audience, tool, publish.clone());
                }
            }
            (tool.clone(), edit.commit())
        }));
        if !manifest.matches.is_empty() {
            outcome.extend(self.apply_matches(registry, manifest));
        }
        outcome
    }

    /// The `"match"` part of [`apply_manifest`](Self::apply_manifest): each bound
    /// base tool the manifest does not name, with the combos of the entries it
    /// meets.
    fn apply_matches(
        &self,
        registry: &Registry,
        manifest: &Manifest,
    ) -> Vec<(String, Result<(), BindError>)> {
        let unnamed: Vec<(Name, Annotations)> = self
            .read()
            .tools
            .values()
            .filter(|group| !manifest.names(&group.base.running.base))
            .map(|group| {
                (
                    group.base.running.base.clone(),
                    group.own.annotations.clone(),
                )
            })
            .collect();
        // Decided on the hints read here: a tool rebased meanwhile gets the
        // combos its old hints met, and the edit checks them on the new base.
        unnamed
            .into_iter()
            .map(|(tool, own)| {
                let combos = manifest.combos_for(&tool, &own);
                let edit =
                    self.edit()
                        .replace_annotated(registry, &tool, &combos, Annotations::default());
                (tool.as_str().to_owned(), edit.commit())
            })
            .collect()
    }

    /// Makes the manifest's `"audiences"` the toolset's, in its order (those
    /// it does not name taken away): the outcome under the key `audiences`,
    /// none when the manifest does not say.
    fn set_audiences(&self, manifest: &Manifest) -> Vec<(String, Result<(), BindError>)> {
        let Some(audiences) = &manifest.audiences else {
            return Vec::new();
        };
        // Taken away and defined again in the manifest's order: a caller is in
        // the first that allows it.
        let mut edit = self.edit();
        for audience in self.audiences() {
            edit = edit.remove_audience(&audience);
        }
        for (name, policy) in audiences {
            edit = edit.audience(name, policy.clone());
        }
        vec![("audiences".to_owned(), edit.commit())]
    }
}

/// The policies `manifest` puts on `tool`'s names, as an edit's rule changes.
fn manifest_rules(manifest: &Manifest, tool: &str) -> Vec<super::edit::RuleChange> {
    manifest
        .access_of(tool)
        .iter()
        .map(|(name, policy)| super::edit::RuleChange {
            name: name.clone(),
            policy: Some(Arc::new(policy.clone())),
            of_tool: Some(tool.to_owned()),
        })
        .collect()
}

/// The combos of one tool, built: each must differ from the others (a combo
/// listed twice is refused, whichever way the tool is bound or changed).
fn build_combos(
    registry: &Registry,
    base: &Minted,
    combos: &[ComboSpec],
    limits: &Limits,
) -> Result<Vec<Attached>, BindError> {
    let mut attached: Vec<Attached> = Vec::with_capacity(combos.len());
    for combo in combos {
        if attached
            .iter()
            .any(|other| bind::is_combo(&other.elements, combo))
        {
            return Err(BindError::AlreadyAttached {
                tool: base.running.base.clone(),
                combo: listed(&bind::combo_key(combo)),
            });
        }
        attached.push(registry.combo(base, combo, limits)?);
    }
    Ok(attached)
}
