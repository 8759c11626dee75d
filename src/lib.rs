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
mod context;
pub mod kind;
pub mod error;
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

pub use combo::{Branch, Combo};
pub use error::{BindError, ToolError};
pub use extension::{Extension, Layer, Wrap};
pub use name::Name;
pub use runtime::{Manifest, Registry};
pub use stack::Stack;
pub use tool::Tool;
pub use toolset::Toolset;

/// Not public API: the few internals that the integration crates of this
/// workspace (`toolgraft-jobs`) need, with no compatibility promise. A backend that
/// runs the layer below in another process carries the call depth there, so a
/// chain cycle through it still ends at [`ext::chain::MAX_CHAIN_DEPTH`], and
/// rebuilds the names in the errors a worker sends back.
#[doc(hidden)]
pub mod __private {
    /// How deep in chains the current task is (0 outside any).
    pub fn chain_depth() -> usize {
        crate::context::current()
    }

    /// Runs `future` at chain depth `depth`.
    pub async fn at_chain_depth<F: Future>(depth: usize, future: F) -> F::Output {
        crate::context::at(depth, future).await
    }

    /// The refusal a relocating backend returns when it is reached from inside a
    /// body-local layer's call (a tool body calling a branch, say), or `None`.
    pub fn refuse_outside_relocation(
        below: &crate::Name,
        backend: &str,
    ) -> Option<crate::ToolError> {
        crate::context::body_local()
            .map(|outside| crate::ext::pool::outside_relocation(&outside, below, backend))
    }

    /// A name that skips validation: one that was valid where it was made (a bound
    /// extension's name, or a name a worker sends back).
    pub fn name_unchecked(name: &str) -> crate::Name {
        crate::Name::unchecked(name)
    }
}
