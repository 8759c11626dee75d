//! The one install path: a change of some tools' groups, planned outside the
//! lock and swapped into the catalog in one step, all of it or none.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use crate::bind::{self, Entry};
use crate::error::{BindError, shorten};
use crate::limits::Limits;
use crate::name::Name;

use super::Toolset;
use super::catalog::{Audience, Catalog, ToolGroup};
use super::edit::{AudienceChange, RuleChange};

/// Whether a change prepared outside the lock must be prepared again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    Yes,
    No,
}

impl Toolset {
    /// A copy of the group of base tool `tool`, for a change to work on; a branch
    /// or an unknown name is refused.
    pub(crate) fn group(&self, tool: &str) -> Result<ToolGroup, BindError> {
        let catalog = self.read();
        if let Some(group) = catalog.tools.get(tool) {
            return Ok(group.clone());
        }
        match catalog.entries.get(tool) {
            Some(entry) => Err(BindError::NotABase {
                name: entry.info.name.clone(),
                base: entry.info.base.clone(),
            }),
            None => Err(BindError::UnknownTool {
                tool: shorten(tool).into_owned(),
            }),
        }
    }

    /// Plans each group and swaps them all in for their tools' names, and takes
    /// each tool of `unbound` out with all its names, in one step: all of it or
    /// none. A group with an expected generation replaces its tool only if the
    /// tool is still at that generation, and an unbound tool goes only if it is
    /// still at its own (else the change is retried by the caller); a group
    /// without one binds a tool that is not bound yet.
    pub(crate) fn install(
        &self,
        changes: Vec<(ToolGroup, Option<u64>)>,
        unbound: &[(Name, u64)],
        rules: &[RuleChange],
        audiences: &[AudienceChange],
    ) -> Result<Retry, BindError> {
        let limit = self.limits().max_name_len();
        let mut planned = Vec::with_capacity(changes.len());
        for (group, expected) in changes {
            let entries = bind::plan_tool(&group.base, &group.combos)?;
            let tool = group.base.running.base.clone();
            for entry in &entries {
                crate::bind::rules::name_length(&tool, &entry.info.name, &entry.info.chain, limit)?;
            }
            planned.push((group, expected, entries));
        }
        let mut catalog = self.catalog.write().unwrap_or_else(PoisonError::into_inner);
        for (tool, expected) in unbound {
            if catalog.tools.get(tool).map(|group| group.generation) != Some(*expected) {
                return Ok(Retry::Yes);
            }
        }
        // The tools the change touches: an unbound one's names are free, and
        // bind nothing after it.
        let changed: Vec<&Name> = planned
            .iter()
            .map(|(group, ..)| &group.base.running.base)
            .chain(unbound.iter().map(|(tool, _)| tool))
            .collect();
        let mut minted: HashMap<&Name, &Name> = HashMap::new();
        for (group, expected, entries) in &planned {
            let tool = &group.base.running.base;
            let current = catalog.tools.get(tool).map(|current| current.generation);
            match (current, expected) {
                (Some(_), None) => return Err(BindError::AlreadyBound { tool: tool.clone() }),
                (Some(now), Some(expected)) if now != *expected => return Ok(Retry::Yes),
                (None, Some(_)) => return Ok(Retry::Yes),
                _ => {}
            }
            for entry in entries {
                let name = &entry.info.name;
                let owner = catalog
                    .entries
                    .get(name)
                    .map(|taken| &taken.info.base)
                    .filter(|owner| !changed.contains(owner));
                let owner = owner.or_else(|| minted.get(name).copied());
                if let Some(owner) = owner.filter(|owner| *owner != tool) {
                    return Err(BindError::NameTaken {
                        tool: tool.clone(),
                        name: name.clone(),
                        owner: owner.clone(),
                    });
                }
                minted.insert(name, tool);
            }
        }
        drop((minted, changed));
        let (defined, removed) = audiences_after(&catalog, audiences)?;
        for (group, ..) in &mut planned {
            group
                .publish_to
                .retain(|audience, _| !removed.contains(audience));
            if let Some(audience) = group
                .publish_to
                .keys()
                .find(|audience| !defined.iter().any(|(name, _)| name == *audience))
            {
                return Err(BindError::UnknownAudience {
                    tool: group.base.running.base.clone(),
                    audience: audience.to_string(),
                });
            }
        }
        let changed: Vec<&Name> = planned
            .iter()
            .map(|(group, ..)| &group.base.running.base)
            .chain(unbound.iter().map(|(tool, _)| tool))
            .collect();
        // Each published name's tool, across every publication: an alias one
        // audience is published is the tool's it is everyone's (or another
        // audience's), so the policies on it, which are that tool's, decide
        // it whoever calls it.
        let mut across = HashMap::new();
        let published = publish_all(
            &catalog,
            &changed,
            &planned,
            catalog.limits,
            None,
            &mut across,
        )?;
        let mut published_to = Vec::with_capacity(defined.len());
        for (audience, _) in &defined {
            let names = publish_all(
                &catalog,
                &changed,
                &planned,
                catalog.limits,
                Some(audience),
                &mut across,
            )
            .map_err(|error| BindError::InAudience {
                audience: audience.clone(),
                error: Box::new(error),
            })?;
            published_to.push(names);
        }
        let every_published: Vec<(Name, Name)> = published
            .iter()
            .chain(published_to.iter().flatten())
            .cloned()
            .collect();
        let new_rules = ruled(&catalog, &changed, &planned, &every_published, rules)?;
        guarded_stay(
            &catalog,
            &changed,
            new_rules.as_ref(),
            &planned,
            &every_published,
        )?;
        drop((changed, every_published));
        // What is replaced is dropped after the lock is released: dropping it runs
        // extensions' and bodies' `Drop`, which may call back into the toolset.
        let (mut replaced, mut old_groups) = (Vec::new(), Vec::new());
        for (tool, _) in unbound {
            let old = catalog.tools.remove(tool);
            for name in old.iter().flat_map(|old| &old.names) {
                replaced.extend(catalog.entries.remove(name));
            }
            old_groups.push(old);
        }
        for (mut group, _, entries) in planned {
            let tool = group.base.running.base.clone();
            let old = catalog.tools.remove(&tool);
            for name in old.iter().flat_map(|old| &old.names) {
                replaced.extend(catalog.entries.remove(name));
            }
            group.names = entries
                .iter()
                .map(|entry| entry.info.name.clone())
                .collect();
            group.generation = catalog.next_generation();
            for entry in entries {
                catalog
                    .entries
                    .insert(entry.info.name.clone(), Arc::new(entry));
            }
            catalog.tools.insert(tool, group);
            old_groups.push(old);
        }
        let entry = |name: &Name| catalog.entries.get(name).cloned();
        let serving = |names: Vec<(Name, Name)>| {
            names
                .into_iter()
                .filter_map(|(name, bound)| Some((name, entry(&bound)?)))
                .collect()
        };
        let published = serving(published);
        let audiences = defined
            .into_iter()
            .zip(published_to)
            .map(|((name, policy), names)| Audience {
                name,
                policy,
                published: serving(names),
                guards: Default::default(),
            })
            .collect();
        catalog.published = published;
        catalog.audiences = audiences;
        if !removed.is_empty() {
            // What the tools the change left published to a removed audience
            // goes with it; an edit prepared before sees the tool moved on.
            let Catalog {
                tools, generations, ..
            } = &mut *catalog;
            for group in tools.values_mut() {
                let before = group.publish_to.len();
                group
                    .publish_to
                    .retain(|audience, _| !removed.contains(audience));
                if group.publish_to.len() != before {
                    *generations += 1;
                    group.generation = *generations;
                }
            }
        }
        if let Some(rules) = new_rules {
            catalog.rules = rules;
        }
        catalog.guard();
        catalog.changes.send_modify(|changes| *changes += 1);
        drop(catalog);
        drop((old_groups, replaced));
        Ok(Retry::No)
    }
}

