//! `chain`: runs the layer below, then another bound tool, by name, on (a selection
//! of) the first result.

use schemars::Schema;
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{ArgsError, ArgsErrorKind, ChainErrorKind, ToolError, shorten, shorten_json};
use crate::extension::{Extension, Layer, LayerInput};
use crate::kind::Transformer;
use crate::kind::property::Anywhere;
use crate::name::Name;
use crate::schema::Args;
use crate::schema::Nest;
use crate::stack::Stack;
use crate::toolset::{Toolset, WeakToolset};

/// How deep chains may call chains in one task, so a cycle (`a` chaining into `b`
/// chaining into `a`) ends with an error instead of exhausting the stack.
pub const MAX_CHAIN_DEPTH: usize = 16;

/// A chain call: the layer input's arguments, the tool to call next, and what of
/// the first result to pass it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChainInput<I> {
    /// The layer input's arguments.
    #[serde(flatten)]
    pub input: I,
    /// The bound name to call with the selection.
    pub next_tool: String,
    /// A JSON Pointer into the first result (`""`, the default, is all of it); it
    /// must select an object: the next tool's arguments.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub select: String,
}

/// A transformer whose branch takes the layer input's parameters plus `next_tool`
/// and `select`: it calls the layer below, selects from the result with a JSON
/// Pointer, and calls `next_tool` by name with the selection as its arguments.
///
/// Its own `next_tool` and `select` params take precedence over parameters of the
/// layer input with the same names.
///
/// ```
/// use frunk::hlist;
/// use serde_json::json;
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::Chain;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Find { city: String }
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Forecast { lat: f64 }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let find = Tool::builder().name("find").description("Locate a city.")
///     .body(|input: Find| async move { Ok(json!({"city": input.city, "at": {"lat": 38.7}})) })
///     .build()?;
/// let forecast = Tool::builder().name("forecast").description("Forecast at a place.")
///     .body(|input: Forecast| async move { Ok(format!("sunny at {}", input.lat)) })
///     .build()?;
/// let toolset = Toolset::new();
/// toolset.bind(&forecast, hlist![])?;
/// toolset.bind(&find, hlist![find.combo().with(Chain::new(&toolset))])?;
/// let out = toolset
///     .call("find_chain", json!({"city": "Lisbon", "next_tool": "forecast", "select": "/at"}))
///     .await?;
/// assert_eq!(out, json!("sunny at 38.7"));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Chain {
    toolset: WeakToolset,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain").finish_non_exhaustive()
    }
}

impl Chain {
    /// A chain that calls tools bound in `toolset` (held weakly: a chain bound in
    /// its own toolset does not keep it alive). It calls that toolset wherever it is
    /// bound: register one `Chain` per toolset.
    pub fn new(toolset: &Toolset) -> Self {
        Self {
            toolset: toolset.downgrade(),
        }
    }
}

impl Extension for Chain {
    type Kind = Transformer;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "chain"
    }

    fn own_params(&self) -> &[&'static str] {
        &["next_tool", "select"]
    }

    fn describe(&self, running: &str) -> Option<String> {
        Some(format!(
            "{running} (Chain: then calls `next_tool` with the part of the result that `select`, a JSON Pointer, picks.)"
        ))
    }

    fn input_schema(&self, below: &LayerInput<'_, Self>) -> Option<Schema> {
        let mut nest = Nest::default();
        let mut own = nest.nested(below.input_schema);
        let object = own.as_object_mut()?;
        let properties = object.entry("properties").or_insert_with(|| json!({}));
        let properties = properties.as_object_mut()?;
        properties.insert(
            "next_tool".to_owned(),
            json!({"type": "string", "description": "The bound tool to call next, by name."}),
        );
        properties.insert(
            "select".to_owned(),
            json!({"type": "string", "default": "",
                   "description": "A JSON Pointer into the first result; it must select the next tool's arguments (an object)."}),
        );
        let required = object.entry("required").or_insert_with(|| json!([]));
        if let Some(required) = required.as_array_mut() {
            required.push(json!("next_tool"));
        }
        Some(nest.root(own))
    }
}

impl<S: Stack> Layer<S> for Chain {
    type Branch = Chained<S>;

    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Chained<S> {
        Chained {
            inner,
            branch: below.branch.clone(),
            toolset: self.toolset,
        }
    }
}

