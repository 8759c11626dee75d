//! The one tool every system serves: `repeat {text, count}`, answered with the
//! text repeated `count` times as one text content block.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// `repeat`'s input (the same JSON schema for every system: each derives it
/// from this type with schemars).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RepeatArgs {
    /// The text to repeat.
    pub text: String,
    /// How many times.
    pub count: u32,
}

/// The description every system gives the tool.
pub const DESCRIPTION: &str = "Repeat the text `count` times.";

/// The answer, the same for every system.
pub fn repeat(args: &RepeatArgs) -> String {
    args.text.repeat(args.count as usize)
}

/// The arguments every call sends.
pub fn call_args() -> Value {
    json!({"text": "hello ", "count": 8})
}

/// The text every call must get back.
pub fn expected() -> String {
    "hello ".repeat(8)
}

/// The name of the `i`-th tool of a `tools/list` server.
pub fn list_name(i: usize) -> String {
    format!("t{i:04}")
}
