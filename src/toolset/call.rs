//! Calls by name with JSON: [`Toolset::call`] by a bound name,
//! [`Toolset::call_published`] by a published one.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::Value;

use crate::bind::{Entry, ToolInfo};
use crate::context::{CallName, Context};
use crate::error::{ArgsError, ArgsErrorKind, ToolError, panic_message, shorten, shorten_json};
use crate::limits::{Limits, deeper_than, drop_flat};
use crate::name::Name;
use crate::schema::{self, Args};

use super::Toolset;

/// How a call named what it calls.
enum Called {
    /// By a bound name, in process.
    Bound,
    /// By a published name that is the bound name's own.
    Published,
    /// By a published name other than the bound name's: errors speak of it.
    Alias(Name),
}

impl Toolset {
    /// Calls a bound name with JSON arguments (an object; `null` means none).
    ///
    /// Arguments are strict: a name the tool's input schema does not list is an
    /// error (unless the schema allows additional properties), so a reserved param
    /// of one branch is refused by the others.
    ///
    /// Hostile arguments are refused, never fatal: arguments nested deeper than
    /// [`Limits::max_depth`] are refused before any other work (and dropped
    /// without recursing), and a panic anywhere below (a body, an extension's own
    /// code) becomes [`ToolError::Panicked`]; the toolset keeps serving.
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolgraft::{Tool, ToolError, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Cache;
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Cache::default()),))?;
    /// let err = toolset.call("shout", json!({"text": "hi", "exp": 5})).await.unwrap_err();
    /// assert!(err.to_string().contains("unknown field `exp`"));
    /// assert!(matches!(err, ToolError::InvalidArguments { field: Some(f), .. } if f == "exp"));
    /// # Ok(()) }
    /// ```
    pub async fn call(&self, name: &str, args: Value) -> Result<Value, ToolError> {
        let (entry, limits) = {
            let catalog = self.read();
            (catalog.entries.get(name).cloned(), catalog.limits)
        };
        self.call_entry(entry, Called::Bound, name, args, limits)
            .await
    }

    /// Calls a published name ([`Publish`]) with JSON arguments: the bound name
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
    pub async fn call_published(&self, name: &str, args: Value) -> Result<Value, ToolError> {
        let (entry, limits) = {
            let catalog = self.read();
            (catalog.published.get(name).cloned(), catalog.limits)
        };
        let called = match entry.as_ref().filter(|entry| entry.info.name != name) {
            Some(_) => Name::new(name).map_or(Called::Published, Called::Alias),
            None => Called::Published,
        };
        self.call_entry(entry, called, name, args, limits).await
    }

    /// Calls `entry` (what `name` named, if anything), as `called` says.
    async fn call_entry(
        &self,
        entry: Option<Arc<Entry>>,
        called: Called,
        name: &str,
        args: Value,
        limits: Limits,
    ) -> Result<Value, ToolError> {
        let alias = match &called {
            Called::Alias(alias) => Some(alias.clone()),
            Called::Bound | Called::Published => None,
        };
        let outcome = self.call_found(entry, &called, name, args, limits).await;
        match alias {
            Some(alias) => outcome.map_err(|error| error.for_caller(&alias)),
            None => outcome,
        }
    }

    async fn call_found(
        &self,
        entry: Option<Arc<Entry>>,
        called: &Called,
        name: &str,
        args: Value,
        limits: Limits,
    ) -> Result<Value, ToolError> {
        // First, and without recursing: decoding, formatting and even dropping a
        // value recurse once per level.
        let too_deep = deeper_than(&args, limits.max_depth());
        let Some(entry) = entry else {
            if too_deep {
                drop_flat(args);
            }
            return Err(ToolError::UnknownTool {
                name: shorten(name).into_owned(),
            });
        };
        let tool = &entry.info.name;
        if too_deep {
            drop_flat(args);
            return Err(ToolError::InvalidArguments {
                tool: tool.clone(),
                field: None,
                kind: ArgsErrorKind::TooDeep,
                problem: format!(
                    "the arguments nest more than {} levels deep; flatten them, or raise the limit with `Limits::with_max_depth`",
                    limits.max_depth()
                ),
            });
        }
        let mut args = match args {
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
        // The operator's pinned params: never the caller's, always passed.
        if !entry.pinned.is_empty() {
            if let Some(param) = args.keys().find(|param| entry.pinned.contains_key(*param)) {
                return Err(ToolError::InvalidArguments {
                    tool: tool.clone(),
                    field: Some(param.clone()),
                    kind: ArgsErrorKind::UnknownField,
                    problem: format!("unknown field `{param}`: the operator pins it"),
                });
            }
            args.extend(entry.pinned.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        // The bound name called is part of the call's context, for the layers and
        // the body (and their errors) deep in the combo.
        let current = Context::current();
        let context = match called {
            Called::Alias(alias) => current.with(CallName(alias.clone())),
            _ if current.is_empty() => entry.called.clone(),
            _ => current.with(CallName(tool.clone())),
        };
        let call =
            context.scope(AssertUnwindSafe(entry.stack.call_json(tool, args)).catch_unwind());
        match call.await {
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
        }
    }

    /// " (`arg` is a parameter of `x`)" when a sibling of `info` names `arg`;
    /// for a client of published names, a sibling published under its own name
    /// only (a client can call no other).
    fn taken_by_sibling(&self, info: &ToolInfo, arg: &str, clients: bool) -> String {
        let catalog = self.read();
        let siblings = catalog
            .tools
            .get(&info.base)
            .into_iter()
            .flat_map(|group| &group.names);
        siblings
            .filter(|name| **name != info.name)
            .filter(|name| !clients || catalog.published.contains_key(*name))
            .filter_map(|name| catalog.entries.get(name))
            .find(|entry| {
                schema::property_names(&entry.info.input_schema)
                    .is_some_and(|names| names.iter().any(|name| name == arg))
            })
            .map(|entry| format!(" (`{arg}` is a parameter of `{}`)", entry.info.name))
            .unwrap_or_default()
    }
}
