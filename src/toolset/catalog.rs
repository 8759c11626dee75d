//! The catalog: every bound name with the entry that serves it, each base tool
//! with its combos, and the published names, shared by a toolset's clones.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rustc_hash::FxBuildHasher;

use crate::access::{Access, Guards, Policy};
use crate::bind::{Attached, Entry, Minted, Publish};
use crate::context::Identity;
use crate::limits::Limits;
use crate::name::Name;
use crate::tool::{Annotations, Presentation};

/// Bound names to what they bind. Every by-name call hashes the name once, and
/// SipHash's flooding resistance buys nothing here: the keys are the bound
/// names, chosen by whoever binds, and a caller's unknown name only misses.
pub(super) type ByName<V> = HashMap<Name, V, FxBuildHasher>;

pub(super) struct Catalog {
    /// Each base tool: its base, its combos, and every name it binds.
    pub(super) tools: BTreeMap<Name, ToolGroup>,
    pub(super) entries: ByName<Arc<Entry>>,
    /// Each published name with the entry that serves it ([`Publish`]).
    pub(super) published: ByName<Arc<Entry>>,
    /// The access policies, by the name each is on: a bound name (a base
    /// tool's covers all its names) or a published one.
    pub(super) rules: BTreeMap<Name, Ruled>,
    /// What decides each bound name a call names, from `rules`; a name
    /// without policies is absent.
    pub(super) guards_bound: ByName<Guards>,
    /// The same for each published name.
    pub(super) guards_published: ByName<Guards>,
    /// The audiences, in the order a caller is matched against them: each
    /// with what it is published, in place of `published`.
    pub(super) audiences: Vec<Audience>,
    /// Counts changes to the bound names, for whoever serves the list.
    pub(super) changes: tokio::sync::watch::Sender<u64>,
    pub(super) limits: Limits,
    /// The last generation given to a group ([`ToolGroup::generation`]):
    /// one counter for every tool, so a tool unbound and bound again never
    /// has a generation an edit prepared before saw.
    pub(super) generations: u64,
}

impl Default for Catalog {
    fn default() -> Self {
        Self {
            tools: BTreeMap::new(),
            entries: HashMap::default(),
            published: HashMap::default(),
            rules: BTreeMap::new(),
            guards_bound: HashMap::default(),
            guards_published: HashMap::default(),
            audiences: Vec::new(),
            changes: tokio::sync::watch::Sender::new(0),
            limits: Limits::default(),
            generations: 0,
        }
    }
}

/// A policy on a name, with the base tool the name was of when it was set: it
/// decides the name only while the name is that tool's, so a policy left
/// behind by a detached branch never lands on another tool bound later under
/// its name, and comes back with the branch when the tool binds it again. An
/// unbound tool's policies stay the same way ([`Edit::unbind`](super::Edit::unbind)):
/// a tool that goes and comes back (an upstream server's, restarting) comes
/// back guarded, never open without a word.
#[derive(Clone)]
pub(super) struct Ruled {
    pub(super) owner: Name,
    pub(super) policy: Arc<dyn Policy>,
}

/// A group of callers shown a publication of their own: the first audience
/// whose policy allows a caller is its audience ([`Edit::audience`](super::Edit::audience)).
pub(super) struct Audience {
    pub(super) name: Name,
    pub(super) policy: Arc<dyn Policy>,
    /// Its published names with the entries that serve them.
    pub(super) published: ByName<Arc<Entry>>,
    /// What decides each of them, as `guards_published` does for everyone.
    pub(super) guards: ByName<Guards>,
}

/// One base tool with its attached combos.
#[derive(Clone)]
pub(crate) struct ToolGroup {
    pub base: Minted,
    /// The base tool's own presentation, before an operator's hints.
    pub own: Arc<Presentation>,
    /// The hints an operator set for it ([`annotate`](Self::annotate)), kept
    /// apart from `own` so that a new base ([`Edit::rebase`](super::Edit::rebase))
    /// gets them too.
    pub said: Annotations,
    pub combos: Vec<Attached>,
    pub publish: Publish,
    /// What it publishes to an audience in place of `publish`, by audience.
    pub publish_to: BTreeMap<Name, Publish>,
    pub(super) names: Vec<Name>,
    /// New on every change (from [`Catalog::generations`]), so a change
    /// prepared outside the lock can tell whether the tool moved on meanwhile.
    pub(super) generation: u64,
}

impl ToolGroup {
    /// Sets the base's hints to its own with each one `said` replacing its own
    /// (a manifest's `"annotations"`; none said is the tool's own again).
    pub(crate) fn annotate(&mut self, said: &Annotations) {
        self.base.running.presentation = annotated(&self.own, said);
        self.said = said.clone();
    }

    /// Puts `base` in place of the tool's base (same name), with the hints
    /// said for the tool over its own.
    pub(crate) fn rebase(&mut self, base: Minted) {
        self.own = base.running.presentation.clone();
        self.base = base;
        let said = std::mem::take(&mut self.said);
        self.annotate(&said);
    }

