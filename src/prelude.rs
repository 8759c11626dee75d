//! The traits and types most code needs: `use toolgraft::prelude::*;`.
//! The built-ins, each behind its feature, and their reserved params
//! ([`CacheParams`](crate::ext::CacheParams), ..) are imported from
//! [`ext`](crate::ext).
//!
//! ```
//! use toolgraft::prelude::*;
//! # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
//! let ping = Tool::builder().name("ping").description("Answer pong.")
//!     .body(|_: Ping| async { Ok("pong") }).build()?;
//! let toolset = Toolset::new();
//! toolset.bind((ping.combo(),))?;
//! assert_eq!(toolset.names(), ["ping"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Wrap`](crate::Wrap) is not in it: a wrapper is generic over the stacks it
//! fits, so with `Wrap` in scope `cache.name()` would not know which `Wrap<S>` it
//! means. Import it where a wrapper is written (`use toolgraft::Wrap;`); here an
//! extension's methods are [`Extension`]'s:
//!
//! ```
//! use toolgraft::prelude::*;
//! use toolgraft::ext::{Cache, Trace};
//! assert_eq!((Trace.name(), Cache::default().name()), ("trace", "cache"));
//! assert!(Cache::default().check_config().is_ok());
//! ```

pub use crate::combo::{Branch, Combo, StartCombo};
pub use crate::error::{BindError, ToolError};
pub use crate::extension::{Extension, Layer, Stack, WithParams};
pub use crate::tool::{BaseTool, Tool};
pub use crate::toolset::Toolset;
