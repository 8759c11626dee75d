//! Limits on what callers and operators can make a toolset do: how deep call
//! arguments nest, how long a combo is, how long a bound name is.
//!
//! A toolset runs inside an embedding server, next to everything else it does, so
//! one hostile request or one bad manifest line must be refused with an error, not
//! abort the process or pin its memory. Each limit has a default an operator can
//! live with, and a ceiling; an error that a limit causes names the setter that
//! raises it.

use serde_json::Value;
use thiserror::Error;

pub use crate::name::MAX_NAME_LEN;

/// Limits of a [`Toolset`](crate::Toolset), set when it is made with
/// [`Toolset::with_limits`](crate::Toolset::with_limits).
///
/// | limit | default | ceiling | checked |
/// |---|---|---|---|
/// | [`max_depth`](Limits::max_depth): nesting of by-name call arguments | 64 | 128 | each [`Toolset::call`](crate::Toolset::call), before any other work |
/// | [`max_combo_len`](Limits::max_combo_len): elements in one combo | 64 | 1,024 | at bind, before any factory runs |
/// | [`max_name_len`](Limits::max_name_len): bytes of a bound name | 128 | 4,096 | at bind |
/// | [`max_published_len`](Limits::max_published_len): bytes of a published name | `max_name_len`'s | 4,096 | at bind and publish |
///
/// Why these defaults: real tool arguments nest a handful of levels, and 64 leaves
/// room for schema-heavy inputs while keeping decoding (which recurses) far from any
/// thread's stack size; the ceiling is `serde_json`'s own parse limit, so no MCP
/// request can be deeper anyway. A combo of 64 layers is already far beyond any
/// useful stack, and a run-time call recurses once per layer. MCP clients expect
/// tool names of at most 128 bytes; a deep combo's branch names grow with its depth,
/// so binding deep combos may need a higher `max_name_len` (they then stay callable
/// by name in process, but MCP clients may refuse them). Clients see only the
/// published names ([`Publish`](crate::toolset::Publish)), which have a cap of
/// their own: many model APIs take function names of at most 64 characters, so
/// a server for them sets `with_max_published_len(64)` and publishes deep
/// branches under shorter names.
///
/// What is **not** bounded, on purpose:
///
/// * In-process calls have no timeout: a body that never ends keeps its caller
///   waiting. Wrap [`Toolset::call`](crate::Toolset::call) in
///   `tokio::time::timeout` where a deadline matters; the call (and a pool job under
///   it) stops when its future is dropped. Relocated calls have one (the `Remote`
///   backend's `timeout`).
/// * The size of call arguments: they arrive already in memory, and the embedding
///   server's transport decides how large a request may be. toolgraft does not copy
///   them per layer, and quotes at most 200 characters of them in errors and logs.
/// * What a tool body returns, and what a typed call (with Rust values, not JSON)
///   passes: that is the embedding program's own code.
/// * How many tools and combos a toolset binds: the operator writes them.
/// * Typed combos are built by the program itself (`Combo::with`), so a panic
///   while building one is the program's; extensions a manifest names by name
///   are built under `catch_unwind`, and a panic there refuses that tool only.
///
/// ```
/// use serde_json::{Value, json};
/// use toolgraft::{Tool, ToolError, Toolset};
/// use toolgraft::error::ArgsErrorKind;
/// use toolgraft::limits::Limits;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limits = Limits::default().with_max_depth(8).with_max_combo_len(16);
/// assert_eq!((limits.max_depth(), limits.max_combo_len(), limits.max_name_len()), (8, 16, 128));
/// let toolset = Toolset::with_limits(limits)?;
/// let echo = Tool::builder().name("echo").description("Return the value.")
///     .body(|args: serde_json::Map<String, Value>| async move { Ok(Value::Object(args)) })
///     .build()?;
/// toolset.bind((echo.combo(),))?;
///
/// // Too deep: refused before anything is decoded.
/// let mut deep = json!(1);
/// for _ in 0..10 { deep = Value::Array(vec![deep]); }
/// let err = toolset.call("echo", json!({"x": deep})).await.unwrap_err();
/// assert!(matches!(err, ToolError::InvalidArguments { kind: ArgsErrorKind::TooDeep, .. }));
/// assert!(err.to_string().contains("Limits::with_max_depth"), "{err}");
///
/// // A limit over its ceiling is refused.
/// assert!(Toolset::with_limits(Limits::default().with_max_depth(100_000)).is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    max_depth: usize,
    max_combo_len: usize,
    max_name_len: usize,
    /// `None`: the bound names' limit.
    max_published_len: Option<usize>,
}

