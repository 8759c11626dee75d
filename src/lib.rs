// The README's links go to the guide's markdown files (docs/guide/), which work on
// GitHub; these definitions come first, and the first definition of a label wins,
// so on docs.rs the same links go to the guide's modules.
#![doc = "[combos]: crate::guide::combos"]
#![doc = "[extensions]: crate::guide::extensions"]
#![doc = "[manifests]: crate::guide::manifests"]
#![doc = "[builtins]: crate::guide::builtins"]
#![doc = "[authoring]: crate::guide::authoring"]
#![doc = "[design]: crate::guide::design"]
#![doc = "[layout]: crate::guide::layout"]
#![doc = "[mcp-serving]: https://docs.rs/toolgraft-mcp/latest/toolgraft_mcp/guide/serving/"]
#![doc = "[mcp-embedding]: https://docs.rs/toolgraft-mcp/latest/toolgraft_mcp/guide/embedding/"]
#![doc = "[mcp-http]: https://docs.rs/toolgraft-mcp/latest/toolgraft_mcp/guide/http/"]
#![doc = "[workers]: https://docs.rs/toolgraft-jobs/latest/toolgraft_jobs/guide/workers/"]
#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations, unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The modules, bottom to top: a module imports only from the ones above it in
// this list (`scripts/module-graph` checks it). See docs/guide/layout.md.
mod hex;
mod quote;
pub mod rulebook;
mod name;
pub mod store;
pub mod context;
pub mod access;
pub mod kind;
mod annotations;
pub mod error;
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub mod otel;
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
pub mod guide;

mod handles;

pub use combo::{Branch, Combo};
pub use error::{BindError, ToolError};
pub use extension::{Extension, Layer, Wrap};
pub use name::Name;
pub use runtime::{Manifest, Registry};
pub use stack::Stack;
pub use tool::Tool;
pub use toolset::Toolset;
