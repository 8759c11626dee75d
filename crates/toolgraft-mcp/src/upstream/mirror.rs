//! A toolset kept in step with an upstream's tool list: each change applied
//! tool by tool through the toolset's one edit path, so a tool whose change a
//! rule refuses keeps its binding while the others move on.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use serde_json::Value;
use tokio::sync::watch;
use toolgraft::error::BindError;
use toolgraft::runtime::DynTool;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::tool::BaseTool;
use toolgraft::toolset::{BaseTools, WeakToolset};
use toolgraft::{Registry, Toolset};

use super::error::Refused;
use super::{Inner, Upstream};

/// What one listing of the upstream did to the toolset.
#[derive(Debug)]
#[non_exhaustive]
pub struct Resync {
    /// Counts the listings: 0 is the first binding.
    pub listing: u64,
    /// Each tool the listing bound, changed or removed, with its outcome (a
    /// refused change leaves the tool as it was bound), in name order; then
    /// the manifest's keys in the upstream's namespace that name no tool of
    /// it (refused as unknown).
    pub outcomes: Vec<(String, Result<(), BindError>)>,
    /// The upstream's tools not taken at all (see [`Refused`]).
    pub refused: Vec<Refused>,
}

/// Follows an upstream for a toolset (see [`Upstream::mirror`]): reads what
/// each listing did. Dropping it stops nothing: the following ends when the
/// upstream or the toolset is dropped.
#[derive(Clone, Debug)]
pub struct Mirror {
    reports: watch::Receiver<Arc<Resync>>,
}

impl Mirror {
    /// What the latest listing did.
    pub fn latest(&self) -> Arc<Resync> {
        self.reports.borrow().clone()
    }

    /// Waits for the next listing to be applied, and returns what it did.
    /// `None` once the following has ended.
    pub async fn next(&mut self) -> Option<Arc<Resync>> {
        self.reports.changed().await.ok()?;
        Some(self.reports.borrow_and_update().clone())
    }
}

/// The bound tools of one upstream, with what the upstream said of each when
/// it was bound (to tell a changed tool from an unchanged one).
type Bound = BTreeMap<String, Value>;

impl Upstream {
    /// Binds the upstream's tools into `toolset`, each with the combos
    /// `manifest` gives it (by name, or by its annotations), and keeps them
    /// in step: on each `notifications/tools/list_changed` and each reconnect
    /// the upstream is listed again, and
    ///
    /// * a new tool is bound as the manifest says,
    /// * a tool whose schemas, annotations or description changed is rebased
    ///   ([`Edit::rebase`](toolgraft::toolset::Edit::rebase)) with the combos
    ///   the manifest gives it now (its `"match"` entries read its new hints),
    ///   and if a rule refuses them (a cache on a tool no longer read-only)
    ///   it keeps its old binding and the refusal is reported,
    /// * a tool no longer listed is unbound, its branches with it.
    ///
    /// The manifest's `"audiences"` are not applied here (they are the
    /// toolset's, not a tool's). The first binding's outcomes are
    /// [`Mirror::latest`] at once.
    pub fn mirror(&self, toolset: &Toolset, registry: Registry, manifest: Manifest) -> Mirror {
        let mut manifest = manifest;
        manifest.audiences = None;
        let mut bound = Bound::new();
        let first = self.apply(toolset, &registry, &manifest, &mut bound, 0);
        let (reports, receiver) = watch::channel(Arc::new(first));
        let follow = Follow {
            upstream: Arc::downgrade(&self.inner),
            toolset: toolset.downgrade(),
            registry,
            manifest,
            bound,
            reports,
        };
        tokio::spawn(follow.run(self.inner.listener.changes()));
        Mirror { reports: receiver }
    }

