//! The [`Tool`] builder: a typestate over which fields are set, whose only bounded
//! method is `.body(..)`, so that each mistake in a body is one error, there.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use schemars::{JsonSchema, Schema};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{
    Annotations, Hints, Idempotent, Presentation, ReadOnly, Tool, ToolSpec, Unsaid, sealed,
};
use crate::error::{ArgsError, BoxError};
use crate::name::{InvalidName, Name};
use crate::schema::{self, ArgNames, Args};
use crate::stack::{decode_args, decode_args_keeping};

/// Builds a [`Tool`]: set [`name`](ToolBuilder::name),
/// [`description`](ToolBuilder::description) and [`body`](ToolBuilder::body), in any
/// order, then [`build`](ToolBuilder::build).
///
/// The type parameters say which fields are set so far (`NoName` until `.name(..)`,
/// `String` after it, and so on); forgetting one is a compile error at `.build()`
/// that names it. What the body must be is checked at `.body(..)`, once: each
/// mistake there is one error, at the body.
///
/// ```
/// use toolgraft::Tool;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
/// let builder = Tool::builder()
///     .body(|input: Shout| async move { Ok(input.text) })
///     .name("shout");
/// let shout = builder.description("Return the text.").build()?;
/// assert_eq!(shout.spec().name, "shout");
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[must_use = "a tool builder does nothing until `.build()`"]
pub struct ToolBuilder<N = NoName, D = NoDescription, B = NoBody, H = Unsaid> {
    name: N,
    description: D,
    body: B,
    presentation: Presentation,
    hints: PhantomData<fn() -> H>,
}

impl<N, D, B, H> std::fmt::Debug for ToolBuilder<N, D, B, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolBuilder").finish_non_exhaustive()
    }
}

/// A [`ToolBuilder`] whose name is not set yet.
///
/// ```
/// use toolgraft::Tool;
/// use toolgraft::tool::{NoBody, NoDescription, NoName, ToolBuilder};
/// let _: ToolBuilder<NoName, NoDescription, NoBody> = Tool::builder();
/// let _: ToolBuilder<String, NoDescription, NoBody> = Tool::builder().name("ping");
/// ```
#[derive(Debug)]
pub struct NoName;

/// A [`ToolBuilder`] whose description is not set yet.
///
/// ```
/// use toolgraft::Tool;
/// use toolgraft::tool::{NoBody, NoDescription, ToolBuilder};
/// let _: ToolBuilder<String, NoDescription, NoBody> = Tool::builder().name("ping");
/// ```
#[derive(Debug)]
pub struct NoDescription;

/// A [`ToolBuilder`] whose body is not set yet.
///
/// ```
/// use toolgraft::Tool;
/// use toolgraft::tool::{NoBody, ToolBuilder};
/// let _: ToolBuilder<String, String, NoBody> = Tool::builder().name("ping").description("Pong.");
/// ```
#[derive(Debug)]
pub struct NoBody;

/// A [`ToolBuilder`]'s body, with what `.body(..)` proved of its input type kept as
/// functions, so that `.build()` needs no bounds (and cannot repeat their errors).
///
/// ```
/// use toolgraft::Tool;
/// use toolgraft::tool::{NoDescription, NoName, ToolBuilder, TypedBody};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
/// fn bodied<I, O, F>(_: &ToolBuilder<NoName, NoDescription, TypedBody<I, O, F>>) {}
/// bodied(&Tool::builder().body(|_: Ping| async { Ok("pong") }));
/// ```
pub struct TypedBody<I, O, F> {
    body: F,
    decode: fn(Args) -> Result<I, ArgsError>,
    decode_keeping: fn(Args) -> Result<(I, Args), ArgsError>,
    input_schema: fn() -> Arc<Schema>,
    output_schema: fn() -> Arc<Schema>,
    types: PhantomData<fn(I) -> O>,
}

