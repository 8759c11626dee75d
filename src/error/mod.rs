//! The crate's errors: [`ToolError`] at call time, [`BindError`] at bind time.
//!
//! Both are shared by the typed and the run-time (manifest) paths: the same rule gives
//! the same variant wherever it is checked, and [`BindError::rule`] names it as a
//! [`Rule`](crate::rulebook::Rule). Errors of a single built-in live with it
//! ([`ChainError`](crate::ext::chain::ChainError),
//! [`OutputSchemaError`](crate::ext::output_schema::OutputSchemaError)), inside
//! [`ToolError::Extension`].

// Bottom to top: each file imports only those above it.
mod box_error;
mod panic;
mod message;
mod transient;
mod detailed;
mod bind;
mod args;
mod tool;

pub use self::args::{ArgsError, ArgsErrorKind};
pub use self::bind::BindError;
pub use self::box_error::BoxError;
pub use self::detailed::Detailed;
pub(crate) use self::message::{listed, ticked};
pub use self::panic::panic_message;
pub use self::tool::ToolError;
pub use self::transient::Transient;
pub use crate::name::InvalidName;
pub use crate::quote::{QUOTE_LEN, shorten, shorten_json};
