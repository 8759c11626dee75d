//! A tool's bound names: the branches its combos mint, merged into one plan
//! (identical prefixes once, clashes refused).

use std::collections::HashMap;
use std::sync::Arc;

use super::element::ComboSpec;
use super::info::ToolInfo;
use super::running::Running;
use crate::context::{CallName, Context};
use crate::error::BindError;
use crate::name::Name;
use crate::stack::ErasedStack;
use crate::stack::erased::DynStack;
use crate::tool::BaseTool;

/// A bound name: what clients see, and the stack that serves it.
pub(crate) struct Entry {
    pub info: ToolInfo,
    pub stack: Arc<dyn ErasedStack>,
    /// The context of a call by this name from outside any other call: made once,
    /// so that the common call allocates no context of its own.
    pub called: Context,
    /// The authorization checks of its layers: checked by the toolset before
    /// the call, and what it lists the name by.
    pub checks: crate::access::Checks,
}

/// A bound name before it is bound: what clients will see, and the stack serving
/// it.
#[derive(Clone)]
pub(crate) struct Minted {
    pub running: Running,
    pub stack: Arc<dyn ErasedStack>,
}

impl Minted {
    /// The base tool itself.
    pub(crate) fn base<B: BaseTool>(base: &B) -> Self {
        Self {
            running: Running::of_base(base.spec()),
            // Decoding through `ErasedStack` keeps the arguments as given, without a
            // copy for a typed tool (`Stack::decode_keeping`).
            stack: Arc::new(base.clone()),
        }
    }

    /// Whether `other` is the same base tool as far as clients could tell: the
    /// same name, description and schemas (two tools of one name in one
    /// binding are refused, unless they are clones of one tool).
    pub(crate) fn same_base(&self, other: &Minted) -> bool {
        self.running.name == other.running.name && self.running.difference(&other.running).is_none()
    }

    /// This name through JSON, to layer run-time extensions over.
    pub(crate) fn dyn_stack(&self) -> DynStack {
        DynStack::erased(self.running.name.clone(), self.stack.clone())
    }

    pub(super) fn into_entry(self) -> Entry {
        let checks = self.running.checks.clone();
        let info = self.running.into_info();
        Entry {
            called: Context::new().with(CallName(info.name.clone())),
            info,
            stack: self.stack,
            checks,
        }
    }
}

/// A combo attached to a tool: what identifies it (its elements, for "already
/// attached" and "not attached"), and the branches it mints.
#[derive(Clone)]
pub(crate) struct Attached {
    pub elements: ComboSpec,
    pub branches: Vec<Minted>,
}

/// Plans one tool: its base and every branch of every combo (rule `one-branch-per-prefix`: identical
/// prefixes once; two stacks minting one name refused). Any broken rule refuses the
/// whole tool (rule `all-or-nothing`).
pub(crate) fn plan_tool(base: &Minted, combos: &[Attached]) -> Result<Vec<Entry>, BindError> {
    let tool = &base.running.base;
    let branches = combos.iter().flat_map(|combo| &combo.branches);
    let names = 1 + branches.clone().count();
    let mut planned = Vec::with_capacity(names);
    planned.push(base.clone());
    // A tool mostly mints a handful of names, which a scan finds sooner than a hash
    // map (and its allocations) would; many combos get the map.
    let mut index: Option<HashMap<Name, usize>> =
        (names > 32).then(|| HashMap::from_iter([(tool.clone(), 0)]));
    for minted in branches {
        let running = &minted.running;
        let found = match &index {
            Some(index) => index.get(&running.name).copied(),
            None => planned
                .iter()
                .position(|planned| planned.running.name == running.name),
        };
        match found {
            Some(at) => {
                if let Some(what) = planned[at].running.difference(running) {
                    let (first, second) = (
                        crate::error::listed(&planned[at].running.chain),
                        crate::error::listed(&running.chain),
                    );
                    let second = if first == second {
                        format!("{second}, with another {what}")
                    } else {
                        second
                    };
                    return Err(BindError::NameClash {
                        tool: tool.clone(),
                        name: running.name.clone(),
                        first,
                        second,
                    });
                }
            }
            None => {
                if let Some(index) = &mut index {
                    index.insert(running.name.clone(), planned.len());
                }
                planned.push(minted.clone());
            }
        }
    }
    Ok(planned.into_iter().map(Minted::into_entry).collect())
}