impl<I, O, F> std::fmt::Debug for TypedBody<I, O, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedBody").finish_non_exhaustive()
    }
}

/// What a tool takes: arguments are decoded with serde, and the schema is what a
/// model reads.
///
/// ```
/// use toolgraft::tool::ToolInput;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Shout { text: String }
/// fn input<I: ToolInput>() {}
/// input::<Shout>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's input: it must be `serde::Deserialize` and `schemars::JsonSchema` (and `Send + 'static`)",
    label = "the body takes `{Self}`",
    note = "arguments are decoded into the input with serde, and its JSON Schema is what a model reads: derive both, `#[derive(serde::Deserialize, schemars::JsonSchema)]`",
    note = "the `help` above names the one `{Self}` lacks"
)]
pub trait ToolInput: DeserializeOwned + JsonSchema + Send + 'static {}

// No `do_not_recommend`: the missing bound's `Self` is the input itself, so the
// compiler reports this trait, with the missing bound as its `help`.
impl<T: DeserializeOwned + JsonSchema + Send + 'static> ToolInput for T {}

/// What a tool returns: results are serialized to JSON, and the schema is the
/// tool's output schema.
///
/// ```
/// use toolgraft::tool::ToolOutput;
/// fn output<O: ToolOutput>() {}
/// output::<String>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's output: it must be `serde::Serialize` and `schemars::JsonSchema` (and `Send + 'static`)",
    label = "the body returns `Ok({Self})`",
    note = "results are serialized to JSON for callers by name, and the output's JSON Schema is the tool's output schema: derive both, `#[derive(serde::Serialize, schemars::JsonSchema)]`",
    note = "the `help` above names the one `{Self}` lacks"
)]
pub trait ToolOutput: Serialize + JsonSchema + Send + 'static {}

impl<T: Serialize + JsonSchema + Send + 'static> ToolOutput for T {}

/// The future a body returns, yielding `Result<O, BoxError>`.
///
/// `Self` is the value the body returns: when that is no future (a closure without
/// `async`), the compiler reports this trait, whose `Self` it is.
///
/// ```
/// use toolgraft::tool::BodyFuture;
/// fn body_future<Fut: BodyFuture<u8>>(_: Fut) {}
/// body_future(async { Ok::<_, toolgraft::error::BoxError>(1) });
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a future, but a tool body is an async function",
    label = "the body returns `{Self}`, not a future",
    note = "write the body as `|input: I| async move {{ .. Ok(output) }}`, or as an `async fn`",
    note = "a body that never awaits is still async: wrap what it computes in `async move {{ .. }}`, or return `std::future::ready(Ok(output))`"
)]
pub trait BodyFuture<O> {
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

impl<T, O> BodyFuture<O> for T
where
    T: Future,
    T::Output: BodyResult<O>,
{
    fn sealed(_: sealed::Token) {}
}

/// What a body's future yields: `Result<O, BoxError>`.
///
/// ```
/// use toolgraft::error::BoxError;
/// use toolgraft::tool::BodyResult;
/// fn yields<R: BodyResult<String>>() {}
/// yields::<Result<String, BoxError>>();
/// ```
#[diagnostic::on_unimplemented(
    message = "a tool body yields `Result<O, BoxError>`, but this one yields `{Self}`",
    label = "the body's future yields `{Self}`",
    note = "the error is `toolgraft::error::BoxError`: leave it to inference (`Ok(output)`), or name it, `Ok::<_, BoxError>(output)`",
    note = "`?` and `.map_err(BoxError::from)` convert any `std::error::Error + Send + Sync + 'static` (an `rmcp::ErrorData`, an `io::Error`), a `String` or a `&str`; give an error type that is none of these a `std::error::Error` impl, or map it to a message: `.map_err(|e| format!(\"{{e:?}}\"))?`",
    note = "a value that is not a `Result` is returned as `Ok(value)`"
)]
pub trait BodyResult<O> {
    #[doc(hidden)]
    fn sealed(_: sealed::Token);
}

