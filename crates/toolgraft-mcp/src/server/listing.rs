//! The `tools/list` answer: one listing per output shape for the toolset at one
//! version, shared by every session's server.

use std::collections::HashMap;
use std::hash::Hasher;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rmcp::model::Tool;
use rustc_hash::FxBuildHasher;
use tokio::sync::watch;
use toolgraft::context::Identity;
use toolgraft::{Name, Toolset};

use super::ToolsetServer;
use crate::outcome::UnknownArguments;
use crate::tool::{OutputShape, published_tool};

/// `tool`'s input schema, saying that it takes no property it does not name:
/// a schema that names its properties at its top and says nothing of others.
/// One that composes others (`oneOf`, `allOf`, `$ref`: closing its top would
/// refuse the properties its parts name) or takes more by a schema of its own
/// is left as it says, and so is what it takes.
fn close(tool: &mut Tool) {
    let schema = &tool.input_schema;
    let composed = ["oneOf", "anyOf", "allOf", "$ref", "unevaluatedProperties"]
        .iter()
        .any(|key| schema.contains_key(*key));
    if composed || !schema.contains_key("properties") || schema.contains_key("additionalProperties")
    {
        return;
    }
    Arc::make_mut(&mut tool.input_schema).insert(
        "additionalProperties".to_owned(),
        serde_json::Value::Bool(false),
    );
}

/// The listings of one toolset version (see [`ToolsetServer::list`]).
#[derive(Default)]
pub(super) struct Listings {
    version: u64,
    object_only: Shaped,
    any_json: Shaped,
}

/// The listings of one output shape.
#[derive(Default)]
struct Shaped {
    /// Every published name: what every caller of a toolset without policies
    /// is shown.
    all: Option<View>,
    /// Every name published to an [audience](toolgraft::toolset::Edit::audience),
    /// by audience.
    audiences: HashMap<Name, View, FxBuildHasher>,
    /// The same without the names some callers may not call, by audience
    /// and those names (sorted): one per group of callers the policies tell
    /// apart, not per caller.
    without: HashMap<(Option<Name>, Vec<Name>), View, FxBuildHasher>,
}

/// One listing, and its fingerprint once a session's notifier asked for it.
#[derive(Clone)]
pub(super) struct View {
    pub(super) tools: Arc<Vec<Tool>>,
    fingerprint: Arc<OnceLock<u64>>,
}

impl View {
    fn new(tools: Vec<Tool>) -> Self {
        Self {
            tools: Arc::new(tools),
            fingerprint: Arc::default(),
        }
    }

    /// What the listing says, as a number that changes when it does (a name,
    /// a description, a schema): what a session was shown, to tell whether a
    /// change of the toolset changed it.
    pub(super) fn fingerprint(&self) -> u64 {
        *self.fingerprint.get_or_init(|| {
            let mut hasher = HashWriter(std::hash::DefaultHasher::new());
            // Writing to a hasher does not fail, and every tool serializes.
            let _ = serde_json::to_writer(&mut hasher, &*self.tools);
            hasher.0.finish()
        })
    }
}

/// A hasher as the writer a listing is serialized into, so that it is
/// fingerprinted without its JSON text.
struct HashWriter<H>(H);

impl<H: Hasher> std::io::Write for HashWriter<H> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How many listings without some names a shape keeps per toolset version:
/// past it, they are dropped and built again as callers list (policies that
/// tell apart more groups than this, by a claim of many values, cost a
/// listing built per list at worst).
const MAX_VIEWS: usize = 256;

/// Where a server's listings come from: what a notifier task keeps of its
/// server to tell what its session is shown now.
pub(super) struct Lister<'a> {
    pub(super) toolset: &'a Toolset,
    pub(super) listings: &'a Mutex<Listings>,
    pub(super) changes: &'a watch::Receiver<u64>,
    pub(super) unknown_arguments: UnknownArguments,
}

