//! What clients see of the bound and published names, read from the catalog.

use std::sync::Arc;

use crate::access::{self, Access};
use crate::bind::{Entry, Published, ToolInfo};
use crate::context::Identity;
use crate::name::Name;

use super::Toolset;

impl Toolset {
    /// The entry that serves a bound name.
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

    /// Every published name ([`Publish`](super::Publish)) with the bound name behind it and what
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

    /// Whether a client `identity` (or an unidentified one) is shown the
    /// published name `name`: it is published, and the policies on it allow the
    /// caller, or refuse it with a step-up only (see [`access`]).
    /// The same policies decide [`call_published`](Toolset::call_published).
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// use toolgraft::access::Claim;
    /// use toolgraft::context::Identity;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// toolset.edit().authorize("shout", Claim::is("tenant", "acme")).commit()?;
    /// let acme = Identity::new("ann").with_claim("tenant", "acme");
    /// assert!(toolset.visible(Some(&acme), "shout"));
    /// assert!(!toolset.visible(None, "shout") && !toolset.visible(Some(&acme), "whisper"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn visible(&self, identity: Option<&Identity>, name: &str) -> bool {
        let catalog = self.read();
        if !catalog.published.contains_key(name) {
            return false;
        }
        catalog
            .guards_published
            .get(name)
            .is_none_or(|guards| access::shows(guards, &Access::listing(identity, name)))
    }

    /// The published names a client `identity` (or an unidentified one) is not
    /// shown, sorted: what a server takes out of the listing everyone shares,
    /// at the cost of the guarded names alone (none when the toolset has no
    /// policy).
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// use toolgraft::access::Scopes;
    /// use toolgraft::context::Identity;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let tool = |name: &str| Tool::builder().name(name).description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build();
    /// let toolset = Toolset::new();
    /// toolset.bind((tool("shout")?.combo(), tool("admin_reset")?.combo()))?;
    /// toolset.edit().authorize("admin_reset", Scopes::all(["admin"])).commit()?;
    /// assert_eq!(toolset.hidden_from(None), ["admin_reset"]);
    /// assert!(toolset.hidden_from(Some(&Identity::new("root").with_scopes(["admin"]))).is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hidden_from(&self, identity: Option<&Identity>) -> Vec<Name> {
        let catalog = self.read();
        let mut hidden: Vec<Name> = catalog
            .guards_published
            .iter()
            .filter(|(name, guards)| !access::shows(guards, &Access::listing(identity, name)))
            .map(|(name, _)| name.clone())
            .collect();
        hidden.sort_unstable();
        hidden
    }

    /// The names that carry a policy set while they were base tool `tool`'s
    /// (bound by it or published by it, now or before): what a manifest that
    /// says the tool's whole access takes off first.
    pub(crate) fn ruled_names_of(&self, tool: &str) -> Vec<Name> {
        let catalog = self.read();
        catalog
            .rules
            .iter()
            .filter(|(_, ruled)| ruled.owner == tool)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Whether any policy decides a published name: when none does, every
    /// client is shown the same names.
    ///
    /// ```
    /// # use toolgraft::Toolset;
    /// assert!(!Toolset::new().is_guarded());
    /// ```
    pub fn is_guarded(&self) -> bool {
        !self.read().guards_published.is_empty()
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
