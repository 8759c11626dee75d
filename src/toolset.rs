//! The toolset: every bound name, callable by name with JSON, and changeable live.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, PoisonError, RwLock, Weak};

use futures_util::FutureExt;

use serde_json::Value;

use crate::bind::{self, Attached, ComboDraft, Entry, Minted};
pub use crate::bind::{Link, Site, ToolInfo};
use crate::combo::Combos;
use crate::context::{CallName, Context};
use crate::error::panic_message;
use crate::error::{ArgsError, ArgsErrorKind, BindError, ToolError, listed, shorten, shorten_json};
use crate::limits::{LimitError, Limits, deeper_than, drop_flat};
use crate::name::Name;
use crate::runtime::Registry;
use crate::runtime::manifest::{ComboSpec, Manifest};
use crate::schema;
use crate::schema::Args;
use crate::tool::{Annotations, BaseTool, Presentation};

mod edit;

pub use crate::bind::{Publish, Published};
pub use edit::Edit;

/// Bound tools: each base with one branch per prefix of each of its combos.
///
/// Cloning is cheap and shares the bindings, so one toolset can serve many tasks
/// (and the workers of a backend) at once. Changes are atomic: a call sees a
/// tool's names either all before or all after a change.
///
/// One verb per idea:
///
/// - [`bind`](Toolset::bind): typed combos, a tuple of them, each bringing its
///   base tool;
/// - [`bind_manifest`](Toolset::bind_manifest): base tools with the run-time
///   combos a manifest gives them, each tool on its own;
/// - [`edit`](Toolset::edit): a change of bound tools (attach, detach, replace),
///   whole or not at all;
/// - [`apply_manifest`](Toolset::apply_manifest): a manifest's combos for bound
///   tools, each tool's edit on its own.
///
/// ```
/// use serde_json::json;
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::{Cache, Trace};
///
/// #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
/// struct Shout { text: String }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
///     .body(|i: Shout| async move { Ok(i.text.to_uppercase()) }).build()?;
///
/// let toolset = Toolset::new();
/// toolset.bind((
///     shout.combo().with(Trace).with(Cache::default()),
/// ))?;
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

impl std::fmt::Debug for Toolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolset")
            .field("names", &self.names())
            .finish()
    }
}

/// A handle to a toolset that does not keep it alive (for extensions that call
/// back into the toolset they are bound in, such as `chain`).
///
/// ```
/// let toolset = toolgraft::Toolset::new();
/// let weak = toolset.downgrade();
/// assert!(weak.upgrade().is_some());
/// drop(toolset);
/// assert!(weak.upgrade().is_none());
/// ```
#[derive(Clone, Default)]
pub struct WeakToolset {
    catalog: Weak<RwLock<Catalog>>,
}

impl std::fmt::Debug for WeakToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakToolset")
            .field("alive", &(self.catalog.strong_count() > 0))
            .finish()
    }
}

impl WeakToolset {
    /// The toolset, if it is still alive.
    pub fn upgrade(&self) -> Option<Toolset> {
        self.catalog.upgrade().map(|catalog| Toolset { catalog })
    }
}

struct Catalog {
    /// Each base tool: its base, its combos, and every name it binds.
    tools: BTreeMap<Name, ToolGroup>,
    entries: HashMap<Name, Arc<Entry>, BuildHasherDefault<NameHasher>>,
    /// Each published name with the entry that serves it ([`Publish`]).
    published: HashMap<Name, Arc<Entry>, BuildHasherDefault<NameHasher>>,
    /// Counts changes to the bound names, for whoever serves the list.
    changes: tokio::sync::watch::Sender<u64>,
    limits: Limits,
}

impl Default for Catalog {
    fn default() -> Self {
        Self {
            tools: BTreeMap::new(),
            entries: HashMap::default(),
            published: HashMap::default(),
            changes: tokio::sync::watch::Sender::new(0),
            limits: Limits::default(),
        }
    }
}

/// One base tool with its attached combos.
#[derive(Clone)]
pub(crate) struct ToolGroup {
    pub base: Minted,
    /// The base tool's own presentation, before an operator's hints.
    pub own: Arc<Presentation>,
    pub combos: Vec<Attached>,
    pub publish: Publish,
    names: Vec<Name>,
    /// Bumped on every change, so a change prepared outside the lock can tell
    /// whether the tool moved on meanwhile.
    generation: u64,
}