// One impl, so the compiler infers the output (and the error of an untyped `Ok(..)`)
// from it; no other result is recommended.
#[diagnostic::do_not_recommend]
impl<O> BodyResult<O> for Result<O, BoxError> {
    fn sealed(_: sealed::Token) {}
}

/// A set name, for [`ToolBuilder::build`]: implemented for the `String` that
/// [`ToolBuilder::name`] stores, so a builder without one does not build.
///
/// ```
/// use toolgraft::tool::NameSet;
/// fn named<N: NameSet>() {}
/// named::<String>();
/// ```
#[diagnostic::on_unimplemented(
    message = "a tool needs a name: call `.name(\"..\")` before `.build()`",
    label = "this tool has no name",
    note = "the name is how clients call the tool; see `toolgraft::Name` for the allowed characters"
)]
pub trait NameSet {
    #[doc(hidden)]
    fn into_name(self, _: sealed::Token) -> String;
}

impl NameSet for String {
    fn into_name(self, _: sealed::Token) -> String {
        self
    }
}

/// A set description, for [`ToolBuilder::build`] (see [`NameSet`]).
///
/// ```
/// use toolgraft::tool::DescriptionSet;
/// fn described<D: DescriptionSet>() {}
/// described::<String>();
/// ```
#[diagnostic::on_unimplemented(
    message = "a tool needs a description: call `.description(\"..\")` before `.build()`",
    label = "this tool has no description",
    note = "the description is what a model reads to decide when to call the tool"
)]
pub trait DescriptionSet {
    #[doc(hidden)]
    fn into_description(self, _: sealed::Token) -> String;
}

impl DescriptionSet for String {
    fn into_description(self, _: sealed::Token) -> String {
        self
    }
}

/// A set body, for [`ToolBuilder::build`]: a [`TypedBody`].
///
/// ```
/// use toolgraft::Tool;
/// use toolgraft::tool::{BodySet, NoDescription, NoName, ToolBuilder};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
/// fn bodied<B: BodySet<I, O, F>, I, O, F>(_: &ToolBuilder<NoName, NoDescription, B>) {}
/// bodied(&Tool::builder().body(|_: Ping| async { Ok("pong") }));
/// ```
#[diagnostic::on_unimplemented(
    message = "a tool needs a body: call `.body(|input: I| async move {{ .. }})` before `.build()`",
    label = "this tool has no body"
)]
pub trait BodySet<I, O, F> {
    #[doc(hidden)]
    fn into_body(self, _: sealed::Token) -> TypedBody<I, O, F>;
}

impl<I, O, F> BodySet<I, O, F> for TypedBody<I, O, F> {
    fn into_body(self, _: sealed::Token) -> Self {
        self
    }
}

