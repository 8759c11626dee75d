//! The run-time path: combos that exist only at run time, named in a manifest
//! and built from a [`Registry`] of extensions, through the same binding engine
//! as typed combos (so the same rule gives the same [`BindError`](crate::BindError)).
//!
//! - [`Registry`]: extensions by name, registered with one verb,
//!   [`Registry::register`]: typed ones as themselves (or [`Configured`],
//!   [`Refined`] by config), run-time ones as [`DynExtension`]s.
//! - [`Manifest`]: the operator's file of tools and combos ([`manifest`]).
//! - [`DynTool`] and [`DynStack`]: base tools and stacks at JSON values.
//! - [`NameTable`]: every bound name with where each layer runs, for a terminal.

mod dyn_tool;
pub mod manifest;
mod registry;
mod table;

pub use crate::stack::erased::DynStack;
pub use dyn_tool::{DynTool, DynToolBuilder, DynToolParts};
pub use manifest::Manifest;
pub use registry::{
    CatalogueEntry, Configured, DynBranch, DynExtension, DynLayer, Refined, Registrable, Registry,
    RegistryError,
};
pub use table::NameTable;