impl Limits {
    /// The highest [`Limits::max_depth`]: `serde_json`'s own parse limit, and a
    /// depth at which decoding (which recurses) stays far from any stack's size.
    ///
    /// ```
    /// use toolgraft::Toolset;
    /// use toolgraft::limits::Limits;
    /// assert!(Toolset::with_limits(Limits::default().with_max_depth(Limits::DEPTH_CEILING)).is_ok());
    /// ```
    pub const DEPTH_CEILING: usize = 128;
    /// The highest [`Limits::max_combo_len`]: a run-time call recurses once per layer.
    ///
    /// ```
    /// use toolgraft::Toolset;
    /// use toolgraft::limits::Limits;
    /// let over = Limits::default().with_max_combo_len(Limits::COMBO_LEN_CEILING + 1);
    /// assert!(Toolset::with_limits(over).is_err());
    /// ```
    pub const COMBO_LEN_CEILING: usize = 1024;
    /// The highest [`Limits::max_name_len`].
    ///
    /// ```
    /// use toolgraft::Toolset;
    /// use toolgraft::limits::Limits;
    /// assert!(Toolset::with_limits(Limits::default().with_max_name_len(Limits::NAME_LEN_CEILING)).is_ok());
    /// ```
    pub const NAME_LEN_CEILING: usize = 4096;

    /// How deep by-name call arguments may nest: the arguments object is level 1,
    /// `{"a": [1]}` is 2 deep (see [`Limits`]).
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// How many elements one combo may have (see [`Limits`]).
    pub fn max_combo_len(&self) -> usize {
        self.max_combo_len
    }

    /// How many bytes a bound name may have (see [`Limits`]).
    pub fn max_name_len(&self) -> usize {
        self.max_name_len
    }

    /// How many bytes a published name may have (see [`Limits`]): a name a
    /// tool would publish beyond it is refused when bound or published.
    pub fn max_published_len(&self) -> usize {
        self.max_published_len.unwrap_or(self.max_name_len)
    }

    /// Sets [`Limits::max_depth`] (1 to [`Limits::DEPTH_CEILING`]; see [`Limits`]).
    #[must_use]
    pub fn with_max_depth(self, max_depth: usize) -> Self {
        Self { max_depth, ..self }
    }

    /// Sets [`Limits::max_combo_len`] (1 to [`Limits::COMBO_LEN_CEILING`]; see
    /// [`Limits`]).
    #[must_use]
    pub fn with_max_combo_len(self, max_combo_len: usize) -> Self {
        Self {
            max_combo_len,
            ..self
        }
    }

    /// Sets [`Limits::max_name_len`] (1 to [`Limits::NAME_LEN_CEILING`]; see
    /// [`Limits`]).
    ///
    /// ```
    /// let limits = toolgraft::limits::Limits::default().with_max_name_len(512);
    /// assert!(toolgraft::Toolset::with_limits(limits).is_ok());
    /// ```
    #[must_use]
    pub fn with_max_name_len(self, max_name_len: usize) -> Self {
        Self {
            max_name_len,
            ..self
        }
    }

    /// Sets [`Limits::max_published_len`] (1 to [`Limits::NAME_LEN_CEILING`]; see
    /// [`Limits`]). 64 fits the clients that cap function names there.
    ///
    /// ```
    /// use toolgraft::{BindError, Tool, Toolset};
    /// use toolgraft::ext::Trace;
    /// use toolgraft::limits::Limits;
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// let toolset = Toolset::with_limits(Limits::default().with_max_published_len(12))?;
    /// let ping = Tool::builder().name("ping").description("Answer pong.")
    ///     .body(|_: Ping| async { Ok("pong") }).build()?;
    /// let deep = toolset.bind((ping.combo().with(Trace).with(Trace),));
    /// assert!(matches!(deep, Err(BindError::PublishedTooLong { .. })), "ping_trace_trace");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_max_published_len(self, max_published_len: usize) -> Self {
        Self {
            max_published_len: Some(max_published_len),
            ..self
        }
    }

    /// Refuses a limit out of its range.
    pub(crate) fn checked(self) -> Result<Self, LimitError> {
        let ranges = [
            (
                "with_max_depth",
                self.max_depth,
                Self::DEPTH_CEILING,
                "decoding recurses once per level",
            ),
            (
                "with_max_combo_len",
                self.max_combo_len,
                Self::COMBO_LEN_CEILING,
                "a run-time call recurses once per layer",
            ),
            (
                "with_max_name_len",
                self.max_name_len,
                Self::NAME_LEN_CEILING,
                "names are listed and logged whole",
            ),
            (
                "with_max_published_len",
                self.max_published_len(),
                Self::NAME_LEN_CEILING,
                "names are listed and logged whole",
            ),
        ];
        for (setter, value, ceiling, why) in ranges {
            if value == 0 || value > ceiling {
                return Err(LimitError {
                    setter,
                    value,
                    ceiling,
                    why,
                });
            }
        }
        Ok(self)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_depth: 64,
            max_combo_len: 64,
            max_name_len: MAX_NAME_LEN,
            max_published_len: None,
        }
    }
}