impl ToolGroup {
    /// Sets the base's hints to its own with each one `said` replacing its own
    /// (a manifest's `"annotations"`; none said is the tool's own again).
    pub(crate) fn annotate(&mut self, said: &Annotations) {
        self.base.running.presentation = annotated(&self.own, said);
    }

    /// A tool not bound yet, with its combos.
    pub(crate) fn new(base: Minted, combos: Vec<Attached>) -> Self {
        Self {
            own: base.running.presentation.clone(),
            base,
            combos,
            publish: Publish::default(),
            names: Vec::new(),
            generation: 0,
        }
    }
}

/// `own` with each hint `said` replacing its own.
fn annotated(own: &Arc<Presentation>, said: &Annotations) -> Arc<Presentation> {
    if said.is_empty() {
        return own.clone();
    }
    Arc::new(Presentation {
        annotations: own.annotations.overridden_by(said),
        ..Presentation::clone(own)
    })
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

    /// An empty toolset with other [`Limits`] than the defaults; a limit out of
    /// its range is refused.
    ///
    /// ```
    /// use toolgraft::Toolset;
    /// use toolgraft::limits::Limits;
    /// let toolset = Toolset::with_limits(Limits::default().with_max_combo_len(8))?;
    /// assert_eq!(toolset.limits().max_combo_len(), 8);
    /// # Ok::<(), toolgraft::limits::LimitError>(())
    /// ```
    pub fn with_limits(limits: Limits) -> Result<Self, LimitError> {
        let catalog = Catalog {
            limits: limits.checked()?,
            ..Catalog::default()
        };
        Ok(Self {
            catalog: Arc::new(RwLock::new(catalog)),
        })
    }

    /// The toolset's limits (see [`Toolset::with_limits`]).
    ///
    /// ```
    /// assert_eq!(toolgraft::Toolset::new().limits(), toolgraft::limits::Limits::default());
    /// ```
    pub fn limits(&self) -> Limits {
        self.read().limits
    }

    /// Watches the bound names: the value counts changes, and a receiver wakes on
    /// each (a tool bound, a combo attached, detached or replaced). What an MCP
    /// server turns into `notifications/tools/list_changed`.
    ///
    /// ```
    /// use toolgraft::{Tool, Toolset};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// let toolset = Toolset::new();
    /// let changes = toolset.changes();
    /// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    ///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// toolset.bind((shout.combo(),))?;
    /// assert!(changes.has_changed()?);
    /// assert_eq!(*changes.borrow(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.read().changes.subscribe()
    }

    /// A handle that does not keep the toolset alive.
    pub fn downgrade(&self) -> WeakToolset {
        WeakToolset {
            catalog: Arc::downgrade(&self.catalog),
        }
    }

    /// Binds typed combos: a tuple of 0 to 16 [`Combo`](crate::Combo)s, each with
    /// every branch it mints and the base tool it was started from, and returns
    /// each combo's outermost branch in the same shape, for typed calls.
    ///
    /// The one way typed code binds. The base comes from the combos, so there is
    /// no base to pass beside them; a tool alone is its combo with no extension
    /// (`(tool.combo(),)` binds the tool's own name), and `()` binds nothing.
    /// Combos of several base tools may share one call: each base is bound with
    /// its own combos. Two different tools of one name in a call are refused
    /// ([`BindError::AlreadyBound`]).
    ///
    /// All or nothing: on error, nothing of the call is bound. A base that is
    /// bound already is refused ([`BindError::AlreadyBound`]): bind all of a
    /// tool's typed combos in one call, and change a bound tool with
    /// [`edit`](Toolset::edit).
    ///
    /// ```
    /// use toolgraft::{BindError, Tool, Toolset};
    /// use toolgraft::tool::BaseTool;
    /// use toolgraft::ext::{Cache, Trace};
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let tool = |name: &str| Tool::builder().name(name).description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build();
    /// let (shout, whisper) = (tool("shout")?, tool("whisper")?);
    /// let toolset = Toolset::new();
    /// let (traced, cached, _whisper) = toolset.bind((
    ///     shout.combo().with(Trace),
    ///     shout.combo().with(Cache::default()),
    ///     whisper.combo(), // a base alone
    /// ))?;
    /// assert_eq!((traced.name().as_str(), cached.name().as_str()), ("shout_trace", "shout_cache"));
    /// assert_eq!(toolset.names(), ["shout", "shout_cache", "shout_trace", "whisper"]);
    ///
    /// // A second binding of a bound tool is refused, and changes nothing.
    /// let again = toolset.bind((shout.combo(),));
    /// assert!(matches!(again, Err(BindError::AlreadyBound { .. })));
    /// assert_eq!(toolset.bind(())?, ());
    /// assert_eq!(toolset.names().len(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Anything but a tuple of combos does not compile, and the error says so:
    ///
    /// ```compile_fail
    /// # use toolgraft::{Tool, Toolset};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build().unwrap();
    /// Toolset::new().bind((shout.clone(),)); // `Tool<..>` is not a combo
    /// ```
    pub fn bind<C: Combos>(&self, combos: C) -> Result<C::Branches, BindError> {
        self.bind_publishing(combos, [])
    }

    /// [`bind`](Toolset::bind), with what some of the tools publish
    /// ([`Publish`]) set in the same step: clients never see the names the
    /// publication hides, and a branch too long to publish under its own name
    /// ([`Limits::max_published_len`]) binds under an alias. A publication for a
    /// tool the combos do not bind is refused ([`BindError::UnknownTool`]).
    ///
    /// ```
    /// use toolgraft::{Tool, Toolset};
    /// use toolgraft::ext::Trace;
    /// use toolgraft::limits::Limits;
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
    /// let ping = Tool::builder().name("ping").description("Answer pong.").read_only()
    ///     .body(|_: Ping| async { Ok("pong") }).build()?;
    /// let toolset = Toolset::with_limits(Limits::default().with_max_published_len(12))?;
    /// let deep = ping.combo().with(Trace).with(Trace); // `ping_trace_trace`: 16 bytes
    /// toolset.bind_publishing((deep,), [("ping", Publish::only([("ping", "ping_trace_trace")])?)])?;
    /// assert_eq!(toolset.resolve("ping").unwrap().name, "ping_trace_trace");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind_publishing<'a, C: Combos>(
        &self,
        combos: C,
        publications: impl IntoIterator<Item = (&'a str, Publish)>,
    ) -> Result<C::Branches, BindError> {
        let mut publications: Vec<(&str, Publish)> = publications.into_iter().collect();
        let mut drafts = Vec::new();
        let branches = combos.into_drafts(&mut drafts);
        // One group per base tool, in the order the combos name them.
        let mut groups: Vec<(Minted, Vec<ComboDraft>)> = Vec::new();
        for draft in drafts {
            let Some(origin) = draft.origin().cloned() else {
                unreachable!("a typed combo remembers the tool it was started from")
            };
            let at = match groups
                .iter()
                .position(|(base, _)| base.running.base == origin.running.base)
            {
                Some(at) => at,
                None => {
                    groups.push((origin.clone(), Vec::new()));
                    groups.len() - 1
                }
            };
            let (base, group) = &mut groups[at];
            if !base.same_base(&origin) {
                return Err(BindError::AlreadyBound {
                    tool: origin.running.base.clone(),
                });
            }
            // A combo with no extension is its base alone: it mints no branch.
            if draft.len() > 0 {
                group.push(draft);
            }
        }
        let limit = self.limits().max_combo_len();
        let mut changes = Vec::with_capacity(groups.len());
        for (base, drafts) in groups {
            let tool = &base.running.base;
            for draft in &drafts {
                crate::bind::rules::combo_length(tool, draft.len(), limit)?;
            }
            let combos = drafts
                .into_iter()
                .map(ComboDraft::finish)
                .collect::<Result<Vec<_>, _>>()?;
            // One combo once, as an edit holds them: bound twice, one `detach`
            // would leave it attached.
            for (at, combo) in combos.iter().enumerate() {
                if combos[..at]
                    .iter()
                    .any(|earlier| earlier.elements == combo.elements)
                {
                    return Err(BindError::AlreadyAttached {
                        tool: tool.clone(),
                        combo: listed(&combo.elements),
                    });
                }
            }
            let publish = publications
                .iter()
                .position(|(name, _)| *name == tool.as_str())
                .map(|at| publications.swap_remove(at).1);
            let mut group = ToolGroup::new(base, combos);
            if let Some(publish) = publish {
                group.publish = publish;
            }
            changes.push((group, None));
        }
        if let Some((tool, _)) = publications.first() {
            return Err(BindError::UnknownTool {
                tool: shorten(tool).into_owned(),
            });
        }
        if !changes.is_empty() {
            self.install(changes)?;
        }
        Ok(branches)
    }

    /// A copy of the group of base tool `tool`, for a change to work on; a branch
    /// or an unknown name is refused.
    pub(crate) fn group(&self, tool: &str) -> Result<ToolGroup, BindError> {
        let catalog = self.read();
        if let Some(group) = catalog.tools.get(tool) {
            return Ok(group.clone());
        }
        match catalog.entries.get(tool) {
            Some(entry) => Err(BindError::NotABase {
                name: entry.info.name.clone(),
                base: entry.info.base.clone(),
            }),
            None => Err(BindError::UnknownTool {
                tool: shorten(tool).into_owned(),
            }),
        }
    }

    /// Plans each group and swaps them all in for their tools' names, in one
    /// step: all of them or none. A group with an expected generation replaces
    /// its tool only if the tool is still at that generation (else the change is
    /// retried by the caller); one without one binds a tool that is not bound yet.
    pub(crate) fn install(
        &self,
        changes: Vec<(ToolGroup, Option<u64>)>,
    ) -> Result<Retry, BindError> {
        let limit = self.limits().max_name_len();
        let mut planned = Vec::with_capacity(changes.len());
        for (group, expected) in changes {
            let entries = bind::plan_tool(&group.base, &group.combos)?;
            let tool = group.base.running.base.clone();
            for entry in &entries {
                crate::bind::rules::name_length(&tool, &entry.info.name, &entry.info.chain, limit)?;
            }
            planned.push((group, expected, entries));
        }
        let mut catalog = self.catalog.write().unwrap_or_else(PoisonError::into_inner);
        let changed: Vec<&Name> = planned
            .iter()
            .map(|(group, ..)| &group.base.running.base)
            .collect();
        let mut minted: HashMap<&Name, &Name> = HashMap::new();
        for (group, expected, entries) in &planned {
            let tool = &group.base.running.base;
            let current = catalog.tools.get(tool).map(|current| current.generation);
            match (current, expected) {
                (Some(_), None) => return Err(BindError::AlreadyBound { tool: tool.clone() }),
                (Some(now), Some(expected)) if now != *expected => return Ok(Retry::Yes),
                (None, Some(_)) => return Ok(Retry::Yes),
                _ => {}
            }
            for entry in entries {
                let name = &entry.info.name;
                let owner = catalog
                    .entries
                    .get(name)
                    .map(|taken| &taken.info.base)
                    .filter(|owner| !changed.contains(owner));
                let owner = owner.or_else(|| minted.get(name).copied());
                if let Some(owner) = owner.filter(|owner| *owner != tool) {
                    return Err(BindError::NameTaken {
                        tool: tool.clone(),
                        name: name.clone(),
                        owner: owner.clone(),
                    });
                }
                minted.insert(name, tool);
            }
        }
        drop(minted);
        let published = publish_all(&catalog, &changed, &planned, catalog.limits)?;
        drop(changed);
        // What is replaced is dropped after the lock is released: dropping it runs
        // extensions' and bodies' `Drop`, which may call back into the toolset.
        let (mut replaced, mut old_groups) = (Vec::new(), Vec::new());
        for (mut group, _, entries) in planned {
            let tool = group.base.running.base.clone();
            let old = catalog.tools.remove(&tool);
            for name in old.iter().flat_map(|old| &old.names) {
                replaced.extend(catalog.entries.remove(name));
            }
            group.names = entries
                .iter()
                .map(|entry| entry.info.name.clone())
                .collect();
            group.generation = old.as_ref().map_or(0, |old| old.generation + 1);
            for entry in entries {
                catalog
                    .entries
                    .insert(entry.info.name.clone(), Arc::new(entry));
            }
            catalog.tools.insert(tool, group);
            old_groups.push(old);
        }
        let entry = |name: &Name| catalog.entries.get(name).cloned();
        let published = published
            .into_iter()
            .filter_map(|(name, bound)| Some((name, entry(&bound)?)))
            .collect();
        catalog.published = published;
        catalog.changes.send_modify(|changes| *changes += 1);
        drop(catalog);
        drop((old_groups, replaced));
        Ok(Retry::No)
    }

    /// Binds every tool of `bases`, each with the combos `manifest` gives it (none
    /// if it names it not). Tools are independent; a tool that breaks a rule has
    /// none of its names bound (base included), and its key reports why; so does a
    /// manifest key that names no tool of `bases`. Returns each tool with its
    /// outcome: `bases` in order, then unknown manifest keys.
    ///
    /// The run-time counterpart of [`bind`](Toolset::bind), and a verb of its own
    /// for the same reason as [`apply_manifest`](Toolset::apply_manifest): an
    /// operator's file is many independent entries, so each tool gets its own
    /// outcome where `bind` is one all-or-nothing call.
    ///
    /// ```
    /// use toolgraft::runtime::manifest::Manifest;
    /// use toolgraft::{BindError, Registry, Tool, Toolset};
    /// use toolgraft::toolset::BaseTools;
    /// use toolgraft::ext::{Pool, Trace};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let tool = |name: &str| Tool::builder().name(name).description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build();
    /// let (shout, whisper) = (tool("shout")?, tool("whisper")?);
    /// let mut registry = Registry::new();
    /// registry.register(Trace)?.register(Pool::new(1)?)?;
    /// let manifest = Manifest::from_json(r#"{"tools": {"shout": ["trace"], "whisper": ["pool", "pool"]}}"#)?;
    ///
    /// let toolset = Toolset::new();
    /// let outcome = toolset.bind_manifest(&registry, &BaseTools::new().with(&shout).with(&whisper), &manifest);
    /// assert!(outcome[0].1.is_ok());
    /// assert!(matches!(outcome[1].1, Err(BindError::MultipleOfKind { .. })));
    /// assert_eq!(toolset.names(), ["shout", "shout_trace"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind_manifest(
        &self,
        registry: &Registry,
        bases: &BaseTools,
        manifest: &Manifest,
    ) -> Vec<(String, Result<(), BindError>)> {
        let no_combos = Vec::new();
        let by_tool: HashMap<&str, &Vec<ComboSpec>> = manifest
            .tools
            .iter()
            .map(|(tool, combos)| (tool.as_str(), combos))
            .collect();
        let mut outcome: Vec<(String, Result<(), BindError>)> = bases
            .tools
            .iter()
            .map(|base| {
                let tool = &base.running.base;
                let combos = by_tool.get(tool.as_str()).copied().unwrap_or(&no_combos);
                let limits = self.limits();
                let said = manifest.annotations_of(tool).cloned().unwrap_or_default();
                let mut annotated_base = base.clone();
                annotated_base.running.presentation = annotated(&base.running.presentation, &said);
                let bound =
                    build_combos(registry, &annotated_base, combos, &limits).and_then(|combos| {
                        // The tool's own hints stay its own: a later manifest that
                        // says none gets them back, not this manifest's.
                        let mut group = ToolGroup::new(base.clone(), combos);
                        group.annotate(&said);
                        if let Some(publish) = manifest.publish_of(tool) {
                            group.publish = publish.clone();
                        }
                        self.install(vec![(group, None)]).map(drop)
                    });
                (tool.as_str().to_owned(), bound)
            })
            .collect();
        let offered: std::collections::HashSet<&str> = bases
            .tools
            .iter()
            .map(|base| base.running.base.as_str())
            .collect();
        for (key, _) in &manifest.tools {
            if !offered.contains(key.as_str()) {
                outcome.push((
                    key.clone(),
                    Err(BindError::UnknownTool {
                        tool: shorten(key).into_owned(),
                    }),
                ));
            }
        }
        outcome
    }

    /// Gives each tool of `manifest` exactly the manifest's combos. Tools are
    /// independent: one that breaks a rule keeps its previous binding, the others
    /// change. Returns each tool key with its outcome, in manifest order.
    ///
    /// Each tool's change is an [`edit`](Toolset::edit) that
    /// [`replace`](Edit::replace)s its combos; what sets this apart, and why it is
    /// a verb of its own, is the per-tool outcome: a manifest is an operator's
    /// whole file, and one broken entry must not hold back the others (as for
    /// [`bind_manifest`](Toolset::bind_manifest)). For all-or-nothing across
    /// tools, put the replacements in one edit.
    ///
    /// ```
    /// use toolgraft::runtime::manifest::Manifest;
    /// use toolgraft::{BindError, Registry, Tool, Toolset};
    /// use toolgraft::tool::BaseTool;
    /// use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    ///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// let mut registry = Registry::new();
    /// registry.register(Trace)?;
    /// let manifest = Manifest::from_json(r#"{"tools": {"shout": ["trace"], "ghost": ["trace"]}}"#)?;
    /// let outcome = toolset.apply_manifest(&registry, &manifest);
    /// assert!(outcome[0].1.is_ok());
    /// assert!(matches!(outcome[1].1, Err(BindError::UnknownTool { .. })));
    /// assert_eq!(toolset.names(), ["shout", "shout_trace"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn apply_manifest(
        &self,
        registry: &Registry,
        manifest: &Manifest,
    ) -> Vec<(String, Result<(), BindError>)> {
        manifest
            .tools
            .iter()
            .map(|(tool, combos)| {
                let said = manifest.annotations_of(tool).cloned().unwrap_or_default();
                let mut edit = self.edit().replace_annotated(registry, tool, combos, said);
                if let Some(publish) = manifest.publish_of(tool) {
                    edit = edit.publish(tool, publish.clone());
                }
                (tool.clone(), edit.commit())
            })
            .collect()
    }

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

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        self.catalog.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn entry(&self, name: &str) -> Option<Arc<Entry>> {
        self.read().entries.get(name).cloned()
    }

    /// What clients see of a bound name.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
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
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// let tools = toolset.tools();
    /// assert_eq!(tools.len(), 2);
    /// assert!(!tools[0].is_branch() && tools[1].is_branch());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tools(&self) -> Vec<ToolInfo> {
        let catalog = self.read();
        let mut tools: Vec<ToolInfo> = catalog
            .entries
            .values()
            .map(|entry| entry.info.clone())
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }

    /// Every published name ([`Publish`]) with the bound name behind it and what
    /// clients see of that, sorted by published name: what a server lists.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::ext::Trace;
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// assert_eq!(toolset.published().len(), 2, "all, by default");
    /// toolset.edit().publish("shout", Publish::only([("shout", "shout_trace")])?).commit()?;
    /// let published = toolset.published();
    /// assert_eq!((published[0].name.as_str(), published[0].info.name.as_str()), ("shout", "shout_trace"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn published(&self) -> Vec<Published> {
        let catalog = self.read();
        let mut published: Vec<Published> = catalog
            .published
            .iter()
            .map(|(name, entry)| Published {
                name: name.clone(),
                info: entry.info.clone(),
            })
            .collect();
        published.sort_by(|a, b| a.name.cmp(&b.name));
        published
    }

    /// Whether `name` is published.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// assert!(toolset.is_published("shout") && !toolset.is_published("whisper"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_published(&self, name: &str) -> bool {
        self.read().published.contains_key(name)
    }

    /// What a published name calls, if it is published: the bound name behind it
    /// and what clients see of that.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// assert_eq!(toolset.resolve("shout").unwrap().name, "shout");
    /// assert!(toolset.resolve("whisper").is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve(&self, published: &str) -> Option<ToolInfo> {
        let catalog = self.read();
        catalog
            .published
            .get(published)
            .map(|entry| entry.info.clone())
    }

    /// Every bound name, sorted.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// assert_eq!(toolset.names(), ["shout", "shout_trace"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn names(&self) -> Vec<Name> {
        let catalog = self.read();
        let mut names: Vec<Name> = catalog.entries.keys().cloned().collect();
        names.sort();
        names
    }

    /// The base tool a bound name belongs to (rule `branch-bookkeeping`).
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// assert_eq!(toolset.base_of("shout_trace").unwrap(), "shout");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn base_of(&self, name: &str) -> Option<Name> {
        self.entry(name).map(|entry| entry.info.base.clone())
    }

    /// Whether a bound name is a branch (`None` when it is not bound).
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
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
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// assert!(toolset.contains("shout_trace") && !toolset.contains("shout_loud"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn contains(&self, name: &str) -> bool {
        self.entry(name).is_some()
    }
}

