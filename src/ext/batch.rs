//! `batch`: one call runs a list of inputs through the layer below.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};

use futures_util::{StreamExt, stream};
use serde::de::DeserializeOwned;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Value, json};

use crate::Name;
use crate::combo::typestate::{Assemble, Inside, ParamBagRef, ReservedIn, There, Token};
use crate::error::{ArgsError, ToolError, shorten_json};
use crate::extension::{ConfigError, Configurable, Extension, Layer, LayerInput};
use crate::extension::{Stack, decode_args};
use crate::kind::Transformer;
use crate::kind::property::Anywhere;
use crate::schema::{self, Args, Nest, Schema};

/// The operator's side of a batch: at most `max_items` items per call (1 to
/// [`MAX_ITEMS`], default 100), checked before any item is decoded or copied.
///
/// ```
/// let config: toolgraft::ext::batch::BatchConfig = serde_json::from_str("{}")?;
/// assert_eq!(config.max_items, 100);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BatchConfig {
    /// The most items one call may carry.
    pub max_items: usize,
}

/// The most items a batch may be configured to take per call.
///
/// ```
/// use toolgraft::Extension;
/// use toolgraft::ext::{Batch, batch::MAX_ITEMS};
/// assert!(Batch::max_items(MAX_ITEMS).check_config().is_ok());
/// assert!(Batch::max_items(MAX_ITEMS + 1).check_config().is_err());
/// ```
pub const MAX_ITEMS: usize = 100_000;

impl Default for BatchConfig {
    fn default() -> Self {
        Self { max_items: 100 }
    }
}

/// A batch call: the items, and how to run them.
///
/// ```
/// use toolgraft::ext::BatchInput;
/// let input = BatchInput::parallel(vec![1, 2, 3]).with_max_items(2).with_keep_going();
/// assert_eq!((input.parallel, input.max_concurrent, input.fail_fast), (true, Some(2), false));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchInput<I> {
    /// One input of the layer below per item.
    pub items: Vec<I>,
    /// Run items concurrently (in input order all the same).
    pub parallel: bool,
    /// With `parallel`, how many items run at once (at least 1; default: all).
    pub max_concurrent: Option<usize>,
    /// Stop at the first failed item and fail the call (default); otherwise a
    /// failed item's slot carries its error.
    pub fail_fast: bool,
}

impl<I> BatchInput<I> {
    /// Items one after the other, failing fast.
    ///
    /// ```
    /// let input = toolgraft::ext::BatchInput::sequential(vec!["a", "b"]);
    /// assert!(!input.parallel && input.fail_fast);
    /// ```
    pub fn sequential(items: Vec<I>) -> Self {
        Self {
            items,
            parallel: false,
            max_concurrent: None,
            fail_fast: true,
        }
    }

    /// Items concurrently, failing fast.
    ///
    /// ```
    /// let input = toolgraft::ext::BatchInput::parallel(vec![1, 2]);
    /// assert!(input.parallel && input.max_concurrent.is_none());
    /// ```
    pub fn parallel(items: Vec<I>) -> Self {
        Self {
            parallel: true,
            ..Self::sequential(items)
        }
    }

    /// At most `limit` items at once (see [`BatchInput`]'s example).
    pub fn with_max_items(self, limit: usize) -> Self {
        Self {
            max_concurrent: Some(limit),
            ..self
        }
    }

    /// Run every item; failed ones carry their error (see [`BatchInput`]'s example).
    pub fn with_keep_going(self) -> Self {
        Self {
            fail_fast: false,
            ..self
        }
    }
}

/// One slot of a batch result. Serializes as the item's value, or as
/// `{"error": "<message>"}`.
///
/// ```
/// use toolgraft::ToolError;
/// use toolgraft::ext::BatchItem;
/// let slots = vec![BatchItem::Ok(1), BatchItem::Err(ToolError::UnknownTool { name: "x".into() })];
/// assert_eq!(serde_json::to_value(&slots)?, serde_json::json!([1, {"error": "unknown tool `x`"}]));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug)]
pub enum BatchItem<O> {
    /// The item's result.
    Ok(O),
    /// The item's error (only with `fail_fast: false`).
    Err(ToolError),
}

