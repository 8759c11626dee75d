//! # toolgraft
//!
//! Compose AI-agent tools with extensions, and let the compiler prove the stacking
//! rules.
//!
//! A [`Tool`] is a named async function with JSON-Schema input and output. An
//! [`Extension`] (a wrapper, a transformer or a backend) mints a new-named branch
//! beside it; a combo `[a, b]` on `tool` binds `tool`, `tool_a` and `tool_a_b`.
//! Two rules are checked when the combo is written in Rust, as trait bounds on
//! [`Combo::with`]:
//!
//! * at most one extension of a kind whose `multiple` is false (a backend) per combo;
//! * an extension that needs body locality sits inside any relocating extension.
//!
//! ```
//! use frunk::{hlist, hlist_pat};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use serde_json::json;
//! use toolgraft::prelude::*;
//! use toolgraft::ext::{proxy, Cache, Pool, Proxy, Trace};
//!
//! #[derive(Deserialize, Serialize, JsonSchema)]
//! struct Fetch { url: String }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let fetch = Tool::builder()
//!     .name("fetch")
//!     .description("Fetch a page.")
//!     .body(|input: Fetch| async move {
//!         let route = proxy::current_route().unwrap_or_else(|| "direct".into());
//!         Ok(format!("GET {} via {route}", input.url))
//!     })
//!     .build()?;
//!
//! let pool = Pool::new(2)?;
//! let toolset = Toolset::new();
//! let hlist_pat![remote, _traced] = toolset.bind(&fetch, hlist![
//!     fetch.combo().with(Proxy::allow(["egress-eu"])).with(pool).with(Cache::default()),
//!     fetch.combo().with(Trace),
//! ])?;
//!
//! // Typed call through every layer: static dispatch.
//! let page = remote.call(WithParams::new(CacheParams::default(),
//!     WithParams::new(ProxyParams::default(), Fetch { url: "/".into() }))).await?;
//! assert_eq!(page, "GET / via egress-eu");
//!
//! // Every prefix is bound, and callable by name with JSON.
//! assert_eq!(toolset.names(), ["fetch", "fetch_proxy", "fetch_proxy_pool",
//!                              "fetch_proxy_pool_cache", "fetch_trace"]);
//! let page = toolset.call("fetch_proxy_pool", json!({"url": "/docs"})).await?;
//! assert_eq!(page, json!("GET /docs via egress-eu"));
//! # Ok(()) }
//! ```
//!
//! The rules hold for combos that only exist at run time too, as [`BindError`]s from
//! the same binding engine.
//!
//! Hostile input never takes the process down: by-name calls refuse arguments
//! nested past a [`Limits`] depth before any other work, binding refuses combos and
//! names past their limits and extension configs out of range, a panic below
//! [`Toolset::call`] becomes [`ToolError::Panicked`], and errors and logs quote at
//! most [`QUOTE_LEN`] characters of any value (see [`Limits`] for what is not
//! bounded on purpose).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

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

// The README's code is compiled and run as a doc test, so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

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
