//! `chain`: runs the layer below, then another tool, by a name the toolset publishes, on (a selection
//! of) the first result.

use schemars::Schema;
use serde::Serialize;
use serde_json::{Value, json};

use crate::Name;
use crate::combo::typestate::{Assemble, Inside, ParamBagRef, ReservedIn, There, Token};
use crate::context::{self, ChainDepth, Identity};
use crate::error::{ArgsError, ArgsErrorKind, ToolError, shorten, shorten_json};
#[cfg(feature = "jq")]
use crate::extension::ConfigError;
use crate::extension::Stack;
use crate::extension::{Extension, Layer, LayerInput};
use crate::kind::Transformer;
use crate::kind::property::Anywhere;
use crate::schema::Args;
use crate::schema::Nest;
use crate::toolset::{Toolset, WeakToolset};

/// How deep chains may call chains in one task, so a cycle (`a` chaining into `b`
/// chaining into `a`) ends with an error instead of exhausting the stack.
pub const MAX_CHAIN_DEPTH: usize = 16;

/// Why a chain could not go on to its next tool: the error a [`Chain`] branch
/// returns, as [`ToolError::Extension`] (arguments it refuses are
/// [`ToolError::InvalidArguments`]).
///
/// ```
/// use serde_json::json;
/// use toolgraft::{Name, Tool, ToolError, Toolset};
/// use toolgraft::ext::Chain;
/// use toolgraft::ext::chain::{ChainError, ChainErrorKind};
/// use toolgraft::tool::BaseTool;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Find { city: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let find = Tool::builder().name("find").description("Locate a city.")
///     .body(|input: Find| async move { Ok(json!({"city": input.city})) })
///     .build()?;
/// let toolset = Toolset::new();
/// toolset.bind((find.combo().with(Chain::new(&toolset)),))?;
/// let err = toolset
///     .call("find_chain", json!({"city": "Lisbon", "next_tool": "find", "select": "/at"}))
///     .await
///     .unwrap_err();
/// let stopped = err.downcast_ref::<ChainError>().expect("a chain's error");
/// assert_eq!(stopped.kind, ChainErrorKind::SelectsNothing);
/// assert_eq!(stopped.tool.as_str(), "find_chain");
/// assert!(matches!(&err, ToolError::Extension { extension, .. } if extension.as_str() == "chain"));
/// assert_eq!(err.to_string(), r#"chain `find_chain` stopped: `select` "/at" selects nothing in {"city":"Lisbon"}"#);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("chain `{tool}` stopped: {problem}")]
#[non_exhaustive]
pub struct ChainError {
    /// The chain branch.
    pub tool: Name,
    /// Why, as a kind.
    pub kind: ChainErrorKind,
    /// Why, in words.
    pub problem: String,
}

impl ChainError {
    /// A chain's error: what a backend rebuilds from one reported by another
    /// process.
    ///
    /// ```
    /// use toolgraft::Name;
    /// use toolgraft::ext::chain::{ChainError, ChainErrorKind};
    /// let err = ChainError::new(Name::new("find_chain")?, ChainErrorKind::TooDeep, "too deep");
    /// assert_eq!(err.to_string(), "chain `find_chain` stopped: too deep");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn new(tool: Name, kind: ChainErrorKind, problem: impl Into<String>) -> Self {
        Self {
            tool,
            kind,
            problem: problem.into(),
        }
    }
}

impl From<ChainError> for ToolError {
    /// [`ToolError::Extension`], from extension `chain`.
    fn from(error: ChainError) -> Self {
        ToolError::extension(error.tool.clone(), Name::lossy("chain"), error)
    }
}