/// The branch [`Chain`] mints.
pub struct Chained<S> {
    inner: S,
    branch: Name,
    toolset: WeakToolset,
}

impl<S> std::fmt::Debug for Chained<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Chained").field(&self.branch).finish()
    }
}

impl<S: Clone> Clone for Chained<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            branch: self.branch.clone(),
            toolset: self.toolset.clone(),
        }
    }
}

impl<S: Stack> Chained<S> {
    fn stop(&self, kind: ChainErrorKind, problem: String) -> ToolError {
        ToolError::Chain {
            tool: self.branch.clone(),
            kind,
            problem,
        }
    }

    /// Whether calling `next` would run this chain again: `next` is this branch, or
    /// a branch built on it (same base, and its chain starts with this one's).
    fn runs_again(&self, toolset: &Toolset, next: &str) -> bool {
        let (Some(this), Some(next)) = (toolset.info(&self.branch), toolset.info(next)) else {
            return next == self.branch.as_str();
        };
        this.base == next.base && next.chain.starts_with(&this.chain)
    }
}

impl<S: Stack> Stack for Chained<S> {
    type Input = ChainInput<S::Input>;
    type Output = Value;

    async fn call(&self, input: Self::Input) -> Result<Value, ToolError> {
        let toolset = self.toolset.upgrade().ok_or_else(|| {
            self.stop(
                ChainErrorKind::ToolsetGone,
                "the toolset it chains in is gone".to_owned(),
            )
        })?;
        if !toolset.contains(&input.next_tool) {
            let problem = format!("`{}` is not a bound tool", shorten(&input.next_tool));
            return Err(ArgsError::field("next_tool", problem).for_tool(&self.branch));
        }
        if self.runs_again(&toolset, &input.next_tool) {
            let problem = format!(
                "`{}` cannot chain into itself (`{}` runs it again)",
                self.branch,
                shorten(&input.next_tool)
            );
            return Err(self.stop(ChainErrorKind::IntoItself, problem));
        }
        if !(input.select.is_empty() || input.select.starts_with('/')) {
            let problem = format!(
                "`{}` is not a JSON Pointer (it starts with `/`, or is empty)",
                shorten(&input.select)
            );
            return Err(ArgsError::field("select", problem).for_tool(&self.branch));
        }
        let depth = crate::context::current();
        if depth >= MAX_CHAIN_DEPTH {
            let problem = format!("chains called chains {MAX_CHAIN_DEPTH} deep; is there a cycle?");
            return Err(self.stop(ChainErrorKind::TooDeep, problem));
        }
        let first = self.inner.call(input.input).await?;
        let first = crate::stack::to_json(first).map_err(|source| ToolError::Output {
            tool: self.branch.clone(),
            source: source.into(),
        })?;
        let Some(selected) = first.pointer(&input.select) else {
            let problem = format!(
                "`select` {:?} selects nothing in {}",
                shorten(&input.select),
                shown(&first)
            );
            return Err(self.stop(ChainErrorKind::SelectsNothing, problem));
        };
        if !selected.is_object() {
            let problem = format!(
                "`select` {:?} picks {}, not the arguments object `{}` takes",
                shorten(&input.select),
                shown(selected),
                shorten(&input.next_tool)
            );
            return Err(self.stop(ChainErrorKind::NotArguments, problem));
        }
        crate::context::at(depth + 1, toolset.call(&input.next_tool, selected.clone())).await
    }

    fn decode(&self, mut args: Args) -> Result<Self::Input, ArgsError> {
        let next_tool = match args.remove("next_tool") {
            Some(Value::String(next_tool)) => next_tool,
            Some(other) => {
                return Err(ArgsError::field(
                    "next_tool",
                    format!("expected a tool name, not `{}`", shorten_json(&other)),
                ));
            }
            None => {
                let mut missing = ArgsError::field("next_tool", "missing field `next_tool`");
                missing.kind = ArgsErrorKind::MissingField;
                return Err(missing);
            }
        };
        let select = match args.remove("select") {
            Some(Value::String(select)) => select,
            Some(other) => {
                return Err(ArgsError::field(
                    "select",
                    format!("expected a JSON Pointer, not `{}`", shorten_json(&other)),
                ));
            }
            None => String::new(),
        };
        Ok(ChainInput {
            input: self.inner.decode(args)?,
            next_tool,
            select,
        })
    }
}

fn shown(value: &Value) -> String {
    shorten_json(value)
}
