#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations, unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The modules, bottom to top: a module imports only from the ones above it in
// this list (`scripts/module-graph` checks it). See the README's "Layout".
mod quote;
pub mod rulebook;
mod name;
pub mod context;
pub mod kind;
mod annotations;
pub mod error;
pub mod relocation;
pub mod limits;
pub mod schema;
mod stack;
pub mod tool;
pub mod extension;
mod bind;
pub mod combo;
pub mod runtime;
pub mod toolset;
pub mod ext;

pub mod prelude;

mod handles;

pub use combo::{Branch, Combo};
pub use error::{BindError, ToolError};
pub use extension::{Extension, Layer, Wrap};
pub use name::Name;
pub use runtime::{Manifest, Registry};
pub use stack::Stack;
pub use tool::Tool;
pub use toolset::Toolset;