/// Why a chain stopped, as [`ChainError::kind`] says it.
///
/// ```
/// use toolgraft::ToolError;
/// use toolgraft::ext::chain::{ChainError, ChainErrorKind};
/// fn kind(err: &ToolError) -> Option<ChainErrorKind> {
///     err.downcast_ref::<ChainError>().map(|stopped| stopped.kind)
/// }
/// assert_eq!(kind(&ToolError::UnknownTool { name: "x".into() }), None);
/// assert_eq!(serde_json::to_value(ChainErrorKind::IntoItself)?, "into_itself");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChainErrorKind {
    /// The toolset the chain calls into was dropped.
    ToolsetGone,
    /// `next_tool` would run this chain again.
    IntoItself,
    /// Chains called chains too deep: a cycle through tool results.
    TooDeep,
    /// `select` points at nothing in the first result.
    SelectsNothing,
    /// `select` (or a jq expression) picks something that is not an arguments object.
    NotArguments,
    /// A jq expression failed on the first result, or ran out of its bounds
    /// (feature `jq`).
    Jq,
}

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
    /// A jq expression over the first result, instead of `select` (feature `jq`;
    /// only where the operator set none): it must yield the arguments object.
    #[cfg(feature = "jq")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jq: Option<String>,
}

impl<I> ChainInput<I> {
    /// A chain call of `input` that passes the whole first result to `next_tool`
    /// (set `select` to pass part of it).
    ///
    /// ```
    /// let input = toolgraft::ext::chain::ChainInput::new(7, "forecast");
    /// assert_eq!((input.input, input.next_tool.as_str(), input.select.as_str()), (7, "forecast", ""));
    /// ```
    pub fn new(input: I, next_tool: impl Into<String>) -> Self {
        Self {
            input,
            next_tool: next_tool.into(),
            select: String::new(),
            #[cfg(feature = "jq")]
            jq: None,
        }
    }
}

/// The operator's side of a chain (feature `jq`): a jq expression that turns
/// every first result into the next tool's arguments, and the bounds of a jq run.
/// With `jq` set, callers give only `next_tool`.
///
/// ```
/// let config: toolgraft::ext::chain::ChainConfig =
///     serde_json::from_str(r#"{"jq": "{lat: .at.lat}", "jq_steps": 5000}"#)?;
/// assert_eq!(config.jq.as_deref(), Some("{lat: .at.lat}"));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[cfg(feature = "jq")]
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    /// The expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jq: Option<String>,
    /// Steps a jq run may take (caller's expressions too): 1 to 10 000 000;
    /// 100 000 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jq_steps: Option<u64>,
    /// Milliseconds a jq run may take: 1 to 60 000; 1 000 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jq_time_ms: Option<u64>,
}

/// The operator's jq: the config as written, and its expression compiled (or why
/// not, reported when the chain is bound).
#[cfg(feature = "jq")]
#[derive(Clone, Debug, Default)]
struct Operator {
    config: ChainConfig,
    jq: Option<Result<crate::ext::jq::Jq, crate::ext::jq::JqError>>,
}

#[cfg(feature = "jq")]
impl Operator {
    fn bounds(&self) -> crate::ext::jq::JqBounds {
        let default = crate::ext::jq::JqBounds::default();
        crate::ext::jq::JqBounds {
            steps: self.config.jq_steps.unwrap_or(default.steps),
            time: self
                .config
                .jq_time_ms
                .map_or(default.time, std::time::Duration::from_millis),
        }
    }

    fn fixed(&self) -> Option<&crate::ext::jq::Jq> {
        self.jq.as_ref().and_then(|jq| jq.as_ref().ok())
    }
}