/// Every tool's published names after a change (`planned`, for the tools
/// `changed`; the catalog's groups for the others), as `(published, bound)`:
/// refused if a name is published twice or is too long, or names an unbound one,
/// or is published by another tool than in the publications before
/// (`across`: each published name's tool so far).
fn publish_all(
    catalog: &Catalog,
    changed: &[&Name],
    planned: &[(ToolGroup, Option<u64>, Vec<Entry>)],
    limits: Limits,
    audience: Option<&Name>,
    across: &mut HashMap<Name, Name>,
) -> Result<Vec<(Name, Name)>, BindError> {
    let limit = limits.max_published_len();
    let mut owners = HashMap::new();
    let mut all = Vec::new();
    let planned = planned.iter().map(|(group, _, entries)| {
        let names: Vec<Name> = entries
            .iter()
            .map(|entry| entry.info.name.clone())
            .collect();
        (group, names)
    });
    let kept = catalog
        .tools
        .values()
        .filter(|group| !changed.contains(&&group.base.running.base))
        .map(|group| (group, group.names.clone()));
    let groups: Vec<_> = planned.chain(kept).collect();
    // Every bound name with its tool: a tool may publish a name of its own (a
    // branch under its base's name), never one another tool binds.
    let binders: HashMap<&Name, &Name> = groups
        .iter()
        .flat_map(|(group, names)| names.iter().map(|name| (name, &group.base.running.base)))
        .collect();
    for (group, names) in &groups {
        let tool = &group.base.running.base;
        let outermost = group.combos.iter().filter_map(|combo| {
            combo
                .branches
                .last()
                .map(|branch| branch.running.name.clone())
        });
        let publish = audience
            .and_then(|audience| group.publish_to.get(audience))
            .unwrap_or(&group.publish);
        let pairs = publish.names(tool, names, outermost)?;
        bind::check_unique(&mut owners, tool, &pairs, limit)?;
        all.extend(pairs);
    }
    // After every tool's names are known unique: a name two tools publish is
    // that refusal, whichever tool changed.
    for (published, _) in &all {
        let publisher = &owners[published];
        if let Some(owner) = binders.get(published).filter(|owner| **owner != publisher) {
            return Err(BindError::PublishedNameOfAnother {
                tool: publisher.clone(),
                published: published.clone(),
                owner: (*owner).clone(),
            });
        }
        let before = across
            .entry(published.clone())
            .or_insert_with(|| publisher.clone());
        if before != publisher {
            return Err(BindError::PublishedTwice {
                tool: publisher.clone(),
                published: published.clone(),
                owner: before.clone(),
            });
        }
    }
    Ok(all)
}

