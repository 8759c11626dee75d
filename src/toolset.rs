//! The toolset: every bound name, callable by name with JSON.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value;

use crate::bind::{self, Entry, ToolInfo};
use crate::combo::Combos;
use crate::error::{ArgsError, ArgsErrorKind, BindError, ToolError};
use crate::name::Name;
use crate::schema;
use crate::stack::Args;
use crate::tool::BaseTool;

/// Bound tools: each base with one branch per prefix of each of its combos.
///
/// Cloning is cheap and shares the bindings, so one toolset can serve many tasks
/// (and the workers of a backend) at once.
///
/// ```
/// use frunk::hlist;
/// use serde_json::json;
/// use toolgraft::{BaseTool, Tool, Toolset};
/// use toolgraft::ext::{Cache, Trace};
///
/// #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
/// struct Shout { text: String }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shout = Tool::builder().name("shout").description("Return the text.")
///     .body(|i: Shout| async move { Ok(i.text.to_uppercase()) }).build()?;
///
/// let toolset = Toolset::new();
/// toolset.bind(&shout, hlist![
///     shout.combo().with(Trace).with(Cache::default()),
/// ])?;
/// assert_eq!(toolset.names(), ["shout", "shout_trace", "shout_trace_cache"]);
///
/// let out = toolset.call("shout_trace_cache", json!({"text": "hi", "exp": 30})).await?;
/// assert_eq!(out, json!("HI"));
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct Toolset {
    catalog: Arc<RwLock<Catalog>>,
}

#[derive(Default)]
struct Catalog {
    /// Each base tool, with every name it binds.
    tools: BTreeMap<Name, Vec<Name>>,
    entries: HashMap<Name, Arc<Entry>>,
}