impl<N, D, B, H> ToolBuilder<N, D, B, H> {
    /// The tool's name; see [`Name`] for the allowed characters (checked by
    /// [`build`](Self::build)). Setting it again replaces it.
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// let ping = Tool::builder().name("ping").description("Answer pong.")
    ///     .body(|_: Ping| async { Ok("pong") }).build()?;
    /// assert_eq!(ping.spec().name, "ping");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn name(self, name: impl Into<String>) -> ToolBuilder<String, D, B, H> {
        ToolBuilder {
            name: name.into(),
            description: self.description,
            body: self.body,
            presentation: self.presentation,
            hints: PhantomData,
        }
    }

    /// What the tool does, for a model or a person. Setting it again replaces it.
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// let ping = Tool::builder().name("ping").description("Answer pong.")
    ///     .body(|_: Ping| async { Ok("pong") }).build()?;
    /// assert_eq!(ping.spec().description, "Answer pong.");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn description(self, description: impl Into<String>) -> ToolBuilder<N, String, B, H> {
        ToolBuilder {
            name: self.name,
            description: description.into(),
            body: self.body,
            presentation: self.presentation,
            hints: PhantomData,
        }
    }

    /// A title for people, where a client shows one (a model reads the name).
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// let ping = Tool::builder().name("ping").description("Answer pong.").title("Ping")
    ///     .body(|_: Ping| async { Ok("pong") }).build()?;
    /// assert_eq!(ping.spec().presentation.title.as_deref(), Some("Ping"));
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.presentation.title = Some(title.into());
        self
    }

    /// Hints about what calling the tool does (MCP's tool annotations).
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// use toolgraft::tool::Annotations;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// let ping = Tool::builder().name("ping").description("Answer pong.")
    ///     .annotations(Annotations { read_only: Some(true), ..Annotations::default() })
    ///     .body(|_: Ping| async { Ok("pong") }).build()?;
    /// assert_eq!(ping.spec().presentation.annotations.read_only, Some(true));
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn annotations(mut self, annotations: Annotations) -> Self
    where
        H: Hints,
    {
        self.presentation.annotations = annotations;
        // What the tool's type promises stays said.
        H::say(&mut self.presentation.annotations);
        self
    }

    /// The tool may destroy or overwrite (`destructiveHint`; `false` says it only
    /// adds). A destructive tool is never cached, idempotent or not.
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Path { path: String }
    /// let delete = Tool::builder().name("delete").description("Delete a file.")
    ///     .idempotent().destructive(true)
    ///     .body(|i: Path| async move { Ok(i.path) }).build()?;
    /// assert_eq!(delete.spec().presentation.annotations.destructive, Some(true));
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn destructive(mut self, destructive: bool) -> Self {
        self.presentation.annotations.destructive = Some(destructive);
        self
    }

    /// The tool reaches things outside the server, the web or other systems
    /// (`openWorldHint`).
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Url { url: String }
    /// let fetch = Tool::builder().name("fetch").description("Fetch a page.")
    ///     .open_world(true)
    ///     .body(|i: Url| async move { Ok(i.url) }).build()?;
    /// assert_eq!(fetch.spec().presentation.annotations.open_world, Some(true));
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn open_world(mut self, open_world: bool) -> Self {
        self.presentation.annotations.open_world = Some(open_world);
        self
    }

    /// A field of a protocol's own, by its name there (MCP's `icons`, `_meta`),
    /// passed through to clients as it is. Setting one again replaces it.
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// let ping = Tool::builder().name("ping").description("Answer pong.")
    ///     .extra("_meta", serde_json::json!({"example.com/team": "search"}))
    ///     .body(|_: Ping| async { Ok("pong") }).build()?;
    /// assert_eq!(ping.spec().presentation.extra["_meta"]["example.com/team"], "search");
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn extra(mut self, field: impl Into<String>, value: serde_json::Value) -> Self {
        self.presentation.extra.insert(field.into(), value);
        self
    }

    /// The async body: `|input: I| async move { Ok(output) }`, or an `async fn`,
    /// yielding `Result<O, BoxError>`. Every rule of a body is checked here, and
    /// only here: the input ([`ToolInput`]), the output ([`ToolOutput`]), that it
    /// is async ([`BodyFuture`]) and what it yields ([`BodyResult`]).
    ///
    /// ```
    /// use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Count { text: String }
    /// let count = Tool::builder().name("count").description("Parse a number.")
    ///     .body(|input: Count| async move {
    ///         let n: u32 = input.text.parse()?; // `?` converts the error
    ///         Ok(n)
    ///     })
    ///     .build()?;
    /// # let _ = count;
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn body<I, O, F, Fut>(self, body: F) -> ToolBuilder<N, D, TypedBody<I, O, F>, H>
    where
        I: ToolInput,
        O: ToolOutput,
        F: Fn(I) -> Fut + Clone + Send + Sync + 'static,
        Fut: BodyFuture<O> + Send,
    {
        ToolBuilder {
            name: self.name,
            description: self.description,
            presentation: self.presentation,
            hints: PhantomData,
            body: TypedBody {
                body,
                decode: decode_args::<I>,
                decode_keeping: decode_args_keeping::<I>,
                input_schema: schema::of_cached::<I>,
                output_schema: schema::of_cached::<O>,
                types: PhantomData,
            },
        }
    }

    /// Validates the name and computes the schemas. A field not set is a compile
    /// error that names it.
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// let bad = Tool::builder().name("no spaces").description("Answer pong.")
    ///     .body(|_: Ping| async { Ok("pong") }).build();
    /// assert!(bad.is_err());
    /// ```
    ///
    /// ```compile_fail
    /// # use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// let ping = Tool::builder().name("ping") // no description
    ///     .body(|_: Ping| async { Ok("pong") }).build();
    /// ```
    pub fn build<I, O, F>(self) -> Result<Tool<I, O, F, H>, InvalidName>
    where
        N: NameSet,
        D: DescriptionSet,
        B: BodySet<I, O, F>,
    {
        let body = self.body.into_body(sealed::Token);
        // Per type, shared: binding derives a branch's schema once for every tool
        // of one input type.
        let spec = ToolSpec {
            name: Name::new(self.name.into_name(sealed::Token))?,
            description: self.description.into_description(sealed::Token),
            input_schema: (body.input_schema)(),
            output_schema: Some((body.output_schema)()),
            presentation: Arc::new(self.presentation),
        };
        Ok(Tool {
            args: ArgNames::of(&spec.input_schema),
            spec: Arc::new(spec),
            body: body.body,
            decode: body.decode,
            decode_keeping: body.decode_keeping,
            types: PhantomData,
        })
    }
}