/// A [`Limits`] value out of its range.
///
/// ```
/// use toolgraft::Toolset;
/// use toolgraft::limits::Limits;
/// let err = Toolset::with_limits(Limits::default().with_max_combo_len(0)).unwrap_err();
/// assert_eq!(err.to_string(),
///     "`Limits::with_max_combo_len(0)` is out of range: use 1 to 1024 (a run-time call recurses once per layer)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("`Limits::{setter}({value})` is out of range: use 1 to {ceiling} ({why})")]
pub struct LimitError {
    /// The setter given the value.
    pub setter: &'static str,
    /// The value.
    pub value: usize,
    /// The highest value it takes.
    pub ceiling: usize,
    /// Why there is a ceiling.
    pub why: &'static str,
}

/// Whether `value` nests deeper than `limit` (a scalar is 0 deep, `[]` and `{}` are
/// 1). It stops at the first container past the limit; scalars cost nothing.
pub(crate) fn deeper_than(value: &Value, limit: usize) -> bool {
    is_container(value) && exceeds(value, limit, SHALLOW)
}

/// How far [`deeper_than`] recurses before it walks on with an explicit stack:
/// most arguments nest a few levels, and recursing that far allocates nothing
/// (this runs on every call by name), while hostile depth never recurses.
const SHALLOW: usize = 16;

fn is_container(value: &Value) -> bool {
    matches!(value, Value::Array(_) | Value::Object(_))
}

/// Whether the container `value` (1 deep) nests deeper than `limit`.
fn exceeds(value: &Value, limit: usize, recursions_left: usize) -> bool {
    if limit == 0 {
        return true;
    }
    if recursions_left == 0 {
        return exceeds_flat(value, limit);
    }
    Children::of(value)
        .into_iter()
        .flatten()
        .any(|child| is_container(child) && exceeds(child, limit - 1, recursions_left - 1))
}

/// [`exceeds`] in one pass with an explicit stack, for `limit >= 1`.
fn exceeds_flat(value: &Value, limit: usize) -> bool {
    // One iterator per open container: the stack holds the path, never the width.
    let mut open: Vec<Children<'_>> = Vec::new();
    open.extend(Children::of(value));
    while let Some(top) = open.last_mut() {
        match top.next() {
            None => {
                open.pop();
            }
            Some(child) if is_container(child) => {
                // `open.len()` containers enclose `child`, which is one deeper.
                if open.len() + 1 > limit {
                    return true;
                }
                open.extend(Children::of(child));
            }
            Some(_) => {}
        }
    }
    false
}

/// The children of a non-empty container.
enum Children<'a> {
    Array(std::slice::Iter<'a, Value>),
    Object(serde_json::map::Values<'a>),
}

impl<'a> Children<'a> {
    fn of(value: &'a Value) -> Option<Self> {
        match value {
            Value::Array(items) if !items.is_empty() => Some(Self::Array(items.iter())),
            Value::Object(map) if !map.is_empty() => Some(Self::Object(map.values())),
            _ => None,
        }
    }
}

impl<'a> Iterator for Children<'a> {
    type Item = &'a Value;

    fn next(&mut self) -> Option<&'a Value> {
        match self {
            Self::Array(items) => items.next(),
            Self::Object(values) => values.next(),
        }
    }
}

/// Drops `value` without recursing: `serde_json::Value`'s own `Drop` recurses once
/// per level, so a value nested deeper than a thread's stack allows would abort the
/// process where it is dropped.
pub(crate) fn drop_flat(value: Value) {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => pending.extend(map.into_iter().map(|(_, value)| value)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn nested(depth: usize) -> Value {
        // Not `json!([value])`: the macro serializes an expression, recursively.
        let mut value = json!(1);
        for _ in 0..depth {
            value = Value::Array(vec![value]);
        }
        value
    }

    #[test]
    fn depth_counts_containers() {
        assert!(!deeper_than(&json!(1), 0));
        assert!(deeper_than(&json!({}), 0));
        assert!(!deeper_than(&json!({}), 1));
        assert!(!deeper_than(&json!({"a": [1, {"b": 2}]}), 3));
        assert!(deeper_than(&json!({"a": [1, {"b": [2]}]}), 3));
        let value = nested(10);
        assert!(!deeper_than(&value, 10) && deeper_than(&value, 9));
        drop_flat(value);
    }

    #[test]
    fn depth_is_exact_on_both_sides_of_the_recursion_budget() {
        for depth in 0..3 * SHALLOW {
            // A sibling array at every level, one deeper than its object: the walk
            // must look past the first child, and `depth` objects nest `depth + 1` deep.
            let mut value = json!(1);
            for _ in 0..depth {
                value = json!({"flat": [1, 2], "deeper": value});
            }
            let nests = if depth == 0 { 0 } else { depth + 1 };
            for limit in 0..3 * SHALLOW {
                let expected = nests > limit;
                assert_eq!(
                    deeper_than(&value, limit),
                    expected,
                    "depth {depth}, limit {limit}"
                );
            }
        }
    }

    #[test]
    fn a_very_deep_value_is_measured_and_dropped_on_a_small_stack() {
        let handle = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(|| {
                let value = nested(200_000);
                let deep = deeper_than(&value, 64);
                drop_flat(value);
                deep
            })
            .unwrap();
        assert!(handle.join().unwrap());
    }
}