/// Whether a change prepared outside the lock must be prepared again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    Yes,
    No,
}

/// The combos of one tool, built: each must differ from the others (a combo
/// listed twice is refused, whichever way the tool is bound or changed).
fn build_combos(
    registry: &Registry,
    base: &Minted,
    combos: &[ComboSpec],
    limits: &Limits,
) -> Result<Vec<Attached>, BindError> {
    let mut attached: Vec<Attached> = Vec::with_capacity(combos.len());
    for combo in combos {
        if attached
            .iter()
            .any(|other| bind::is_combo(&other.elements, combo))
        {
            return Err(BindError::AlreadyAttached {
                tool: base.running.base.clone(),
                combo: listed(&bind::combo_key(combo)),
            });
        }
        attached.push(registry.combo(base, combo, limits)?);
    }
    Ok(attached)
}

/// Base tools offered to [`Toolset::bind_manifest`], by name, type-erased.
///
/// ```
/// use toolgraft::Tool;
/// use toolgraft::toolset::BaseTools;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
/// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let bases = BaseTools::new().with(&shout);
/// assert_eq!(bases.names(), ["shout"]);
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Default)]
pub struct BaseTools {
    tools: Vec<Minted>,
}

impl std::fmt::Debug for BaseTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("BaseTools").field(&self.names()).finish()
    }
}