impl<O> BatchItem<O> {
    /// The result, if the item succeeded.
    ///
    /// ```
    /// assert_eq!(toolgraft::ext::BatchItem::Ok(3).ok(), Some(3));
    /// ```
    pub fn ok(self) -> Option<O> {
        match self {
            BatchItem::Ok(value) => Some(value),
            BatchItem::Err(_) => None,
        }
    }
}

impl<O: Serialize> Serialize for BatchItem<O> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            BatchItem::Ok(value) => value.serialize(serializer),
            BatchItem::Err(error) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("error", &error.to_string())?;
                map.end()
            }
        }
    }
}

/// Reads what [`Serialize`] wrote: a value, or `{"error": "<message>"}` when the
/// value does not read as `O` (the error comes back as [`ToolError::Reported`]).
/// A backend that relocates a batch relays its items this way.
///
/// ```
/// use toolgraft::ext::BatchItem;
/// let items: Vec<BatchItem<i64>> = serde_json::from_str(r#"[1, {"error": "no"}]"#)?;
/// assert_eq!(items[0].clone().ok(), Some(1));
/// assert_eq!(items[1].clone().ok(), None);
/// # Ok::<(), serde_json::Error>(())
/// ```
impl<'de, O: DeserializeOwned> Deserialize<'de> for BatchItem<O> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let reported = match &value {
            Value::Object(map) if map.len() == 1 => map.get("error").and_then(Value::as_str),
            _ => None,
        };
        match (O::deserialize(&value), reported) {
            (Ok(output), _) => Ok(BatchItem::Ok(output)),
            (Err(_), Some(message)) => Ok(BatchItem::Err(ToolError::Reported {
                message: message.to_owned(),
            })),
            (Err(error), None) => Err(serde::de::Error::custom(error)),
        }
    }
}

/// A transformer whose branch takes `{items, parallel, max_concurrent, fail_fast}`
/// and returns the list of results in input order.
///
/// ```
/// use serde_json::json;
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::Batch;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Square { n: i64 }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let square = Tool::builder().name("square").description("Square a number.")
///     .body(|i: Square| async move { Ok(i.n * i.n) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((square.combo().with(Batch::default()),))?;
/// let out = toolset.call("square_batch",
///     json!({"items": [{"n": 1}, {"n": 2}, {"n": 3}], "parallel": true})).await?;
/// assert_eq!(out, json!([1, 4, 9]));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Batch {
    config: BatchConfig,
}

impl Batch {
    /// A batch with the given config.
    ///
    /// ```
    /// use toolgraft::ext::{batch::BatchConfig, Batch};
    /// let batch = Batch::new(BatchConfig { max_items: 500 });
    /// # let _ = batch;
    /// ```
    pub fn new(config: BatchConfig) -> Self {
        Self { config }
    }

    /// A batch accepting at most `max_items` items per call.
    ///
    /// ```
    /// use toolgraft::Extension;
    /// let batch = toolgraft::ext::Batch::max_items(10);
    /// assert_eq!(batch.config(), Some(serde_json::json!({"max_items": 10})));
    /// ```
    pub fn max_items(max_items: usize) -> Self {
        Self::new(BatchConfig { max_items })
    }
}

impl Extension for Batch {
    type Kind = Transformer;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "batch"
    }

    fn describe(&self, running: &str) -> Option<String> {
        Some(format!(
            "{running} (Batch: pass `items`, a list of argument objects, up to {}; returns one result per item.)",
            self.config.max_items
        ))
    }

    fn check_config(&self) -> Result<(), ConfigError> {
        if self.config.max_items == 0 {
            return Err(ConfigError::new("max_items", "must be at least 1"));
        }
        if self.config.max_items > MAX_ITEMS {
            return Err(ConfigError::new(
                "max_items",
                format!(
                    "{} is over the limit of {MAX_ITEMS}; split larger work into several calls",
                    self.config.max_items
                ),
            ));
        }
        Ok(())
    }

    fn config(&self) -> Option<Value> {
        (self.config != BatchConfig::default())
            .then(|| serde_json::to_value(&self.config).ok())
            .flatten()
    }

    fn input_schema(&self, below: &LayerInput<'_, Self>) -> Option<schemars::Schema> {
        let mut nest = Nest::default();
        let item = nest.nested(below.input_schema);
        let mut body = input_template().clone();
        if let Some(items) = field(&mut body, &["properties", "items"]) {
            set(
                items,
                "description",
                Value::String(format!(
                    "Arguments of `{}`, one object per item.",
                    below.name
                )),
            );
            set(items, "items", item);
            set(items, "maxItems", Value::from(self.config.max_items));
        }
        Some(nest.root(body))
    }

    fn output_schema(&self, below: &LayerInput<'_, Self>) -> Option<schemars::Schema> {
        below.output_schema.map(output_schema)
    }

    fn shared_output_schema(&self, below: &LayerInput<'_, Self>) -> Option<Arc<Schema>> {
        // It depends on the layer's output schema alone: one per schema, shared.
        let layer = below.shared_output_schema()?;
        schema::derived("batch-output", layer, None, || {
            Ok::<_, Infallible>(output_schema(layer))
        })
        .ok()
    }
}

