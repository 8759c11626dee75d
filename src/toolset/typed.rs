//! Binding typed combos: [`Toolset::bind`], and [`Toolset::bind_publishing`]
//! with what the tools publish.

use crate::bind::{ComboDraft, Minted, Publish};
use crate::combo::Combos;
use crate::error::{BindError, listed, shorten};

use super::Toolset;
use super::catalog::ToolGroup;

impl Toolset {
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
    /// ([`Limits::max_published_len`](crate::limits::Limits::max_published_len)) binds under an alias. A publication for a
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
        self.bind_grouped(combos, publications, Publish::All)
    }

    /// [`bind`](Toolset::bind), each tool's combo put in place of the tool
    /// ([`Publish::InPlace`]): clients keep the names they knew, and every call
    /// of them goes through the layers. One word for what
    /// [`bind_publishing`](Toolset::bind_publishing) says pair by pair.
    ///
    /// ```
    /// use toolgraft::{Tool, Toolset};
    /// use toolgraft::ext::{Cache, Timeout};
    /// # use std::time::Duration;
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Query { q: String }
    /// let search = Tool::builder().name("search").description("Search.").read_only()
    ///     .body(|i: Query| async move { Ok(i.q) }).build()?;
    /// let fetch = Tool::builder().name("fetch").description("Fetch.").read_only()
    ///     .body(|i: Query| async move { Ok(i.q) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind_in_place((
    ///     search.combo().with(Cache::default()).with(Timeout::new(Duration::from_secs(5))),
    ///     fetch.combo().with(Timeout::new(Duration::from_secs(5))),
    /// ))?;
    /// let published: Vec<_> = toolset.published().into_iter()
    ///     .map(|p| (p.name.to_string(), p.info.name.to_string())).collect();
    /// assert_eq!(published, [
    ///     ("fetch".to_owned(), "fetch_timeout".to_owned()),
    ///     ("search".to_owned(), "search_cache_timeout".to_owned()),
    /// ]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind_in_place<C: Combos>(&self, combos: C) -> Result<C::Branches, BindError> {
        self.bind_grouped(combos, [], Publish::InPlace)
    }

    /// The combos bound in one step, each tool publishing what `publications`
    /// says of it, else `otherwise`.
    fn bind_grouped<'a, C: Combos>(
        &self,
        combos: C,
        publications: impl IntoIterator<Item = (&'a str, Publish)>,
        otherwise: Publish,
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
            group.publish = publish.unwrap_or_else(|| otherwise.clone());
            changes.push((group, None));
        }
        if let Some((tool, _)) = publications.first() {
            return Err(BindError::UnknownTool {
                tool: shorten(tool).into_owned(),
            });
        }
        if !changes.is_empty() {
            self.install(changes, &[], &[], &[])?;
        }
        Ok(branches)
    }
}
