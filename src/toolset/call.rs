//! Calls by name with JSON: [`Toolset::call`] by a bound name,
//! [`Toolset::call_published`] by a published one.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use serde_json::Value;

use std::sync::Arc;

use crate::access::{self, Access, Denied, Policy};
use crate::bind::{Entry, ToolInfo};
use crate::context::{self, CallName, Context, Identity};
use crate::error::{ArgsError, ArgsErrorKind, ToolError, panic_message, shorten, shorten_json};
use crate::limits::{deeper_than, drop_flat};
use crate::name::Name;
use crate::schema::{self, Args};

use super::Toolset;
use super::catalog::shown_in;

/// Which names a call looks its name up among.
#[derive(Clone, Copy)]
enum By {
    /// The bound names: a call in process.
    Bound,
    /// The published names: a client's call.
    Published,
}

/// How a call named what it calls.
enum Called {
    /// By a bound name, in process.
    Bound,
    /// By a published name that is the bound name's own.
    Published,
    /// By a published name other than the bound name's: errors speak of it.
    Alias(Name),
}

impl Called {
    /// `error` as the caller sees it: speaking of the alias it called, if it
    /// called one.
    fn error(&self, error: ToolError) -> ToolError {
        match self {
            Self::Alias(alias) => error.for_caller(alias),
            Self::Bound | Self::Published => error,
        }
    }
}

impl Toolset {
    /// Calls a bound name with JSON arguments (an object; `null` means none).
    ///
    /// Arguments are strict: a name the tool's input schema does not list is an
    /// error (unless the schema allows additional properties), so a reserved param
    /// of one branch is refused by the others.
    ///
    /// Hostile arguments are refused, never fatal: arguments nested deeper than
    /// [`Limits::max_depth`](crate::limits::Limits::max_depth) are refused before any other work (and dropped
    /// without recursing), and a panic anywhere below (a body, an extension's own
    /// code) becomes [`ToolError::Panicked`]; the toolset keeps serving.
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolgraft::{Tool, ToolError, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Cache;
    /// // Its schema forbids what it does not name (`deny_unknown_fields`).
    /// #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
    /// #[serde(deny_unknown_fields)]
    /// struct Shout { text: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Cache::default()),))?;
    /// // `exp` is a param of `shout_cache`, not of `shout`.
    /// let err = toolset.call("shout", json!({"text": "hi", "exp": 5})).await.unwrap_err();
    /// assert!(err.to_string().contains("unknown field `exp`"));
    /// assert!(matches!(err, ToolError::InvalidArguments { field: Some(f), .. } if f == "exp"));
    /// # Ok(()) }
    /// ```
    pub fn call<'a>(
        &'a self,
        name: &'a str,
        args: Value,
    ) -> impl Future<Output = Result<Value, ToolError>> + Send + 'a {
        self.call_by(By::Bound, name, args)
    }

    /// Calls a published name ([`Publish`](super::Publish)) with JSON arguments: the bound name
    /// behind it, as [`call`](Toolset::call) does, with the published name as the
    /// call's [`CallName`] (what traces and metrics name). A bound name that is
    /// not published is unknown here.
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolgraft::{Tool, ToolError, Toolset};
    /// # use toolgraft::ext::Trace;
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// toolset.edit().publish("shout", Publish::Outermost).commit()?;
    /// assert_eq!(toolset.call_published("shout_trace", json!({"text": "hi"})).await?, json!("hi"));
    /// let hidden = toolset.call_published("shout", json!({"text": "hi"})).await;
    /// assert!(matches!(hidden, Err(ToolError::UnknownTool { .. })));
    /// # Ok(()) }
    /// ```
    pub fn call_published<'a>(
        &'a self,
        name: &'a str,
        args: Value,
    ) -> impl Future<Output = Result<Value, ToolError>> + Send + 'a {
        self.call_by(By::Published, name, args)
    }

    /// Calls what `name` names `by` a bound or a published name: one future,
    /// with no other inside it than the stack's (a future a step would cost a
    /// call by name more than some steps). The name is looked up, and the
    /// context read, when the future first runs.
    async fn call_by(&self, by: By, name: &str, args: Value) -> Result<Value, ToolError> {
        let (entry, guards, max_depth) = {
            let catalog = self.read();
            // A caller's audience decides what its published names are: read
            // only when the toolset has audiences.
            let identity = (matches!(by, By::Published) && !catalog.audiences.is_empty())
                .then(context::get::<Identity>)
                .flatten();
            let (names, guards) = match by {
                By::Bound => (&catalog.entries, &catalog.guards_bound),
                By::Published => catalog.view(identity.as_ref()),
            };
            // No policy in the toolset (the common case): no lookup.
            let guards = if guards.is_empty() {
                None
            } else {
                guards.get(name).cloned()
            };
            (names.get(name).cloned(), guards, catalog.limits.max_depth())
        };
        let Some(entry) = entry else {
            return Err(unknown(name, args, max_depth));
        };
        // Before anything else of the call: a caller refused is told no more than
        // of a name that does not exist, unless it may come back with more.
        // Arguments nested too deep are no policy's to walk: the call is then
        // decided as a listing is, and refused for its arguments if shown.
        if let Some(guards) = guards {
            let too_deep = deeper_than(&args, max_depth);
            let admitted = admit(&guards, name, (!too_deep).then_some(&args));
            if let Err(denied) = admitted {
                if too_deep {
                    drop_flat(args);
                }
                return Err(ToolError::access_refused(name, denied));
            }
        }
        let called = match by {
            By::Bound => Called::Bound,
            By::Published if entry.info.name == name => Called::Published,
            By::Published => Name::new(name).map_or(Called::Published, Called::Alias),
        };
        let (args, context) = match prepare(&entry, &called, args, max_depth) {
            Ok(prepared) => prepared,
            Err(error) => return Err(called.error(error)),
        };
        let tool = &entry.info.name;
        let call =
            context.scope(AssertUnwindSafe(entry.stack.call_json(tool, args)).catch_unwind());
        let outcome = match call.await {
            Ok(Err(ToolError::InvalidArguments {
                tool,
                field: Some(field),
                kind: ArgsErrorKind::UnknownField,
                problem,
            })) => {
                let clients = !matches!(called, Called::Bound);
                let hint = self.taken_by_sibling(&entry.info, &field, clients);
                Err(ToolError::InvalidArguments {
                    tool,
                    field: Some(field),
                    kind: ArgsErrorKind::UnknownField,
                    problem: problem + &hint,
                })
            }
            Ok(other) => other,
            Err(panic) => Err(ToolError::Panicked {
                tool: tool.clone(),
                message: shorten(&panic_message(panic.as_ref())).into_owned(),
            }),
        };
        outcome.map_err(|error| called.error(error))
    }

    /// " (`arg` is a parameter of `x`)" when a sibling of `info` names `arg`;
    /// for a client of published names, a sibling published under its own name
    /// only (a client can call no other).
    fn taken_by_sibling(&self, info: &ToolInfo, arg: &str, clients: bool) -> String {
        let catalog = self.read();
        let identity = clients.then(context::get::<Identity>).flatten();
        let (published, guards) = catalog.view(identity.as_ref());
        // A client is told only of a name it is shown.
        let shown = |name: &Name| shown_in(published, guards, identity.as_ref(), name);
        let siblings = catalog
            .tools
            .get(&info.base)
            .into_iter()
            .flat_map(|group| &group.names);
        siblings
            .filter(|name| **name != info.name)
            .filter(|name| !clients || shown(name))
            .filter_map(|name| catalog.entries.get(name))
            .find(|entry| {
                schema::property_names(&entry.info.input_schema)
                    .is_some_and(|names| names.iter().any(|name| name == arg))
            })
            .map(|entry| format!(" (`{arg}` is a parameter of `{}`)", entry.info.name))
            .unwrap_or_default()
    }
}