impl Lister<'_> {
    /// The listing for `shape` of the toolset as it is, built by the first list
    /// after a change and shared by every session until the next.
    pub(super) fn all(&self, shape: OutputShape) -> View {
        self.published_to(None, None, shape)
    }

    /// The listing of every name published to `audience` (everyone's when
    /// `None`), as to its caller `identity`, for `shape`: built by the first
    /// list after a change and shared until the next.
    fn published_to(
        &self,
        audience: Option<&Name>,
        identity: Option<&Identity>,
        shape: OutputShape,
    ) -> View {
        // Read before the toolset: a listing built after a change is labelled with
        // the version before it at worst, and built again by the next list.
        let version = *self.changes.borrow();
        {
            let mut listings = self.lock(version);
            let slot = listings.shaped_mut(shape);
            let found = match audience {
                None => slot.all.as_ref(),
                Some(audience) => slot.audiences.get(audience),
            };
            if let Some(view) = found {
                return view.clone();
            }
        }
        // Built outside the lock, so that sessions listing at once do not wait
        // for each other's building.
        let published = match audience {
            None => self.toolset.published(),
            Some(_) => self.toolset.published_for(identity),
        };
        let view = View::new(
            published
                .iter()
                .map(|published| {
                    let mut tool = published_tool(published, shape);
                    if self.unknown_arguments == UnknownArguments::Refuse {
                        close(&mut tool);
                    }
                    tool
                })
                .collect(),
        );
        let mut listings = self.lock(version);
        let slot = listings.shaped_mut(shape);
        match audience {
            None => slot.all.get_or_insert(view).clone(),
            Some(audience) => {
                if slot.audiences.len() >= MAX_VIEWS {
                    slot.audiences.clear();
                }
                slot.audiences
                    .entry(audience.clone())
                    .or_insert(view)
                    .clone()
            }
        }
    }

    /// What `identity` is shown for `shape`: the listing its audience (or
    /// everyone) shares without the names it may not call. A toolset without
    /// policies or audiences costs nothing more than the shared listing; one
    /// with them, the check of its guarded names and one lookup, its listing
    /// built once per group of callers the policies tell apart.
    pub(super) fn shown(&self, identity: Option<&Identity>, shape: OutputShape) -> View {
        if !self.toolset.is_guarded() {
            return self.all(shape);
        }
        let version = *self.changes.borrow();
        let audience = self.toolset.audience_of(identity);
        let hidden = self.toolset.hidden_from(identity);
        if hidden.is_empty() {
            return self.published_to(audience.as_ref(), identity, shape);
        }
        let key = (audience, hidden);
        {
            let mut listings = self.lock(version);
            if let Some(view) = listings.shaped_mut(shape).without.get(&key) {
                return view.clone();
            }
        }
        // Built outside the lock from the shared listing: its schemas are
        // shared, not copied.
        let (audience, hidden) = &key;
        let all = self.published_to(audience.as_ref(), identity, shape);
        let view = View::new(
            all.tools
                .iter()
                .filter(|tool| {
                    hidden
                        .binary_search_by(|name| name.as_str().cmp(&tool.name))
                        .is_err()
                })
                .cloned()
                .collect(),
        );
        let mut listings = self.lock(version);
        let without = &mut listings.shaped_mut(shape).without;
        if without.len() >= MAX_VIEWS {
            without.clear();
        }
        without.entry(key).or_insert(view).clone()
    }

    /// The listings, those of an older version dropped.
    fn lock(&self, version: u64) -> std::sync::MutexGuard<'_, Listings> {
        let mut listings = self.listings.lock().unwrap_or_else(PoisonError::into_inner);
        if listings.version != version {
            *listings = Listings {
                version,
                ..Listings::default()
            };
        }
        listings
    }
}

/// What a session was last shown, or told of: who it is, on which shape,
/// and the listing.
pub(super) struct Shown {
    pub(super) identity: Option<Identity>,
    pub(super) shape: OutputShape,
    pub(super) view: View,
}

