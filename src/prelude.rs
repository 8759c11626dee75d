//! The traits and types most code needs: `use toolgraft::prelude::*;`.
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

pub use crate::combo::{Branch, Combo, StartCombo};
pub use crate::error::{BindError, ToolError};
pub use crate::ext::{CacheParams, ProxyParams};
pub use crate::extension::{Extension, Layer, Stack, WithParams, Wrap};
pub use crate::tool::{BaseTool, Tool};
pub use crate::toolset::Toolset;