/// A transformer whose branch takes the layer input's parameters plus `next_tool`
/// and `select`: it calls the layer below, selects from the result with a JSON
/// Pointer, and calls `next_tool` by name with the selection as its arguments.
///
/// Its own `next_tool` and `select` params take precedence over parameters of the
/// layer input with the same names.
///
/// ```
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
/// toolset.bind((forecast.combo(),))?;
/// toolset.bind((find.combo().with(Chain::new(&toolset)),))?;
/// let out = toolset
///     .call("find_chain", json!({"city": "Lisbon", "next_tool": "forecast", "select": "/at"}))
///     .await?;
/// assert_eq!(out, json!("sunny at 38.7"));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Chain {
    toolset: WeakToolset,
    #[cfg(feature = "jq")]
    operator: Operator,
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
            #[cfg(feature = "jq")]
            operator: Operator::default(),
        }
    }

    /// The same chain with the operator's `config` (feature `jq`): what a manifest
    /// element `{"name": "chain", "config": {"jq": ".."}}` builds, registered with
    /// [`Registry::register`](crate::Registry::register) as a [`Refined`](crate::runtime::Refined). The
    /// expression is compiled here; a problem with it (or with the bounds) refuses
    /// the tool when it is bound.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgraft::runtime::manifest::Manifest;
    /// use toolgraft::{BindError, Registry, Tool, Toolset};
    /// use toolgraft::tool::BaseTool;
    /// use toolgraft::toolset::BaseTools;
    /// use toolgraft::ext::Chain;
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Find { city: String }
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Forecast { lat: f64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let find = Tool::builder().name("find").description("Locate a city.")
    ///     .body(|input: Find| async move { Ok(json!({"city": input.city, "at": [38.7, -9.1]})) })
    ///     .build()?;
    /// let forecast = Tool::builder().name("forecast").description("Forecast at a place.")
    ///     .body(|input: Forecast| async move { Ok(format!("sunny at {}", input.lat)) })
    ///     .build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((forecast.combo(),))?;
    /// let mut registry = Registry::new();
    /// registry.register(toolgraft::runtime::Refined::new(Chain::new(&toolset), Chain::configured))?;
    /// let bases = BaseTools::new().with(&find);
    ///
    /// let bad = Manifest::from_json(r#"{"tools": {"find": [[{"name": "chain", "config": {"jq": "{lat: .at[0]"}}]]}}"#)?;
    /// let outcome = toolset.bind_manifest(&registry, &bases, &bad);
    /// let Err(BindError::InvalidConfig { field, .. }) = &outcome[0].1 else { panic!() };
    /// assert_eq!(field, "jq");
    ///
    /// let good = Manifest::from_json(r#"{"tools": {"find": [[{"name": "chain", "config": {"jq": "{lat: .at[0]}"}}]]}}"#)?;
    /// assert!(toolset.bind_manifest(&registry, &bases, &good)[0].1.is_ok());
    /// let out = toolset.call("find_chain", json!({"city": "Lisbon", "next_tool": "forecast"})).await?;
    /// assert_eq!(out, json!("sunny at 38.7"));
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "jq")]
    pub fn configured(&self, config: ChainConfig) -> Result<Self, ConfigError> {
        let jq = config.jq.as_deref().map(crate::ext::jq::Jq::compile);
        let chain = Self {
            toolset: self.toolset.clone(),
            operator: Operator { config, jq },
        };
        chain.check_config()?;
        Ok(chain)
    }

    /// The same chain with a jq expression of the operator's (feature `jq`): it
    /// turns every first result into the next tool's arguments, and callers give
    /// only `next_tool`. A problem with the expression refuses the tool when it is
    /// bound ([`BindError::InvalidConfig`](crate::BindError::InvalidConfig) at `jq`).
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgraft::{BindError, Tool, Toolset};
    /// use toolgraft::tool::BaseTool;
    /// use toolgraft::ext::Chain;
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Find { city: String }
    /// # let find = Tool::builder().name("find").description("Locate a city.")
    /// #     .body(|input: Find| async move { Ok(json!({"city": input.city})) }).build()?;
    /// let toolset = Toolset::new();
    /// let err = toolset.bind((find.combo().with(Chain::new(&toolset).with_jq(".city |")),)).unwrap_err();
    /// assert!(matches!(err, BindError::InvalidConfig { ref field, .. } if field == "jq"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "jq")]
    pub fn with_jq(self, expression: &str) -> Self {
        let config = ChainConfig {
            jq: Some(expression.to_owned()),
            ..self.operator.config.clone()
        };
        Self {
            operator: Operator {
                jq: Some(crate::ext::jq::Jq::compile(expression)),
                config,
            },
            ..self
        }
    }

    /// The params callers give this chain.
    fn params(&self) -> &'static [&'static str] {
        #[cfg(feature = "jq")]
        {
            if self.operator.config.jq.is_some() {
                return &["next_tool"];
            }
            &["next_tool", "select", "jq"]
        }
        #[cfg(not(feature = "jq"))]
        &["next_tool", "select"]
    }
}