    /// Brings `toolset` to the upstream's last listing, from `bound`.
    fn apply(
        &self,
        toolset: &Toolset,
        registry: &Registry,
        manifest: &Manifest,
        bound: &mut Bound,
        listing: u64,
    ) -> Resync {
        let listed = self.lock();
        let now: BTreeMap<String, (&DynTool, Value)> = listed
            .bases
            .iter()
            .map(|(base, said)| {
                let said = serde_json::to_value(said).unwrap_or(Value::Null);
                (base.spec().name.to_string(), (base, said))
            })
            .collect();
        let mut outcomes = Vec::new();
        let mut fresh = BaseTools::new();
        for (name, (base, said)) in &now {
            match bound.get(name) {
                None => {
                    fresh.add(*base);
                }
                Some(before) if before != said => {
                    // What the manifest gives the tool now: a `match` entry
                    // may take it in or leave it by its new hints.
                    let hints = &base.spec().presentation.annotations;
                    let combos = manifest.combos_for(name, hints);
                    let outcome = toolset
                        .edit()
                        .rebase(registry, *base)
                        .replace(registry, name, &combos)
                        .commit();
                    if outcome.is_ok() {
                        bound.insert(name.clone(), said.clone());
                    }
                    outcomes.push((name.clone(), outcome));
                }
                Some(_) => {}
            }
        }
        let gone: Vec<String> = bound
            .keys()
            .filter(|name| !now.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            let outcome = toolset.edit().unbind(&name).commit();
            bound.remove(&name);
            outcomes.push((name, outcome));
        }
        let prefix = format!("{}_", self.namespace());
        let namespaced = !self.namespace().is_empty();
        for (name, outcome) in toolset.bind_manifest(registry, &fresh, manifest) {
            // The manifest's keys of other tools (the server's own, another
            // upstream's) are theirs to report; its keys in this namespace
            // that name no tool of it are this upstream's.
            let ours = now.contains_key(&name)
                || (namespaced && name.starts_with(&prefix) && !bound.contains_key(&name));
            if !ours {
                continue;
            }
            if outcome.is_ok()
                && let Some((_, said)) = now.get(&name)
            {
                bound.insert(name.clone(), said.clone());
            }
            outcomes.push((name, outcome));
        }
        outcomes.sort_by(|(a, _), (b, _)| a.cmp(b));
        for (tool, outcome) in &outcomes {
            if let Err(error) = outcome {
                tracing::warn!(namespace = %self.namespace(), %tool, %error, "an upstream tool's change was refused");
            }
        }
        Resync {
            listing,
            outcomes,
            refused: listed.refused.clone(),
        }
    }
}

/// The following of one upstream for one toolset, while both live.
struct Follow {
    upstream: Weak<Inner>,
    toolset: WeakToolset,
    registry: Registry,
    manifest: Manifest,
    bound: Bound,
    reports: watch::Sender<Arc<Resync>>,
}

impl Follow {
    async fn run(mut self, mut changes: watch::Receiver<u64>) {
        let mut listing = 0;
        while changes.changed().await.is_ok() {
            // The listing holds neither the upstream nor the toolset: dropped
            // meanwhile, they go (and the upstream's connection with it, which
            // ends the listing); one never answered gives up at the connect
            // timeout.
            let Some(inner) = self.upstream.upgrade() else {
                return;
            };
            let (fetch, stop, bound) = {
                let upstream = Upstream { inner };
                let inner = &upstream.inner;
                (
                    upstream.fetch(),
                    inner.forwarder.stop.clone(),
                    inner.config.connect_timeout(),
                )
            };
            let listed = tokio::select! {
                () = stop.cancelled() => return,
                listed = tokio::time::timeout(bound, fetch) => listed,
            };
            let (Some(inner), Some(toolset)) = (self.upstream.upgrade(), self.toolset.upgrade())
            else {
                return;
            };
            let upstream = Upstream { inner };
            match listed {
                Ok(Ok(listed)) => upstream.keep(&listed),
                Ok(Err(problem)) => {
                    tracing::warn!(namespace = %upstream.namespace(), %problem, "the upstream could not be listed again");
                    continue;
                }
                Err(_) => {
                    tracing::warn!(namespace = %upstream.namespace(), "the upstream did not answer `tools/list` within `connect_timeout_ms`");
                    continue;
                }
            }
            listing += 1;
            let report = upstream.apply(
                &toolset,
                &self.registry,
                &self.manifest,
                &mut self.bound,
                listing,
            );
            self.reports.send_replace(Arc::new(report));
            drop((upstream, toolset));
            // An upstream announcing changes in a loop is listed at most this
            // often; the changes meanwhile are one.
            tokio::time::sleep(RELIST_EVERY).await;
        }
    }
}

/// The shortest time between two listings of one upstream.
const RELIST_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