/// Whether the caller of the context may call `name` with `args`; without
/// them (arguments no policy may walk), whether it is shown `name`.
fn admit(guards: &[Arc<dyn Policy>], name: &str, args: Option<&Value>) -> Result<(), Denied> {
    let identity = context::get::<Identity>();
    let Some(args) = args else {
        return access::check(guards, &Access::listing(identity.as_ref(), name));
    };
    let none = serde_json::Map::new();
    let arguments = args.as_object().unwrap_or(&none);
    access::check(guards, &Access::call(identity.as_ref(), name, arguments))
}

/// The error of a call of a name that is not bound (or not published), its
/// arguments dropped first if they nest too deep to drop by recursing.
fn unknown(name: &str, args: Value, max_depth: usize) -> ToolError {
    if deeper_than(&args, max_depth) {
        drop_flat(args);
    }
    ToolError::UnknownTool {
        name: shorten(name).into_owned(),
    }
}

/// What a call of `entry` passes to its stack: the arguments, checked before
/// anything else runs, and the call's context.
fn prepare(
    entry: &Entry,
    called: &Called,
    args: Value,
    max_depth: usize,
) -> Result<(Args, Context), ToolError> {
    let tool = &entry.info.name;
    // First, and without recursing: decoding, formatting and even dropping a
    // value recurse once per level.
    if deeper_than(&args, max_depth) {
        drop_flat(args);
        return Err(ToolError::InvalidArguments {
            tool: tool.clone(),
            field: None,
            kind: ArgsErrorKind::TooDeep,
            problem: format!(
                "the arguments nest more than {max_depth} levels deep; flatten them, or raise the limit with `Limits::with_max_depth`",
            ),
        });
    }
    let args = match args {
        Value::Object(args) => args,
        Value::Null => Args::new(),
        other => {
            let problem = format!(
                "arguments must be a JSON object, not `{}`",
                shorten_json(&other)
            );
            return Err(ArgsError::whole(problem).for_tool(tool));
        }
    };
    // The operator's pinned and hidden params are the layer's that pins or
    // hides them, wherever its params live (an item of a batch): see
    // `stack::erased::Withheld`.
    // The bound name called is part of the call's context, for the layers and
    // the body (and their errors) deep in the combo.
    let current = Context::current();
    let context = match called {
        Called::Alias(alias) => current.with(CallName(alias.clone())),
        _ if current.is_empty() => entry.called.clone(),
        _ => current.with(CallName(tool.clone())),
    };
    Ok((args, context))
}
