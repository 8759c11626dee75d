//! Base tools defined at run time: JSON schemas and a closure over JSON values.

use std::future::Future;
use std::sync::Arc;

use schemars::Schema;
use serde_json::Value;
use typed_builder::TypedBuilder;

use crate::combo::Combo;
use crate::error::{ArgsError, BoxError, ToolError};
use crate::name::{InvalidName, Name};
use crate::schema::{ArgNames, Args};
use crate::stack::Stack;
use crate::stack::erased::DynStack;
use crate::tool::{BaseTool, Presentation, ToolSpec};

/// A base tool defined at run time: JSON schemas and a closure over JSON values.
///
/// Arguments are checked against the input schema's property names (strictly, as
/// everywhere); the body validates the rest. A body that fails with an
/// [`ArgsError`](crate::error::ArgsError) (as [`decode_args`](crate::extension::decode_args)
/// returns) is reported as [`ToolError::InvalidArguments`](crate::ToolError), as a
/// typed tool's would be; any other error as [`ToolError::Body`](crate::ToolError).
///
/// ```
/// use serde_json::json;
/// use toolgraft::{Stack, ToolError};
/// use toolgraft::extension::decode_args;
/// use toolgraft::runtime::DynTool;
///
/// #[derive(serde::Deserialize)]
/// struct Pair { a: f64, b: f64 }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let add = DynTool::builder()
///     .name("add")
///     .description("Add two numbers.")
///     .input_schema(schemars::json_schema!({
///         "type": "object",
///         "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
///         "required": ["a", "b"],
///     }))
///     .body(|args| async move {
///         let Pair { a, b } = decode_args(args)?;
///         Ok(json!(a + b))
///     })
///     .build()?;
/// let args = json!({"a": 1, "b": 2}).as_object().unwrap().clone();
/// assert_eq!(add.call(args).await?, json!(3.0));
/// let wrong = json!({"a": 1, "b": "two"}).as_object().unwrap().clone();
/// let Err(ToolError::InvalidArguments { field, .. }) = add.call(wrong).await else { panic!() };
/// assert_eq!(field.as_deref(), Some("b"));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DynTool {
    spec: Arc<ToolSpec>,
    args: ArgNames,
    stack: DynStack,
}

impl std::fmt::Debug for DynTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DynTool").field(&self.spec.name).finish()
    }
}

/// The fields of a [`DynTool`], as its builder collects them.
// The builder's own fields (a body closure among them), not a value users hold.
#[allow(missing_debug_implementations)]
#[doc(hidden)]
#[derive(TypedBuilder)]
#[builder(
    builder_method(vis = "", name = __builder),
    builder_type(name = DynToolBuilder, doc = "Builds a [`DynTool`]: set `name`, `description`, `input_schema` and `body` (and `output_schema` and `presentation`, optionally), then `build()`."),
    build_method(into = Result<DynTool, InvalidName>)
)]
pub struct DynToolParts {
    #[builder(setter(into))]
    name: String,
    #[builder(setter(into))]
    description: String,
    input_schema: Schema,
    #[builder(default, setter(strip_option))]
    output_schema: Option<Schema>,
    /// Its title, annotations and protocol fields ([`Presentation`]).
    #[builder(default)]
    presentation: Presentation,
    #[builder(setter(
        fn transform<F, Fut>(body: F) -> SharedBody
        where
            F: Fn(Args) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = Result<Value, BoxError>> + Send + 'static,
        {
            Arc::new(move |args| Box::pin(body(args)) as BoxedBody)
        }
    ))]
    body: SharedBody,
}

type BoxedBody = std::pin::Pin<Box<dyn Future<Output = Result<Value, BoxError>> + Send>>;
type SharedBody = Arc<dyn Fn(Args) -> BoxedBody + Send + Sync>;

impl From<DynToolParts> for Result<DynTool, InvalidName> {
    fn from(parts: DynToolParts) -> Self {
        let name = Name::new(&parts.name)?;
        let body = parts.body;
        let stack = DynStack::from_fn(name.clone(), move |args| body(args));
        Ok(DynTool {
            args: ArgNames::of(&parts.input_schema),
            spec: Arc::new(ToolSpec {
                name,
                description: parts.description,
                input_schema: Arc::new(parts.input_schema),
                output_schema: parts.output_schema.map(Arc::new),
                presentation: Arc::new(parts.presentation),
            }),
            stack,
        })
    }
}

impl DynTool {
    /// Starts a combo on this tool: add extensions with [`Combo::with`].
    pub fn combo(&self) -> Combo<Self> {
        Combo::on(self)
    }

    /// Starts building a run-time tool.
    pub fn builder() -> DynToolBuilder<((), (), (), (), (), ())> {
        DynToolParts::__builder()
    }
}

impl Stack for DynTool {
    type Input = Args;
    type Output = Value;

    fn call(&self, input: Args) -> impl Future<Output = Result<Value, ToolError>> + Send {
        self.stack.call_json(input)
    }

    fn decode(&self, args: Args) -> Result<Args, ArgsError> {
        self.args.check(&args)?;
        Ok(args)
    }
}

impl crate::tool::Hinted for DynTool {
    type Hints = crate::tool::AtBind;
}

impl crate::tool::sealed::BaseTool for DynTool {}

impl BaseTool for DynTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}
