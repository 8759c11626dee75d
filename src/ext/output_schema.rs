//! `output_schema`: declares a JSON Schema for the branch's result, and holds every
//! result to it.

use std::sync::Arc;

use schemars::Schema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Name;
use crate::error::{ArgsError, ToolError, shorten};
use crate::extension::{
    ConfigError, Configurable, Extension, Layer, LayerInput, Transform, Transformed,
};
use crate::extension::{Next, Stack};
use crate::kind::Transformer;
use crate::kind::property::Anywhere;
use crate::schema::Args;

/// A result that does not match the output schema its branch declares: the error
/// an [`OutputSchema`] branch returns, as [`ToolError::Extension`], with the JSON
/// Pointer and the offending value.
///
/// ```
/// use std::sync::Arc;
/// use toolgraft::{Name, ToolError};
/// use toolgraft::ext::output_schema::OutputSchemaError;
/// let err: ToolError = OutputSchemaError::new(
///     Name::new("get_user_output_schema")?, "/name", Arc::new("Al".into()), "\"Al\" is shorter than 3 characters",
/// ).into();
/// assert_eq!(err.to_string(),
///     r#"the result of `get_user_output_schema` does not match its output schema at `/name`: "Al" is shorter than 3 characters"#);
/// assert_eq!(err.downcast_ref::<OutputSchemaError>().map(|e| e.path.as_str()), Some("/name"));
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("the result of `{tool}` does not match its output schema at `{path}`: {problem}")]
#[non_exhaustive]
pub struct OutputSchemaError {
    /// The branch that validated the result.
    pub tool: Name,
    /// Where in the result, as a JSON Pointer (`/name`; empty for the whole).
    pub path: String,
    /// The offending value (shared: results can be large).
    pub value: Arc<Value>,
    /// What is wrong with it.
    pub problem: String,
}

impl OutputSchemaError {
    /// A mismatch at `path`: what a backend rebuilds from one reported by another
    /// process.
    ///
    /// ```
    /// use toolgraft::Name;
    /// use toolgraft::ext::output_schema::OutputSchemaError;
    /// let err = OutputSchemaError::new(Name::new("f")?, "", Default::default(), "null is not an object");
    /// assert!(err.to_string().ends_with("at ``: null is not an object"));
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn new(
        tool: Name,
        path: impl Into<String>,
        value: Arc<Value>,
        problem: impl Into<String>,
    ) -> Self {
        Self {
            tool,
            path: path.into(),
            value,
            problem: problem.into(),
        }
    }
}

impl From<OutputSchemaError> for ToolError {
    /// [`ToolError::Extension`], from extension `output_schema`.
    fn from(error: OutputSchemaError) -> Self {
        ToolError::extension(error.tool.clone(), Name::lossy("output_schema"), error)
    }
}

/// The config: `{"schema": <JSON Schema>}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSchemaConfig {
    /// The schema results must match (draft 2020-12 unless it says otherwise).
    pub schema: Value,
}

/// A transformer whose branch advertises `schema` as its output schema and
/// validates each result against it; a result that does not match is an
/// [`OutputSchemaError`] carrying the JSON Pointer and the offending value. An
/// invalid schema is refused when binding.
///
/// ```
/// use serde_json::json;
/// use toolgraft::{Tool, ToolError, Toolset};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::OutputSchema;
/// use toolgraft::ext::output_schema::OutputSchemaError;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct GetUser { user_id: i64 }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let get_user = Tool::builder().name("get_user").description("Look a user up.")
///     .body(|input: GetUser| async move {
///         Ok(json!({"name": if input.user_id == 1 { "Alice" } else { "Al" }}))
///     })
///     .build()?;
/// let schema = json!({"type": "object", "properties": {"name": {"type": "string", "minLength": 3}},
///                     "required": ["name"]});
/// let toolset = Toolset::new();
/// toolset.bind((get_user.combo().with(OutputSchema::new(schema)?),))?;
/// assert_eq!(toolset.call("get_user_output_schema", json!({"user_id": 1})).await?, json!({"name": "Alice"}));
/// let err = toolset.call("get_user_output_schema", json!({"user_id": 2})).await.unwrap_err();
/// let mismatch = err.downcast_ref::<OutputSchemaError>().expect("a mismatch");
/// assert!(mismatch.path == "/name" && *mismatch.value == "Al");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct OutputSchema {
    schema: Arc<Value>,
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("OutputSchema").field(&self.schema).finish()
    }
}

impl OutputSchema {
    /// An `output_schema` for `schema`; refused if `schema` is not a valid JSON Schema.
    pub fn new(schema: Value) -> Result<Self, ConfigError> {
        let validator = jsonschema::validator_for(&schema).map_err(|err| {
            ConfigError::new(
                "schema",
                format!("not a valid JSON Schema: {}", shorten(&err.to_string())),
            )
        })?;
        Ok(Self {
            schema: Arc::new(schema),
            validator: Arc::new(validator),
        })
    }
}

impl Extension for OutputSchema {
    type Kind = Transformer;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "output_schema"
    }

    fn config(&self) -> Option<Value> {
        Some(serde_json::json!({ "schema": *self.schema }))
    }

    /// The layer input's own parameters: this transformer reshapes only the output.
    fn input_schema(&self, below: &LayerInput<'_, Self>) -> Option<Schema> {
        Some(below.input_schema.clone())
    }

    fn output_schema(&self, _: &LayerInput<'_, Self>) -> Option<Schema> {
        Schema::try_from((*self.schema).clone()).ok()
    }
}

impl Configurable for OutputSchema {
    type Config = OutputSchemaConfig;

    fn from_config(config: OutputSchemaConfig) -> Result<Self, ConfigError> {
        Self::new(config.schema)
    }
}

impl<S: Stack> Layer<S> for OutputSchema {
    type Branch = Transformed<Self, S>;

    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch {
        Transformed::new(self, inner, below)
    }
}

impl<S: Stack> Transform<S> for OutputSchema {
    type Input = S::Input;
    type Output = Value;

    async fn call(&self, next: Next<'_, S, Self>, input: S::Input) -> Result<Value, ToolError> {
        let output = next.call(input).await?;
        let value = crate::extension::to_json(output).map_err(|source| ToolError::Output {
            tool: next.branch().clone(),
            source: source.into(),
        })?;
        if let Err(mismatch) = self.validator.validate(&value) {
            return Err(OutputSchemaError::new(
                next.branch().clone(),
                mismatch.instance_path().to_string(),
                Arc::new(mismatch.instance().clone().into_owned()),
                shorten(&mismatch.to_string()),
            )
            .into());
        }
        Ok(value)
    }

    fn decode(&self, below: &S, args: Args) -> Result<S::Input, ArgsError> {
        below.decode(args)
    }
}