/// A batch branch's output schema over a layer's `output`.
fn output_schema(output: &Schema) -> Schema {
    let mut nest = Nest::default();
    let item = nest.nested(output);
    let mut body = output_template().clone();
    if let Some(Value::Array(any_of)) = field(&mut body, &["items", "anyOf"])
        && let Some(slot) = any_of.first_mut()
    {
        *slot = item;
    }
    nest.root(body)
}

/// A batch branch's input schema but for what depends on the layer (its name, its
/// schema) and the config: built once and cloned for every branch, since building
/// it hashes and allocates every key again.
fn input_template() -> &'static Value {
    static TEMPLATE: OnceLock<Value> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        json!({
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "description": null,
                    "items": null,
                    "maxItems": null,
                },
                "parallel": {
                    "type": "boolean",
                    "description": "Run the items concurrently; results keep input order.",
                    "default": false,
                },
                "max_concurrent": {
                    "type": "integer",
                    "description": "With `parallel`, how many items run at once (default: all).",
                    "minimum": 1,
                },
                "fail_fast": {
                    "type": "boolean",
                    "description": "Stop at the first failed item; otherwise its slot carries {\"error\": ...}.",
                    "default": true,
                },
            },
            "required": ["items"],
        })
    })
}

/// A batch branch's output schema but for the item's (see [`input_template`]).
fn output_template() -> &'static Value {
    static TEMPLATE: OnceLock<Value> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        json!({
            "type": "array",
            "items": {
                "anyOf": [
                    null,
                    {
                        "type": "object",
                        "properties": {"error": {"type": "string"}},
                        "required": ["error"],
                    },
                ],
            },
        })
    })
}

/// The value at `path` (object keys) in `value`.
fn field<'v>(value: &'v mut Value, path: &[&str]) -> Option<&'v mut Value> {
    path.iter()
        .try_fold(value, |value, key| value.as_object_mut()?.get_mut(*key))
}

/// Replaces the value of `key`, in place (`value[key] = ..` would allocate the key
/// again, to insert it if it were missing).
fn set(object: &mut Value, key: &str, new: Value) {
    if let Some(slot) = object.as_object_mut().and_then(|map| map.get_mut(key)) {
        *slot = new;
    }
}

impl Configurable for Batch {
    type Config = BatchConfig;

    fn from_config(config: BatchConfig) -> Result<Self, ConfigError> {
        let batch = Self::new(config);
        batch.check_config()?;
        Ok(batch)
    }
}

impl<S: Stack> Layer<S> for Batch {
    type Branch = Batched<S>;

    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Batched<S> {
        Batched {
            inner,
            branch: below.branch.clone(),
            config: self.config,
        }
    }
}

/// The branch [`Batch`] mints: takes a [`BatchInput`] of the layer's input, returns
/// one [`BatchItem`] per item (see [`Batch`]'s example).
#[derive(Clone)]
pub struct Batched<S> {
    inner: S,
    branch: Name,
    config: BatchConfig,
}

impl<S> std::fmt::Debug for Batched<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batched")
            .field("branch", &self.branch)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The batch options, as the JSON arguments carry them (items decoded apart).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default)]
    parallel: bool,
    #[serde(default)]
    max_concurrent: Option<usize>,
    #[serde(default = "yes")]
    fail_fast: bool,
}

fn yes() -> bool {
    true
}