/// The audiences once `changes` apply, in order, and those taken away:
/// refused if one's policy reads a call's arguments.
#[allow(clippy::type_complexity)]
fn audiences_after(
    catalog: &Catalog,
    changes: &[AudienceChange],
) -> Result<(Vec<(Name, Arc<dyn crate::access::Policy>)>, Vec<Name>), BindError> {
    let mut defined: Vec<(Name, Arc<dyn crate::access::Policy>)> = catalog
        .audiences
        .iter()
        .map(|audience| (audience.name.clone(), audience.policy.clone()))
        .collect();
    let mut removed = Vec::new();
    for change in changes {
        let name = Name::new(&change.name)?;
        let at = defined.iter().position(|(defined, _)| *defined == name);
        match (&change.policy, at) {
            (Some(policy), _) if policy.reads_arguments() => {
                return Err(BindError::AudienceReadsArguments { audience: name });
            }
            (Some(policy), Some(at)) => defined[at].1 = policy.clone(),
            (Some(policy), None) => {
                removed.retain(|removed| *removed != name);
                defined.push((name, policy.clone()));
            }
            (None, Some(at)) => {
                defined.remove(at);
                removed.push(name);
            }
            (None, None) => {}
        }
    }
    Ok((defined, removed))
}

/// The base tool a bound name is of once the change lands: a changed tool's
/// as planned, another's as it is.
fn base_after(
    catalog: &Catalog,
    changed: &[&Name],
    planned: &[(ToolGroup, Option<u64>, Vec<Entry>)],
    name: &str,
) -> Option<Name> {
    let planned = planned
        .iter()
        .flat_map(|(_, _, entries)| entries)
        .find(|entry| entry.info.name == name);
    let kept = catalog
        .entries
        .get(name)
        .filter(|entry| !changed.contains(&&entry.info.base));
    planned
        .or(kept.map(|entry| &**entry))
        .map(|entry| entry.info.base.clone())
}