impl BaseTools {
    /// No tools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `base` (see the type's example).
    pub fn add<B: BaseTool>(&mut self, base: &B) -> &mut Self {
        self.tools.push(Minted::base(base));
        self
    }

    /// Adds `base`, by value (see the type's example).
    pub fn with<B: BaseTool>(mut self, base: &B) -> Self {
        self.add(base);
        self
    }

    /// The tools' names, in the order they were added.
    pub fn names(&self) -> Vec<Name> {
        self.tools
            .iter()
            .map(|base| base.running.base.clone())
            .collect()
    }
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

/// Every tool's published names after a change (`planned`, for the tools
/// `changed`; the catalog's groups for the others), as `(published, bound)`:
/// refused if a name is published twice or is too long, or names an unbound one.
fn publish_all(
    catalog: &Catalog,
    changed: &[&Name],
    planned: &[(ToolGroup, Option<u64>, Vec<Entry>)],
    limits: Limits,
) -> Result<Vec<(Name, Name)>, BindError> {
    let limit = limits.max_published_len();
    let mut owners = HashMap::new();
    let mut all = Vec::new();
    let planned = planned.iter().map(|(group, _, entries)| {
        let names: Vec<Name> = entries
            .iter()
            .map(|entry| entry.info.name.clone())
            .collect();
        (group, names)
    });
    let kept = catalog
        .tools
        .values()
        .filter(|group| !changed.contains(&&group.base.running.base))
        .map(|group| (group, group.names.clone()));
    for (group, names) in planned.chain(kept) {
        let tool = &group.base.running.base;
        let outermost = group.combos.iter().filter_map(|combo| {
            combo
                .branches
                .last()
                .map(|branch| branch.running.name.clone())
        });
        let pairs = group.publish.names(tool, &names, outermost)?;
        bind::check_unique(&mut owners, tool, &pairs, limit)?;
        all.extend(pairs);
    }
    Ok(all)
}

/// A multiply-rotate hash over a bound name, eight bytes at a time (as rustc's
/// FxHash): every by-name call hashes the name once, and SipHash's flooding
/// resistance buys nothing here (the keys are the bound names, chosen by whoever
/// binds; a caller's unknown name only misses).
#[derive(Clone, Copy, Default)]
struct NameHasher(u64);

impl NameHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for NameHasher {
    fn finish(&self) -> u64 {
        // The table picks buckets by the low bits and tags by the high ones: fold
        // the well-mixed high half into the low.
        self.0 ^ (self.0 >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut buffer = [0; 8];
            buffer.copy_from_slice(word);
            self.add(u64::from_le_bytes(buffer));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut buffer = [0; 8];
            buffer[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buffer));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }
}