    /// A tool not bound yet, with its combos.
    pub(crate) fn new(base: Minted, combos: Vec<Attached>) -> Self {
        Self {
            own: base.running.presentation.clone(),
            base,
            combos,
            said: Annotations::default(),
            publish: Publish::default(),
            publish_to: BTreeMap::new(),
            names: Vec::new(),
            generation: 0,
        }
    }
}

/// `own` with each hint `said` replacing its own.
pub(super) fn annotated(own: &Arc<Presentation>, said: &Annotations) -> Arc<Presentation> {
    if said.is_empty() {
        return own.clone();
    }
    Arc::new(Presentation {
        annotations: own.annotations.overridden_by(said),
        ..Presentation::clone(own)
    })
}

impl Catalog {
    /// A generation no group had before.
    pub(super) fn next_generation(&mut self) -> u64 {
        self.generations += 1;
        self.generations
    }

    /// `guards_bound` and `guards_published` from `rules` and the layers'
    /// checks, for the names as they are: a bound name is decided by its base
    /// tool's policy, its own, then its `authorize` layers'; a published name by
    /// its bound name's, then its own.
    pub(super) fn guard(&mut self) {
        self.guards_bound.clear();
        self.guards_published.clear();
        let checked = self
            .entries
            .values()
            .any(|entry| !entry.checks.0.is_empty());
        if self.rules.is_empty() && !checked {
            for audience in &mut self.audiences {
                audience.guards.clear();
            }
            return;
        }
        let rules = &self.rules;
        let rule = |name: &Name, base: &Name| {
            rules
                .get(name)
                .filter(|ruled| ruled.owner == *base)
                .map(|ruled| &ruled.policy)
        };
        let (tools, entries) = (&self.tools, &self.entries);
        // The tool's policy, each branch's it is built on (innermost first), the
        // name's own, then its layers' checks.
        let of_bound = |entry: &Entry| -> Vec<Arc<dyn Policy>> {
            let info = &entry.info;
            let base = (info.base != info.name)
                .then(|| rule(&info.base, &info.base))
                .flatten();
            let mut below: Vec<(usize, &Arc<dyn Policy>)> = tools
                .get(&info.base)
                .into_iter()
                .flat_map(|group| &group.names)
                .filter(|name| **name != info.name && **name != info.base)
                .filter_map(|name| Some((entries.get(name)?, rule(name, &info.base)?)))
                .filter(|(under, _)| {
                    let chain = &under.info.chain;
                    chain.len() < info.chain.len() && info.chain.starts_with(chain)
                })
                .map(|(under, rule)| (under.info.chain.len(), rule))
                .collect();
            below.sort_by_key(|(depth, _)| *depth);
            base.into_iter()
                .chain(below.into_iter().map(|(_, rule)| rule))
                .chain(rule(&info.name, &info.base))
                .chain(entry.checks.0.iter())
                .cloned()
                .collect()
        };
        for (name, entry) in &self.entries {
            let guards = of_bound(entry);
            if !guards.is_empty() {
                self.guards_bound.insert(name.clone(), guards.into());
            }
        }
        let of_published = |published: &ByName<Arc<Entry>>| -> ByName<Guards> {
            let mut guarded = ByName::default();
            for (name, entry) in published {
                let mut guards = of_bound(entry);
                if *name != entry.info.name {
                    guards.extend(rule(name, &entry.info.base).cloned());
                }
                if !guards.is_empty() {
                    guarded.insert(name.clone(), guards.into());
                }
            }
            guarded
        };
        self.guards_published = of_published(&self.published);
        for audience in &mut self.audiences {
            audience.guards = of_published(&audience.published);
        }
    }

    /// The published names a caller `identity` is shown (its audience's, or
    /// everyone's), with what decides each.
    pub(super) fn view(
        &self,
        identity: Option<&Identity>,
    ) -> (&ByName<Arc<Entry>>, &ByName<Guards>) {
        match self.audience_of(identity) {
            Some(audience) => (&audience.published, &audience.guards),
            None => (&self.published, &self.guards_published),
        }
    }

    /// Whether a caller `identity` is shown the published name `name`: it is
    /// published to it, and its policies allow the caller or refuse it with a
    /// step-up only.
    pub(super) fn shows(&self, identity: Option<&Identity>, name: &str) -> bool {
        let (published, guards) = self.view(identity);
        shown_in(published, guards, identity, name)
    }

    /// The audience of a caller `identity`: the first whose policy allows it.
    pub(super) fn audience_of(&self, identity: Option<&Identity>) -> Option<&Audience> {
        self.audiences.iter().find(|audience| {
            audience
                .policy
                .check(&Access::listing(identity, &audience.name))
                .is_ok()
        })
    }
}

/// Whether `name` is shown to a caller `identity` of the view `published`,
/// `guards` ([`Catalog::view`]): one question for a lookup and for a scan.
pub(super) fn shown_in(
    published: &ByName<Arc<Entry>>,
    guards: &ByName<Guards>,
    identity: Option<&Identity>,
    name: &str,
) -> bool {
    published.contains_key(name)
        && guards
            .get(name)
            .is_none_or(|guards| crate::access::shows(guards, &Access::listing(identity, name)))
}
