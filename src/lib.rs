#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]

mod bind;
mod combo;
mod dynamic;
mod error;
mod extension;
mod kind;
mod limits;
mod name;
mod params;
mod registry;
pub mod rules;
pub mod schema;
mod segment;
mod stack;
mod table;
mod tool;
mod toolset;

pub mod ext;
pub mod manifest;
pub mod rulebook;

pub use bind::{Link, Site, ToolInfo};
pub use combo::{Bound, Combo, Combos};
pub use dynamic::{DynStack, DynTool, DynToolBuilder};
pub use error::{
    ArgsError, ArgsErrorKind, BindError, BoxError, ChainErrorKind, QUOTE_LEN, ToolError, shorten,
    shorten_json,
};
pub use extension::{ConfigError, Configurable, Extension, Layer, LayerInput, Wrap, Wrapped};
pub use kind::{Backend, ExtensionKind, Kind, Transformer, UnknownKind, Wrapper, words};
pub use limits::{LimitError, Limits};
pub use name::{InvalidName, MAX_NAME_LEN, Name};
pub use params::{Forwards, Params, ReservedParams, WithParams};
pub use registry::{CatalogueEntry, DynBranch, DynExtension, DynLayer, Registry, RegistryError};
pub use rules::{Anywhere, BodyLocal, Locality};
pub use schemars::Schema;
pub use segment::{SEGMENT, Segment};
pub use stack::{Args, DynInput, Next, Stack, decode_args};
pub use table::NameTable;
pub use tool::{BaseTool, Body, Tool, ToolBuilder, ToolSpec};
pub use toolset::{BaseTools, Toolset, WeakToolset};

/// Not public API: the few internals that the integration crates of this
/// workspace (`toolgraft-jobs`) need, with no compatibility promise. A backend that
/// runs the layer below in another process carries the chain depth there, so a
/// chain cycle through it still ends at [`ext::chain::MAX_CHAIN_DEPTH`], and
/// rebuilds the names in the errors a worker sends back.
#[doc(hidden)]
pub mod __private {
    /// How deep in chains the current task is (0 outside any).
    pub fn chain_depth() -> usize {
        crate::ext::chain::depth()
    }

    /// Runs `future` at chain depth `depth`.
    pub async fn at_chain_depth<F: Future>(depth: usize, future: F) -> F::Output {
        crate::ext::chain::at_depth(depth, future).await
    }

    /// A name that skips validation: one that was valid where it was made (a bound
    /// extension's name, or a name a worker sends back).
    pub fn name_unchecked(name: &str) -> crate::Name {
        crate::Name::unchecked(name)
    }
}

/// The traits and types most code needs: `use toolgraft::prelude::*;`.
pub mod prelude {
    pub use crate::ext::{CacheParams, ProxyParams};
    pub use crate::{BaseTool, Extension, Layer, Stack, Tool, Toolset, WithParams, Wrap};
}