impl Extension for Chain {
    type Kind = Transformer;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "chain"
    }

    fn own_params(&self) -> &[&'static str] {
        self.params()
    }

    #[cfg(feature = "jq")]
    fn config(&self) -> Option<Value> {
        let config = &self.operator.config;
        (*config != ChainConfig::default())
            .then(|| serde_json::to_value(config).ok())
            .flatten()
    }

    #[cfg(feature = "jq")]
    fn check_config(&self) -> Result<(), ConfigError> {
        if let Some(Err(error)) = &self.operator.jq {
            return Err(ConfigError::new("jq", error.to_string()));
        }
        let config = &self.operator.config;
        if config
            .jq_steps
            .is_some_and(|steps| !(1..=10_000_000).contains(&steps))
        {
            return Err(ConfigError::new("jq_steps", "use 1 to 10000000 steps"));
        }
        if config
            .jq_time_ms
            .is_some_and(|ms| !(1..=60_000).contains(&ms))
        {
            return Err(ConfigError::new("jq_time_ms", "use 1 to 60000 ms"));
        }
        Ok(())
    }

    fn describe(&self, running: &str) -> Option<String> {
        let how = match self.params() {
            ["next_tool"] => "what the operator's jq expression makes of the result",
            ["next_tool", "select"] => {
                "the part of the result that `select`, a JSON Pointer, picks"
            }
            _ => {
                "the part of the result that `select` (a JSON Pointer) picks, or what `jq` (a jq expression) makes of it"
            }
        };
        Some(format!(
            "{running} (Chain: then calls `next_tool` with {how}.)"
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
        if self.params().contains(&"select") {
            properties.insert(
                "select".to_owned(),
                json!({"type": "string", "default": "",
                       "description": "A JSON Pointer into the first result; it must select the next tool's arguments (an object)."}),
            );
        }
        if self.params().contains(&"jq") {
            properties.insert(
                "jq".to_owned(),
                json!({"type": "string",
                       "description": "Instead of `select`: a jq expression over the first result; it must yield the next tool's arguments (one object)."}),
            );
        }
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
            #[cfg(feature = "jq")]
            operator: self.operator,
        }
    }
}

/// The branch [`Chain`] mints.
pub struct Chained<S> {
    inner: S,
    branch: Name,
    toolset: WeakToolset,
    #[cfg(feature = "jq")]
    operator: Operator,
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
            #[cfg(feature = "jq")]
            operator: self.operator.clone(),
        }
    }
}