impl Toolset {
    /// An empty toolset.
    ///
    /// ```
    /// assert!(toolgraft::Toolset::new().names().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds `base` and every branch of its typed `combos` (a `frunk::hlist!` of
    /// combos started from `base`), and returns each combo's outermost branch for
    /// typed calls.
    ///
    /// All or nothing: on error, nothing of the tool is bound.
    ///
    /// ```
    /// use frunk::{hlist, hlist_pat};
    /// use toolgraft::{BaseTool, BindError, Tool, Toolset};
    /// use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// let shout = Tool::builder().name("shout").description("Return the text.")
    ///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// let hlist_pat![traced] = toolset.bind(&shout, hlist![shout.combo().with(Trace)])?;
    /// assert_eq!(traced.name(), "shout_trace");
    ///
    /// // A second binding of the same tool is refused, and changes nothing.
    /// let again = toolset.bind(&shout, hlist![]);
    /// assert!(matches!(again, Err(BindError::NameTaken { .. })));
    /// assert_eq!(toolset.names(), ["shout", "shout_trace"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind<B: BaseTool, C: Combos>(
        &self,
        base: &B,
        combos: C,
    ) -> Result<C::Branches, BindError> {
        let mut drafts = Vec::new();
        let branches = combos.into_drafts(&mut drafts);
        let entries = bind::plan_tool(base.spec(), Arc::new(base.clone()), drafts)?;
        self.insert(&base.spec().name, entries)?;
        Ok(branches)
    }

    fn insert(&self, base: &Name, entries: Vec<Entry>) -> Result<(), BindError> {
        let mut catalog = self.catalog.write().unwrap_or_else(PoisonError::into_inner);
        for entry in &entries {
            if let Some(taken) = catalog.entries.get(&entry.info.name) {
                return Err(BindError::NameTaken {
                    tool: base.clone(),
                    name: entry.info.name.clone(),
                    owner: taken.info.base.clone(),
                });
            }
        }
        let names = entries
            .iter()
            .map(|entry| entry.info.name.clone())
            .collect();
        catalog.tools.insert(base.clone(), names);
        for entry in entries {
            catalog
                .entries
                .insert(entry.info.name.clone(), Arc::new(entry));
        }
        Ok(())
    }

    /// Calls a bound name with JSON arguments (an object; `null` means none).
    ///
    /// Arguments are strict: a name the tool's input schema does not list is an
    /// error (unless the schema allows additional properties), so a reserved param
    /// of one branch is refused by the others.
    ///
    /// ```
    /// # use frunk::hlist; use serde_json::json;
    /// # use toolgraft::{BaseTool, Tool, ToolError, Toolset};
    /// # use toolgraft::ext::Cache;
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind(&shout, hlist![shout.combo().with(Cache::default())])?;
    /// let err = toolset.call("shout", json!({"text": "hi", "exp": 5})).await.unwrap_err();
    /// assert!(err.to_string().contains("unknown field `exp`"));
    /// assert!(matches!(err, ToolError::InvalidArguments { field: Some(f), .. } if f == "exp"));
    /// # Ok(()) }
    /// ```
    pub async fn call(&self, name: &str, args: Value) -> Result<Value, ToolError> {
        let entry = self.entry(name).ok_or_else(|| ToolError::UnknownTool {
            name: name.to_owned(),
        })?;
        let tool = &entry.info.name;
        let args = match args {
            Value::Object(args) => args,
            Value::Null => Args::new(),
            other => {
                let problem = format!("arguments must be a JSON object, not `{other}`");
                return Err(ArgsError::whole(problem).for_tool(tool));
            }
        };
        let result = entry.stack.call_json(tool, args).await;
        match result {
            Err(ToolError::InvalidArguments {
                tool,
                field: Some(field),
                kind: ArgsErrorKind::UnknownField,
                problem,
            }) => {
                let hint = self.taken_by_sibling(&entry.info, &field);
                Err(ToolError::InvalidArguments {
                    tool,
                    field: Some(field),
                    kind: ArgsErrorKind::UnknownField,
                    problem: problem + &hint,
                })
            }
            other => other,
        }
    }

    /// " (`arg` is a parameter of `x`)" when a sibling of `info` names `arg`.
    fn taken_by_sibling(&self, info: &ToolInfo, arg: &str) -> String {
        let catalog = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
        let siblings = catalog.tools.get(&info.base).into_iter().flatten();
        siblings
            .filter(|name| **name != info.name)
            .filter_map(|name| catalog.entries.get(name))
            .find(|entry| {
                schema::property_names(&entry.info.input_schema)
                    .is_some_and(|names| names.iter().any(|name| name == arg))
            })
            .map(|entry| format!(" (`{arg}` is a parameter of `{}`)", entry.info.name))
            .unwrap_or_default()
    }

    fn entry(&self, name: &str) -> Option<Arc<Entry>> {
        let catalog = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
        catalog.entries.get(name).cloned()
    }

    /// What clients see of a bound name.
    ///
    /// ```
    /// # use frunk::hlist; use toolgraft::{BaseTool, Tool, Toolset}; use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind(&shout, hlist![shout.combo().with(Trace)])?;
    /// assert_eq!(toolset.info("shout_trace").unwrap().description, "Return the text.");
    /// assert!(toolset.info("shout_loud").is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn info(&self, name: &str) -> Option<ToolInfo> {
        self.entry(name).map(|entry| entry.info.clone())
    }

    /// Every bound name with what clients see of it, sorted by name.
    ///
    /// ```
    /// # use frunk::hlist; use toolgraft::{BaseTool, Tool, Toolset}; use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind(&shout, hlist![shout.combo().with(Trace)])?;
    /// let tools = toolset.tools();
    /// assert_eq!(tools.len(), 2);
    /// assert!(!tools[0].is_branch() && tools[1].is_branch());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tools(&self) -> Vec<ToolInfo> {
        let catalog = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
        let mut tools: Vec<ToolInfo> = catalog
            .entries
            .values()
            .map(|entry| entry.info.clone())
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }

    /// Every bound name, sorted.
    ///
    /// ```
    /// # use frunk::hlist; use toolgraft::{BaseTool, Tool, Toolset}; use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind(&shout, hlist![shout.combo().with(Trace)])?;
    /// assert_eq!(toolset.names(), ["shout", "shout_trace"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn names(&self) -> Vec<Name> {
        let catalog = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<Name> = catalog.entries.keys().cloned().collect();
        names.sort();
        names
    }

    /// The base tool a bound name belongs to (rule 16).
    ///
    /// ```
    /// # use frunk::hlist; use toolgraft::{BaseTool, Tool, Toolset}; use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind(&shout, hlist![shout.combo().with(Trace)])?;
    /// assert_eq!(toolset.base_of("shout_trace").unwrap(), "shout");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn base_of(&self, name: &str) -> Option<Name> {
        self.entry(name).map(|entry| entry.info.base.clone())
    }

    /// Whether a bound name is a branch (`None` when it is not bound).
    ///
    /// ```
    /// # use frunk::hlist; use toolgraft::{BaseTool, Tool, Toolset}; use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind(&shout, hlist![shout.combo().with(Trace)])?;
    /// assert_eq!(toolset.is_branch("shout_trace"), Some(true));
    /// assert_eq!(toolset.is_branch("shout"), Some(false));
    /// assert_eq!(toolset.is_branch("nope"), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_branch(&self, name: &str) -> Option<bool> {
        self.entry(name).map(|entry| entry.info.is_branch())
    }

    /// Whether a name is bound.
    ///
    /// ```
    /// # use frunk::hlist; use toolgraft::{BaseTool, Tool, Toolset}; use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind(&shout, hlist![shout.combo().with(Trace)])?;
    /// assert!(toolset.contains("shout_trace") && !toolset.contains("shout_loud"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn contains(&self, name: &str) -> bool {
        self.entry(name).is_some()
    }
}
