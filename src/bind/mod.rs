//! The binding engine: one fold over a combo's elements, shared by typed combos and
//! run-time (manifest) combos.
//!
//! A combo is folded element by element into a [`Running`] view of the layer input
//! (name, description, schemas, chain); each step applies the rules of
//! `bind::rules` in the rulebook's order. A tool's combos are then merged into one set of
//! bound names (identical prefixes once, clashes refused) or refused as a whole.

// Bottom to top: each file imports only those above it.
mod info;
pub(crate) mod element;
mod key;
mod publish;
mod running;
pub(crate) mod rules;
mod fold;
mod plan;
mod draft;

pub(crate) use draft::ComboDraft;
pub use info::{Link, Site, ToolInfo};
pub(crate) use key::{combo_key, is_combo, written_config};
pub(crate) use plan::{Attached, Entry, Minted, plan_tool};
pub(crate) use publish::check_unique;
pub use publish::{Publish, Published};
pub(crate) use running::{Element, Problem, Running};