impl<S: Stack> Batched<S> {
    /// The batch rules, the same for typed and JSON calls: how many items may run
    /// at once, or why the call is refused before any item runs.
    fn concurrency(
        &self,
        items: usize,
        parallel: bool,
        max_concurrent: Option<usize>,
    ) -> Result<usize, ArgsError> {
        if items > self.config.max_items {
            return Err(ArgsError::field(
                "items",
                format!(
                    "{items} items is over the limit of {}",
                    self.config.max_items
                ),
            ));
        }
        match max_concurrent {
            Some(0) => Err(ArgsError::field("max_concurrent", "must be at least 1")),
            Some(limit) if parallel => Ok(limit.min(items.max(1))),
            _ if parallel => Ok(items.max(1)),
            _ => Ok(1),
        }
    }
}

impl<S: Stack> Stack for Batched<S> {
    type Input = BatchInput<S::Input>;
    type Output = Vec<BatchItem<S::Output>>;

    async fn call(&self, input: Self::Input) -> Result<Self::Output, ToolError> {
        let at_once = self
            .concurrency(input.items.len(), input.parallel, input.max_concurrent)
            .map_err(|err| err.for_tool(&self.branch))?;
        let mut slots: Vec<Option<BatchItem<S::Output>>> = Vec::new();
        slots.resize_with(input.items.len(), || None);
        // Unordered, so a failure ends a fail-fast batch when it happens, not when
        // the items before it are done; slots put the results back in input order.
        let mut results = stream::iter(input.items.into_iter().enumerate())
            .map(|(at, item)| async move { (at, self.inner.call(item).await) })
            .buffer_unordered(at_once);
        while let Some((at, result)) = results.next().await {
            slots[at] = Some(match result {
                Ok(value) => BatchItem::Ok(value),
                Err(error) if input.fail_fast => return Err(error),
                Err(error) => BatchItem::Err(error),
            });
        }
        Ok(slots.into_iter().flatten().collect())
    }

    fn decode(&self, mut args: Args) -> Result<Self::Input, ArgsError> {
        let items = match args.remove("items") {
            Some(Value::Array(items)) => items,
            Some(other) => {
                return Err(ArgsError::field(
                    "items",
                    format!(
                        "expected a list of argument objects, not `{}`",
                        shorten_json(&other)
                    ),
                ));
            }
            None => {
                let mut missing = ArgsError::field("items", "missing field `items`");
                missing.kind = crate::error::ArgsErrorKind::MissingField;
                return Err(missing);
            }
        };
        // Limits first: an oversized batch is refused before its items are decoded.
        let options: Options = decode_args(args)?;
        self.concurrency(items.len(), options.parallel, options.max_concurrent)?;
        let items = items
            .into_iter()
            .enumerate()
            .map(|(at, item)| match item {
                Value::Object(item) => self
                    .inner
                    .decode(item)
                    .map_err(|err| err.within(&format!("items[{at}]"))),
                other => Err(ArgsError::field(
                    format!("items[{at}]"),
                    format!(
                        "expected an argument object, not `{}`",
                        shorten_json(&other)
                    ),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BatchInput {
            items,
            parallel: options.parallel,
            max_concurrent: options.max_concurrent,
            fail_fast: options.fail_fast,
        })
    }
}

// Typed calls: reserved params given by type reach every item's layers (see
// `Assemble`); never at `Here`, so a whole input given as is reads one way only.
macro_rules! assemble_items {
    ($($deeper:ident),*) => {$(
        /// Every item of a batch gets the params, each its own copy.
        #[diagnostic::do_not_recommend]
        impl<I, C, Index> Assemble<BatchInput<C>, Inside<$deeper<Index>>> for BatchInput<I>
        where
            I: Assemble<C, $deeper<Index>>,
        {
            fn assemble(core: BatchInput<C>, bag: &mut ParamBagRef<'_>) -> Self {
                let BatchInput {
                    items,
                    parallel,
                    max_concurrent,
                    fail_fast,
                } = core;
                BatchInput {
                    items: bag.each(items),
                    parallel,
                    max_concurrent,
                    fail_fast,
                }
            }
        }
    )*};
}

assemble_items!(There, Inside);

#[diagnostic::do_not_recommend]
impl<P: ReservedIn<I, Index>, I, Index> ReservedIn<BatchInput<I>, Inside<Index>> for P {
    fn sealed(_: Token) {}
}