/// Refuses a change that would have a published alias that carries a policy
/// published by another tool than the one the policy was set for (the
/// policy would no longer decide it: the name would open without a word),
/// unless the change sets the name's policy again or takes it off.
fn guarded_stay(
    catalog: &Catalog,
    changed: &[&Name],
    new_rules: Option<&Rules>,
    planned: &[(ToolGroup, Option<u64>, Vec<Entry>)],
    published: &[(Name, Name)],
) -> Result<(), BindError> {
    let rules = new_rules.unwrap_or(&catalog.rules);
    let base_of = |bound: &Name| base_after(catalog, changed, planned, bound);
    for (name, bound) in published.iter().filter(|(name, bound)| name != bound) {
        let Some(ruled) = rules.get(name) else {
            continue;
        };
        // A rule this change set is the change's own say.
        let set_now = new_rules.is_some_and(|new| {
            catalog
                .rules
                .get(name)
                .is_none_or(|before| !Arc::ptr_eq(&before.policy, &new[name].policy))
        });
        if set_now {
            continue;
        }
        if let Some(tool) = base_of(bound).filter(|tool| *tool != ruled.owner) {
            return Err(BindError::GuardedNameMoved {
                name: name.clone(),
                owner: ruled.owner.clone(),
                tool,
            });
        }
    }
    Ok(())
}

/// A toolset's access policies, by the name each is on.
type Rules = std::collections::BTreeMap<Name, super::catalog::Ruled>;

/// The access policies after `rules` apply, when they change any (`None`
/// otherwise): refused if one is set on a name that is neither bound nor
/// published once the change lands, or, from a manifest's entry, on a name of
/// another tool. Each remembers the tool its name is of.
fn ruled(
    catalog: &Catalog,
    changed: &[&Name],
    planned: &[(ToolGroup, Option<u64>, Vec<Entry>)],
    published: &[(Name, Name)],
    rules: &[RuleChange],
) -> Result<Option<Rules>, BindError> {
    if rules.is_empty() {
        return Ok(None);
    }
    let base_of_bound = |name: &str| base_after(catalog, changed, planned, name);
    let owner_after = |name: &str| {
        base_of_bound(name).or_else(|| {
            let (_, bound) = published.iter().find(|(published, _)| published == name)?;
            base_of_bound(bound)
        })
    };
    let mut after = catalog.rules.clone();
    for rule in rules {
        let name = &rule.name;
        let Some(policy) = &rule.policy else {
            after.remove(name.as_str());
            continue;
        };
        let (Some(owner), Ok(checked)) = (owner_after(name), Name::new(name.as_str())) else {
            return Err(BindError::UnknownTool {
                tool: shorten(name).into_owned(),
            });
        };
        if let Some(tool) = rule
            .of_tool
            .as_deref()
            .filter(|tool| *tool != owner.as_str())
        {
            return Err(BindError::AccessOfAnother {
                tool: shorten(tool).into_owned(),
                name: checked,
                owner,
            });
        }
        after.insert(
            checked,
            super::catalog::Ruled {
                owner,
                policy: policy.clone(),
            },
        );
    }
    Ok(Some(after))
}