impl<S: Stack> Chained<S> {
    fn stop(&self, kind: ChainErrorKind, problem: String) -> ToolError {
        ChainError::new(self.branch.clone(), kind, problem).into()
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

#[cfg(feature = "jq")]
impl<S: Stack> Chained<S> {
    /// The jq expression this call selects with: the operator's, or the caller's
    /// (compiled now: a bad one is an argument error before anything runs).
    async fn jq_for(
        &self,
        caller: Option<&str>,
        select: &str,
    ) -> Result<Option<crate::ext::jq::Jq>, ToolError> {
        if let Some(fixed) = self.operator.fixed() {
            return Ok(Some(fixed.clone()));
        }
        let Some(code) = caller else {
            return Ok(None);
        };
        if !select.is_empty() {
            let problem = "give `select` or `jq`, not both";
            return Err(ArgsError::field("jq", problem).for_tool(&self.branch));
        }
        crate::ext::jq::Jq::compile_async(code)
            .await
            .map(Some)
            .map_err(|error| ArgsError::field("jq", error.to_string()).for_tool(&self.branch))
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
        // A name the caller could call itself: a published one, which runs the
        // bound name behind it with its layers. A hidden name (a base whose
        // combo is published in its place) is not the caller's to reach, nor is
        // one its access policies hide from the caller: refused as a name that
        // does not exist, before the first step runs.
        let caller = context::get::<Identity>();
        let next = toolset
            .resolve_for(caller.as_ref(), &input.next_tool)
            .filter(|_| toolset.visible(caller.as_ref(), &input.next_tool));
        let Some(next) = next else {
            let problem = format!("`{}` is not a published tool", shorten(&input.next_tool));
            return Err(ArgsError::field("next_tool", problem).for_tool(&self.branch));
        };
        if self.runs_again(&toolset, &next.name) {
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
        // A caller's jq expression is checked before anything runs.
        #[cfg(feature = "jq")]
        let jq = self.jq_for(input.jq.as_deref(), &input.select).await?;
        let depth = ChainDepth::current();
        if depth >= MAX_CHAIN_DEPTH {
            let problem = format!("chains called chains {MAX_CHAIN_DEPTH} deep; is there a cycle?");
            return Err(self.stop(ChainErrorKind::TooDeep, problem));
        }
        let first = self.inner.call(input.input).await?;
        let first = crate::extension::to_json(first).map_err(|source| ToolError::Output {
            tool: self.branch.clone(),
            source: source.into(),
        })?;
        #[cfg(feature = "jq")]
        if let Some(jq) = jq {
            let selected = jq
                .run(first, self.operator.bounds())
                .await
                .map_err(|error| self.stop(ChainErrorKind::Jq, error.to_string()))?;
            if !selected.is_object() {
                let problem = format!(
                    "jq expression `{}` yields {}, not the arguments object `{}` takes",
                    shorten(jq.code()),
                    shown(&selected),
                    shorten(&input.next_tool)
                );
                return Err(self.stop(ChainErrorKind::NotArguments, problem));
            }
            return context::with(
                ChainDepth(depth + 1),
                toolset.call_published(&input.next_tool, selected),
            )
            .await;
        }
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
        context::with(
            ChainDepth(depth + 1),
            toolset.call_published(&input.next_tool, selected.clone()),
        )
        .await
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
        #[cfg(feature = "jq")]
        let jq = match args.remove("jq") {
            None => None,
            Some(_) if self.operator.config.jq.is_some() => {
                // The operator's expression decides; a caller's is an unknown field.
                return Err(ArgsError::unknown("jq", &["next_tool".to_owned()]));
            }
            Some(Value::String(jq)) => Some(jq),
            Some(other) => {
                return Err(ArgsError::field(
                    "jq",
                    format!("expected a jq expression, not `{}`", shorten_json(&other)),
                ));
            }
        };
        Ok(ChainInput {
            input: self.inner.decode(args)?,
            next_tool,
            select,
            #[cfg(feature = "jq")]
            jq,
        })
    }
}

fn shown(value: &Value) -> String {
    shorten_json(value)
}

// Typed calls: reserved params given by type reach the first call's layers (see
// `Assemble`); never at `Here`, so a whole input given as is reads one way only.
macro_rules! assemble_first_call {
    ($($deeper:ident),*) => {$(
        /// The chain's first call gets the params (the next tool is called by
        /// name, with the arguments the chain selects).
        #[diagnostic::do_not_recommend]
        impl<I, C, Index> Assemble<ChainInput<C>, Inside<$deeper<Index>>> for ChainInput<I>
        where
            I: Assemble<C, $deeper<Index>>,
        {
            #[inline]
            fn assemble(core: ChainInput<C>, bag: &mut ParamBagRef<'_>) -> Self {
                ChainInput {
                    input: I::assemble(core.input, bag),
                    next_tool: core.next_tool,
                    select: core.select,
                    #[cfg(feature = "jq")]
                    jq: core.jq,
                }
            }
        }
    )*};
}

assemble_first_call!(There, Inside);

#[diagnostic::do_not_recommend]
impl<P: ReservedIn<I, Index>, I, Index> ReservedIn<ChainInput<I>, Inside<Index>> for P {
    fn sealed(_: Token) {}
}
