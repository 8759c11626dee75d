//! The toolset: every bound name, callable by name with JSON, and changeable live.

use std::sync::{Arc, PoisonError, RwLock, Weak};

use crate::limits::{LimitError, Limits};

// One idea a file, bottom to top: a file uses only the ones above it in this
// list, and `Toolset`, which this file defines.
//
// - `catalog`: the table of bound names a toolset shares between its clones;
// - `install`: the one step that swaps a change into the catalog, whole;
// - `lookup`: what clients see of the bound and published names;
// - `edit`: `Edit`, a change of bound tools;
// - `typed`: `Toolset::bind`, typed combos;
// - `base_tools`: `BaseTools`, base tools offered by name;
// - `manifest`: `Toolset::bind_manifest` and `Toolset::apply_manifest`;
// - `call`: calls by name with JSON.
mod catalog;
mod install;
mod lookup;
mod edit;
mod typed;
mod base_tools;
mod manifest;
mod call;

pub use crate::bind::{Link, Publish, Published, Site, ToolInfo};
pub use base_tools::BaseTools;
pub use edit::Edit;

use catalog::Catalog;

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
/// - [`edit`](Toolset::edit): a change of bound tools (attach, detach, replace,
///   rebase, unbind), whole or not at all;
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
    /// each (a tool bound, rebased or unbound, a combo attached, detached or
    /// replaced). What an MCP server turns into
    /// `notifications/tools/list_changed`.
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

    /// The catalog, read. A poisoned lock is read as it is: a change is swapped
    /// in whole under the lock, so a panic elsewhere leaves it consistent.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        self.catalog.read().unwrap_or_else(PoisonError::into_inner)
    }
}