impl<N, D, B> ToolBuilder<N, D, B, Unsaid> {
    /// The tool changes nothing (`readOnlyHint`): calling it twice, or not at all,
    /// does no harm. A typed `retry` or `cache` needs it, or
    /// [`idempotent`](Self::idempotent) (rule `side-effects` in the
    /// [rulebook](crate::rulebook)). Said once: the hint is the tool's type.
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Query { q: String }
    /// let search = Tool::builder().name("search").description("Search the notes.")
    ///     .read_only()
    ///     .body(|i: Query| async move { Ok(i.q) }).build()?;
    /// assert_eq!(search.spec().presentation.annotations.read_only, Some(true));
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn read_only(self) -> ToolBuilder<N, D, B, ReadOnly> {
        self.hinted()
    }

    /// Calling the tool twice with the same arguments does no more than once
    /// (`idempotentHint`): what a typed `retry` needs (or
    /// [`read_only`](Self::read_only)). Said once: the hint is the tool's type.
    ///
    /// ```
    /// # use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Put { key: String }
    /// let put = Tool::builder().name("put").description("Store a key.")
    ///     .idempotent()
    ///     .body(|i: Put| async move { Ok(i.key) }).build()?;
    /// assert_eq!(put.spec().presentation.annotations.idempotent, Some(true));
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn idempotent(self) -> ToolBuilder<N, D, B, Idempotent> {
        self.hinted()
    }

    fn hinted<Then: Hints>(mut self) -> ToolBuilder<N, D, B, Then> {
        Then::say(&mut self.presentation.annotations);
        ToolBuilder {
            name: self.name,
            description: self.description,
            body: self.body,
            presentation: self.presentation,
            hints: PhantomData,
        }
    }
}

impl Tool<(), (), ()> {
    /// Starts building a tool.
    ///
    /// ```
    /// use toolgraft::Tool;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// let shout = Tool::builder()
    ///     .name("shout")
    ///     .description("Return the text.")
    ///     .body(|input: Shout| async move { Ok(input.text) })
    ///     .build()?;
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn builder() -> ToolBuilder {
        ToolBuilder {
            name: NoName,
            description: NoDescription,
            body: NoBody,
            presentation: Presentation::default(),
            hints: PhantomData,
        }
    }
}