impl Shown {
    /// Whether the toolset as it is shows this session something else than it
    /// was shown (names, or what a name says of itself): then it is, from now,
    /// what the session is told of.
    pub(super) fn changed(&mut self, lister: &Lister<'_>) -> bool {
        let now = lister.shown(self.identity.as_ref(), self.shape);
        if Arc::ptr_eq(&now.tools, &self.view.tools) || now.fingerprint() == self.view.fingerprint()
        {
            return false;
        }
        self.view = now;
        true
    }
}

impl Listings {
    fn shaped_mut(&mut self, shape: OutputShape) -> &mut Shaped {
        match shape {
            OutputShape::ObjectOnly => &mut self.object_only,
            OutputShape::AnyJson => &mut self.any_json,
        }
    }
}

impl<H> ToolsetServer<H> {
    /// Every published name as an MCP tool for a client on `shape`, sorted by
    /// name: the toolset's part of what `tools/list` returns to a caller the
    /// toolset's [policies](toolgraft::access) hide nothing from (every caller,
    /// when it has none). See [`list_for`](Self::list_for).
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// use toolgraft_mcp::{OutputShape, ToolsetServer};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// let tools = ToolsetServer::new(toolset).list(OutputShape::AnyJson);
    /// assert_eq!(tools[1].name, "shout_trace");
    /// assert_eq!(tools[1].output_schema.as_ref().unwrap()["type"], "string");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn list(&self, shape: OutputShape) -> Vec<Tool> {
        // Copied outside the listings' lock, so sessions listing at once do not
        // wait for each other; the copy shares every schema (`Arc`): names and
        // descriptions only.
        Vec::clone(&self.listing(shape))
    }

    /// What `tools/list` shows a caller `identity` (`None`: one no server
    /// identified) of the toolset: exactly the published names it may call,
    /// those a [policy](toolgraft::access) refuses it with a step-up
    /// included. Built once per group of callers the policies tell apart and
    /// shared until the toolset changes.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// use toolgraft::access::Scopes;
    /// use toolgraft::context::Identity;
    /// use toolgraft_mcp::{OutputShape, ToolsetServer};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let tool = |name: &str| Tool::builder().name(name).description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build();
    /// let toolset = Toolset::new();
    /// toolset.bind((tool("shout")?.combo(), tool("reset")?.combo()))?;
    /// toolset.edit().authorize("reset", Scopes::all(["admin"])).commit()?;
    /// let server = ToolsetServer::new(toolset);
    /// let names = |identity: Option<&Identity>| -> Vec<String> {
    ///     server.list_for(identity, OutputShape::AnyJson).into_iter().map(|t| t.name.into()).collect()
    /// };
    /// assert_eq!(names(None), ["shout"]);
    /// assert_eq!(names(Some(&Identity::new("root").with_scopes(["admin"]))), ["reset", "shout"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn list_for(&self, identity: Option<&Identity>, shape: OutputShape) -> Vec<Tool> {
        Vec::clone(&self.lister().shown(identity, shape).tools)
    }

    /// Where this server's listings come from.
    pub(super) fn lister(&self) -> Lister<'_> {
        Lister {
            toolset: &self.toolset,
            listings: &self.listings,
            changes: &self.changes,
            unknown_arguments: self.unknown_arguments,
        }
    }

    /// The listing for `shape` of the toolset as it is, built by the first list
    /// after a change and shared by every session until the next.
    pub(super) fn listing(&self, shape: OutputShape) -> Arc<Vec<Tool>> {
        self.lister().all(shape).tools
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::ServerHandler as _;
    use toolgraft::Tool as BaseTool;
    use toolgraft::Toolset;
    use toolgraft::combo::StartCombo;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Shout {
        text: String,
    }

    fn shout(name: &str) -> impl toolgraft::tool::BaseTool {
        BaseTool::builder()
            .name(name)
            .description("Return the text.")
            .body(|input: Shout| async move { Ok(input.text) })
            .build()
            .unwrap()
    }

    // Sessions are the HTTP transport's.
    #[cfg(feature = "http")]
    #[test]
    fn every_session_shares_one_listing_until_the_toolset_changes() {
        let toolset = Toolset::new();
        toolset.bind((shout("shout").combo(),)).unwrap();
        let server = ToolsetServer::new(toolset.clone());
        let session = server.fresh();
        let first = server.list(OutputShape::AnyJson);
        let again = session.list(OutputShape::AnyJson);
        // One copy of each schema, whoever lists: no schema is copied per list.
        assert!(Arc::ptr_eq(&first[0].input_schema, &again[0].input_schema));
        let older = session.list(OutputShape::ObjectOnly);
        assert_eq!(older.len(), 1);

        toolset.bind((shout("echo").combo(),)).unwrap();
        let after = session.list(OutputShape::AnyJson);
        let names: Vec<_> = after.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(names, ["echo", "shout"]);
        assert_eq!(server.list(OutputShape::ObjectOnly).len(), 2);
    }

    /// rmcp looks a tool up (to check a request's headers against its schema)
    /// as the HTTP layer's caller: a name hidden from it is not found, nor is
    /// the handler's tool of that name.
    #[test]
    fn a_tool_hidden_from_the_caller_is_not_found() {
        use toolgraft::access::Claim;
        use toolgraft::context::Identity;
        let toolset = Toolset::new();
        toolset
            .bind((shout("shout").combo(), shout("secret").combo()))
            .unwrap();
        toolset
            .edit()
            .authorize("secret", Claim::is("team", "alpha"))
            .commit()
            .unwrap();
        let server = ToolsetServer::new(toolset);
        let as_caller = |team: &str| {
            let who = Identity::new("ann").with_claim("team", team);
            crate::call::CALLER.sync_scope(Some(who), || server.get_tool("secret"))
        };
        assert!(as_caller("alpha").is_some());
        assert!(as_caller("beta").is_none());
        assert!(
            server.get_tool("secret").is_none(),
            "no caller: no identity"
        );
        assert!(server.get_tool("shout").is_some());
        let alpha = Identity::new("a").with_claim("team", "alpha");
        let beta = Identity::new("b").with_claim("team", "beta");
        let lister = server.lister();
        let (first, again) = (
            lister.shown(Some(&beta), OutputShape::AnyJson),
            lister.shown(Some(&Identity::new("c")), OutputShape::AnyJson),
        );
        assert!(
            Arc::ptr_eq(&first.tools, &again.tools),
            "one listing per group"
        );
        assert_eq!(first.tools.len(), 1);
        let all = lister.shown(Some(&alpha), OutputShape::AnyJson);
        assert!(Arc::ptr_eq(
            &all.tools,
            &server.listing(OutputShape::AnyJson)
        ));
        assert_ne!(all.fingerprint(), first.fingerprint());
    }

    #[test]
    fn a_tool_is_looked_up_in_the_shared_listing() {
        let toolset = Toolset::new();
        for name in ["b", "a", "c_d", "c"] {
            toolset.bind((shout(name).combo(),)).unwrap();
        }
        let server = ToolsetServer::new(toolset.clone());
        let listed = server.list(OutputShape::AnyJson);
        for tool in &listed {
            let found = server.get_tool(&tool.name).expect("a listed name is found");
            assert_eq!(found.name, tool.name);
            assert!(Arc::ptr_eq(&found.input_schema, &tool.input_schema));
        }
        for missing in ["", "c_", "d", "A"] {
            assert!(server.get_tool(missing).is_none(), "{missing}");
        }
        toolset.bind((shout("e").combo(),)).unwrap();
        assert!(
            server.get_tool("e").is_some(),
            "a name bound later is found"
        );
    }
}
