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
        listed(&self.read().published)
    }

    /// What a client `identity` (or an unidentified one) is published: its
    /// [audience](super::Edit::audience)'s names, or everyone's
    /// ([`published`](Self::published)) when it is in none, with the bound
    /// name behind each, sorted by published name. The names its policies
    /// hide from it are in, as in `published`: [`hidden_from`](Self::hidden_from)
    /// says which.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::ext::Trace;
    /// use toolgraft::access::Scopes;
    /// use toolgraft::context::Identity;
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// toolset.edit()
    ///     .publish("shout", Publish::InPlace)
    ///     .audience("staff", Scopes::all(["staff"]))
    ///     .publish_to("staff", "shout", Publish::All)
    ///     .commit()?;
    /// let staff = Identity::new("ann").with_scopes(["staff"]);
    /// assert_eq!(toolset.published_for(Some(&staff)).len(), 2);
    /// assert_eq!(toolset.published_for(None).len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn published_for(&self, identity: Option<&Identity>) -> Vec<Published> {
        listed(self.read().view(identity).0)
    }

    /// The [audience](super::Edit::audience) of a client `identity` (or an
    /// unidentified one): the first whose policy allows it, `None` when none
    /// does (it is shown what everyone is).
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
    /// toolset.edit().audience("pro", Claim::is("plan", "pro")).commit()?;
    /// let pro = Identity::new("ann").with_claim("plan", "pro");
    /// assert_eq!(toolset.audience_of(Some(&pro)).unwrap(), "pro");
    /// assert_eq!(toolset.audience_of(None), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn audience_of(&self, identity: Option<&Identity>) -> Option<Name> {
        let catalog = self.read();
        catalog
            .audience_of(identity)
            .map(|audience| audience.name.clone())
    }

    /// The toolset's audiences, in the order a caller is matched against them.
    ///
    /// ```
    /// # use toolgraft::Toolset;
    /// use toolgraft::access::Claim;
    /// let toolset = Toolset::new();
    /// toolset.edit().audience("pro", Claim::is("plan", "pro")).commit()?;
    /// assert_eq!(toolset.audiences(), ["pro"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn audiences(&self) -> Vec<Name> {
        let catalog = self.read();
        catalog
            .audiences
            .iter()
            .map(|audience| audience.name.clone())
            .collect()
    }

    /// Whether `name` is published, to everyone or to an
    /// [audience](super::Edit::audience).
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
        let catalog = self.read();
        catalog.published.contains_key(name)
            || catalog
                .audiences
                .iter()
                .any(|audience| audience.published.contains_key(name))
    }

    /// Whether a client `identity` (or an unidentified one) is shown the
    /// published name `name`: it is published to it (to its
    /// [audience](super::Edit::audience), or to everyone when it is in none),
    /// and the policies on it allow the
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
        self.read().shows(identity, name)
    }

    /// The names published to a client `identity` (or an unidentified one)
    /// ([`published_for`](Self::published_for)) it is not shown, sorted: what
    /// a server takes out of the listing its audience shares,
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
        let (_, guards) = catalog.view(identity);
        let mut hidden: Vec<Name> = guards
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

    /// Whether a client's identity decides what it is shown: a policy on a
    /// published name, or [audiences](super::Edit::audience). When neither,
    /// every client is shown the same names.
    ///
    /// ```
    /// # use toolgraft::Toolset;
    /// assert!(!Toolset::new().is_guarded());
    /// ```
    pub fn is_guarded(&self) -> bool {
        let catalog = self.read();
        !catalog.guards_published.is_empty() || !catalog.audiences.is_empty()
    }

    /// What a published name calls, if it is published to everyone: the bound
    /// name behind it and what clients see of that
    /// ([`resolve_for`](Self::resolve_for) a caller in an audience).
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

    /// What a published name calls for a client `identity` (or an
    /// unidentified one), if it is published to it (see
    /// [`published_for`](Self::published_for)): the bound name behind it and
    /// what clients see of that. Its policies are not asked:
    /// [`visible`](Self::visible) does.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::ext::Trace;
    /// use toolgraft::access::Scopes;
    /// use toolgraft::context::Identity;
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// toolset.edit()
    ///     .audience("staff", Scopes::all(["staff"]))
    ///     .publish_to("staff", "shout", Publish::InPlace)
    ///     .commit()?;
    /// let staff = Identity::new("ann").with_scopes(["staff"]);
    /// assert_eq!(toolset.resolve_for(Some(&staff), "shout").unwrap().name, "shout_trace");
    /// assert_eq!(toolset.resolve_for(None, "shout").unwrap().name, "shout");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve_for(&self, identity: Option<&Identity>, published: &str) -> Option<ToolInfo> {
        let catalog = self.read();
        let (names, _) = catalog.view(identity);
        names.get(published).map(|entry| entry.info.clone())
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

/// Published names with what clients see of each, sorted by name.
fn listed(published: &super::catalog::ByName<Arc<Entry>>) -> Vec<Published> {
    let mut listed: Vec<Published> = published
        .iter()
        .map(|(name, entry)| Published {
            name: name.clone(),
            info: entry.info.clone(),
        })
        .collect();
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    listed
}
