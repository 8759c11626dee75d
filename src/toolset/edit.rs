//! Changing bound tools at run time: [`Edit`], one transaction of attachments,
//! detachments and replacements that commits whole or refuses whole; and reading
//! a tool's combos.

use std::fmt;
use std::sync::Arc;

use crate::access::Policy;
use crate::bind::{self, Minted};
use crate::error::{BindError, listed};
use crate::name::Name;
use crate::runtime::Registry;
use crate::runtime::manifest::{ComboSpec, ElementSpec};
use crate::tool::{Annotations, BaseTool};

use super::catalog::ToolGroup;
use super::install::Retry;
use super::{Publish, Toolset};

impl Toolset {
    /// Starts a change of bound tools: add [`attach`](Edit::attach),
    /// [`detach`](Edit::detach) and [`replace`](Edit::replace) steps (run-time
    /// combos, built from a [`Registry`]), [`rebase`](Edit::rebase) and
    /// [`unbind`](Edit::unbind) steps (a tool's base changed or gone), then
    /// [`commit`](Edit::commit) them as one change. The one way a bound tool changes ([`apply_manifest`] is edits
    /// too, one per tool).
    ///
    /// [`apply_manifest`]: Toolset::apply_manifest
    ///
    /// ```
    /// use toolgraft::runtime::manifest::ElementSpec;
    /// use toolgraft::{Registry, Tool, Toolset};
    /// use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    ///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// let mut registry = Registry::new();
    /// registry.register(Trace)?;
    /// toolset.edit().attach(&registry, "shout", &[ElementSpec::named("trace")]).commit()?;
    /// assert_eq!(toolset.names(), ["shout", "shout_trace"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn edit(&self) -> Edit<'_> {
        Edit {
            toolset: self,
            steps: Vec::new(),
            rules: Vec::new(),
            audiences: Vec::new(),
        }
    }

    /// The combos attached to the bound base tool `tool`, in the order they were
    /// attached, as a manifest writes them (an empty config is no config). A
    /// branch or an unknown name is refused, as for a change.
    ///
    /// ```
    /// use toolgraft::runtime::manifest::ElementSpec;
    /// use toolgraft::runtime::Configured;
    /// use toolgraft::{BindError, Registry, Tool, Toolset};
    /// use toolgraft::ext::{Cache, Trace};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    ///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// let mut registry = Registry::new();
    /// registry.register(Trace)?.register(Configured::new(Cache::default()))?;
    /// let cached = vec![ElementSpec::named("trace"), ElementSpec::configured("cache", serde_json::json!({"capacity": 8}))];
    /// toolset.edit().attach(&registry, "shout", &cached).commit()?;
    /// assert_eq!(toolset.combos("shout")?, [cached]);
    /// assert!(matches!(toolset.combos("shout_trace"), Err(BindError::NotABase { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn combos(&self, tool: &str) -> Result<Vec<ComboSpec>, BindError> {
        let group = self.group(tool)?;
        Ok(group
            .combos
            .into_iter()
            .map(|attached| attached.elements)
            .collect())
    }

    /// What the bound base tool `tool` publishes ([`Publish`]), as an
    /// [`Edit::publish`] or a manifest set it. A branch or an unknown name is
    /// refused, as for a change.
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
    /// assert_eq!(toolset.publication("shout")?, Publish::All);
    /// toolset.edit().publish("shout", Publish::Outermost).commit()?;
    /// assert_eq!(toolset.publication("shout")?, Publish::Outermost);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publication(&self, tool: &str) -> Result<Publish, BindError> {
        Ok(self.group(tool)?.publish)
    }
}

/// A change of bound tools, from [`Toolset::edit`]: steps that
/// [`commit`](Edit::commit) as one, all of them or, on any error, none (the
/// previous bindings stay, callable). Nothing changes before `commit`.
///
/// Steps apply in order, and may touch several base tools. `commit` checks, in
/// this order: each tool named (unknown, a branch, or unbound by an earlier
/// step); membership, step by step (a detached combo must be attached at that
/// point, an attached one must not be, a replacement must not list a combo
/// twice); then each new combo through the
/// binding engine, and each tool's names as a whole. Combos a step does not touch
/// stay as they are, typed ones included; detaching a combo and attaching it again
/// rebuilds it.
///
/// ```
/// use serde_json::json;
/// use toolgraft::runtime::manifest::ElementSpec;
/// use toolgraft::{Registry, Tool, Toolset};
/// use toolgraft::ext::{Pool, Proxy, Trace};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((shout.combo().with(Trace),))?;
/// let mut registry = Registry::new();
/// registry.register(Trace)?.register(Pool::new(1)?)?.register(Proxy::allow(["eu"]))?;
/// let (trace, pool) = (vec![ElementSpec::named("trace")], vec![ElementSpec::named("pool")]);
///
/// // Swap `trace` for `pool` in one step.
/// toolset.edit().detach("shout", &trace).attach(&registry, "shout", &pool).commit()?;
/// assert_eq!(toolset.names(), ["shout", "shout_pool"]);
///
/// // A refused step refuses the whole edit: `pool` stays attached, and callable.
/// let outside = vec![ElementSpec::named("pool"), ElementSpec::named("proxy")];
/// let err = toolset.edit().detach("shout", &pool).attach(&registry, "shout", &outside).commit().unwrap_err();
/// assert_eq!(err.rule(), Some(toolgraft::rulebook::Rule::LocalityInsideRelocation));
/// assert_eq!(toolset.names(), ["shout", "shout_pool"]);
/// assert_eq!(toolset.call("shout_pool", json!({"text": "hi"})).await?, json!("hi"));
///
/// // Replace every combo of the tool (typed ones too).
/// toolset.edit().replace(&registry, "shout", &[trace.clone(), pool.clone()]).commit()?;
/// assert_eq!(toolset.combos("shout")?, [trace, pool]);
/// # Ok(()) }
/// ```
#[must_use = "an edit changes nothing until it is committed with `.commit()`"]
pub struct Edit<'a> {
    toolset: &'a Toolset,
    steps: Vec<Step<'a>>,
    /// Access policies to set (`Some`) or take off (`None`), by name, in order.
    rules: Vec<RuleChange>,
    /// Audiences to define (`Some`) or take away (`None`), in order.
    audiences: Vec<AudienceChange>,
}

/// One change of a toolset's audiences: the policy that decides who is in
/// one, or none to take it away.
pub(crate) struct AudienceChange {
    pub(crate) name: String,
    pub(crate) policy: Option<Arc<dyn Policy>>,
}

/// One change of a toolset's access policies: the policy on a name, or none;
/// for a manifest's entry, the tool whose name it must be.
pub(crate) struct RuleChange {
    pub(crate) name: String,
    pub(crate) policy: Option<Arc<dyn Policy>>,
    pub(crate) of_tool: Option<String>,
}

impl fmt::Debug for Edit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rules = self.rules.iter().map(|rule| match rule.policy {
            Some(_) => format!("authorize {}", rule.name),
            None => format!("open {}", rule.name),
        });
        let audiences = self.audiences.iter().map(|change| match change.policy {
            Some(_) => format!("audience {}", change.name),
            None => format!("remove audience {}", change.name),
        });
        f.debug_list()
            .entries(&self.steps)
            .entries(rules)
            .entries(audiences)
            .finish()
    }
}

/// One step of an [`Edit`].
enum Step<'a> {
    Attach {
        registry: &'a Registry,
        tool: String,
        combo: ComboSpec,
    },
    Detach {
        tool: String,
        combo: ComboSpec,
    },
    Replace {
        registry: &'a Registry,
        tool: String,
        combos: Vec<ComboSpec>,
        /// The hints a manifest sets for the tool (none said: the tool's own);
        /// `None` keeps them.
        annotations: Option<Annotations>,
    },
    Publish {
        tool: String,
        publish: Publish,
    },
    /// A new base for the bound tool of its name, every combo rebuilt on it.
    Rebase {
        registry: &'a Registry,
        base: Minted,
    },
    Unbind {
        tool: String,
    },
    /// What the tool publishes to an audience; `None`: what it publishes to
    /// everyone.
    PublishTo {
        audience: String,
        tool: String,
        publish: Option<Publish>,
    },
}

impl Step<'_> {
    fn tool(&self) -> &str {
        match self {
            Step::Attach { tool, .. }
            | Step::Detach { tool, .. }
            | Step::Replace { tool, .. }
            | Step::Publish { tool, .. }
            | Step::PublishTo { tool, .. }
            | Step::Unbind { tool } => tool,
            Step::Rebase { base, .. } => &base.running.base,
        }
    }
}

impl fmt::Debug for Step<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Attach { tool, combo, .. } => write!(f, "attach {tool} [{}]", listed(combo)),
            Step::Detach { tool, combo } => write!(f, "detach {tool} [{}]", listed(combo)),
            Step::Replace { tool, combos, .. } => {
                write!(f, "replace {tool} with ")?;
                f.debug_list()
                    .entries(combos.iter().map(|combo| format!("[{}]", listed(combo))))
                    .finish()
            }
            Step::Publish { tool, publish } => write!(f, "publish {tool} {publish:?}"),
            Step::Rebase { base, .. } => write!(f, "rebase {}", base.running.base),
            Step::Unbind { tool } => write!(f, "unbind {tool}"),
            Step::PublishTo {
                audience,
                tool,
                publish: Some(publish),
            } => write!(f, "publish {tool} to {audience} {publish:?}"),
            Step::PublishTo { audience, tool, .. } => {
                write!(f, "publish {tool} to {audience} as to everyone")
            }
        }
    }
}

/// A combo of a tool during an edit: attached before it, or to be built.
enum Slot<'a> {
    Kept(bind::Attached),
    New(ComboSpec, &'a Registry),
}

impl Slot<'_> {
    fn key(&self) -> &[ElementSpec] {
        match self {
            Slot::Kept(attached) => &attached.elements,
            Slot::New(key, _) => key,
        }
    }
}

impl<'a> Edit<'a> {
    /// Attaches `combo` (extension names from `registry`, innermost first) to
    /// the bound base tool `tool`. Refused at commit if the combo is
    /// attached already, or breaks a rule.
    ///
    /// ```
    /// # use toolgraft::runtime::manifest::ElementSpec;
    /// # use toolgraft::{BindError, Registry, Tool, Toolset};
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// # let toolset = Toolset::new();
    /// # toolset.bind((shout.combo(),))?;
    /// let mut registry = Registry::new();
    /// registry.register(Trace)?;
    /// let trace = [ElementSpec::named("trace")];
    /// toolset.edit().attach(&registry, "shout", &trace).commit()?;
    /// let again = toolset.edit().attach(&registry, "shout", &trace).commit();
    /// assert!(matches!(again, Err(BindError::AlreadyAttached { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn attach(mut self, registry: &'a Registry, tool: &str, combo: &[ElementSpec]) -> Self {
        self.steps.push(Step::Attach {
            registry,
            tool: tool.to_owned(),
            combo: combo.to_vec(),
        });
        self
    }

    /// Detaches `combo` from the bound base tool `tool`: its branches go, unless
    /// another combo mints them too. Refused at commit if it is not attached.
    ///
    /// ```
    /// # use toolgraft::runtime::manifest::ElementSpec;
    /// # use toolgraft::{BindError, Registry, Tool, Toolset};
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// let trace = [ElementSpec::named("trace")];
    /// toolset.edit().detach("shout", &trace).commit()?;
    /// assert_eq!(toolset.names(), ["shout"]);
    /// let err = toolset.edit().detach("shout", &trace).commit().unwrap_err();
    /// assert!(matches!(err, BindError::NotAttached { .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn detach(mut self, tool: &str, combo: &[ElementSpec]) -> Self {
        self.steps.push(Step::Detach {
            tool: tool.to_owned(),
            combo: combo.to_vec(),
        });
        self
    }

    /// Replaces every combo of the bound base tool `tool` (typed ones included)
    /// by `combos`; none detaches them all.
    ///
    /// ```
    /// # use toolgraft::runtime::manifest::ElementSpec;
    /// # use toolgraft::{Registry, Tool, Toolset};
    /// # use toolgraft::ext::{Pool, Trace};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// let mut registry = Registry::new();
    /// registry.register(Pool::new(1)?)?;
    /// let two_pools = vec![ElementSpec::named("pool"), ElementSpec::named("pool")];
    /// assert!(toolset.edit().replace(&registry, "shout", &[two_pools]).commit().is_err());
    /// assert_eq!(toolset.names(), ["shout", "shout_trace"]);
    /// toolset.edit().replace(&registry, "shout", &[]).commit()?;
    /// assert_eq!(toolset.names(), ["shout"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace(mut self, registry: &'a Registry, tool: &str, combos: &[ComboSpec]) -> Self {
        self.steps.push(Step::Replace {
            registry,
            tool: tool.to_owned(),
            combos: combos.to_vec(),
            annotations: None,
        });
        self
    }

    /// [`replace`](Self::replace), with the tool's hints as a manifest sets them:
    /// its own, with each one `said` replacing its own. Every combo is rebuilt, so
    /// every branch presents them and is checked against them.
    pub(crate) fn replace_annotated(
        mut self,
        registry: &'a Registry,
        tool: &str,
        combos: &[ComboSpec],
        said: Annotations,
    ) -> Self {
        self.steps.push(Step::Replace {
            registry,
            tool: tool.to_owned(),
            combos: combos.to_vec(),
            annotations: Some(said),
        });
        self
    }

    /// Sets which of the bound base tool `tool`'s names its clients see
    /// ([`Publish`]); checked at commit against the tool's names after every
    /// step, so one edit can change a tool's combos and what it publishes
    /// together.
    ///
    /// ```
    /// # use toolgraft::runtime::manifest::ElementSpec;
    /// # use toolgraft::{BindError, Registry, Tool, Toolset};
    /// # use toolgraft::ext::Trace;
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// let mut registry = Registry::new();
    /// registry.register(Trace)?;
    /// let alias = Publish::only([("shout", "shout_trace")])?;
    /// // `shout_trace` is not bound yet: refused alone, fine with the combo that mints it.
    /// let alone = toolset.edit().publish("shout", alias.clone()).commit();
    /// assert!(matches!(alone, Err(BindError::PublishedUnbound { .. })));
    /// toolset.edit()
    ///     .attach(&registry, "shout", &[ElementSpec::named("trace")])
    ///     .publish("shout", alias)
    ///     .commit()?;
    /// assert_eq!(toolset.resolve("shout").unwrap().name, "shout_trace");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publish(mut self, tool: &str, publish: Publish) -> Self {
        self.steps.push(Step::Publish {
            tool: tool.to_owned(),
            publish,
        });
        self
    }

    /// Puts `base` in place of the base of the bound tool of its name: its body,
    /// schemas, description and presentation (hints included) are the new
    /// base's, and every combo of the tool is rebuilt on it from its spec
    /// ([`Toolset::combos`]) with `registry`, so every rule is checked again
    /// against the new base. A typed combo is rebuilt by its extensions'
    /// names too, from what `registry` registers under them. The hints an
    /// operator set for the tool (a manifest's `"annotations"`) stay set over
    /// the new base's own; what it publishes, to everyone and to each audience,
    /// and the policies on its names stay too. Refused at commit as any step,
    /// the tool keeping its old base: a combo the new base breaks a rule of,
    /// an unknown tool or a branch. For an MCP server's tool whose schema or
    /// hints change upstream.
    ///
    /// ```
    /// use toolgraft::runtime::manifest::ElementSpec;
    /// use toolgraft::runtime::Configured;
    /// use toolgraft::rulebook::Rule;
    /// use toolgraft::{Registry, Tool, Toolset};
    /// use toolgraft::ext::Cache;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// let reads = Tool::builder().name("shout").description("Return the text.").read_only()
    ///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((reads.combo(),))?;
    /// let mut registry = Registry::new();
    /// registry.register(Configured::new(Cache::default()))?;
    /// toolset.edit().attach(&registry, "shout", &[ElementSpec::named("cache")]).commit()?;
    ///
    /// // The tool no longer says it is read-only: `cache` may not skip its calls.
    /// let writes = Tool::builder().name("shout").description("Return and log the text.")
    ///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let err = toolset.edit().rebase(&registry, &writes).commit().unwrap_err();
    /// assert_eq!(err.rule(), Some(Rule::SideEffects));
    /// assert_eq!(toolset.info("shout").unwrap().description, "Return the text.");
    ///
    /// let says_more = Tool::builder().name("shout").description("Return the text as is.").read_only()
    ///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// toolset.edit().rebase(&registry, &says_more).commit()?;
    /// assert_eq!(toolset.info("shout").unwrap().description, "Return the text as is.");
    /// assert_eq!(toolset.names(), ["shout", "shout_cache"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rebase(mut self, registry: &'a Registry, base: &impl BaseTool) -> Self {
        self.steps.push(Step::Rebase {
            registry,
            base: Minted::base(base),
        });
        self
    }

    /// Unbinds the bound base tool `tool`: every name it binds (base and
    /// branches) goes, with what it publishes, to everyone and to each
    /// audience, and the hints set for it; a later bind of a tool of that
    /// name starts with none of them. The policies on its names stay, each
    /// deciding its name again if a tool of that name binds it again (a tool
    /// that goes and comes back, as an upstream server's does when the server
    /// restarts, comes back guarded, not open); [`open`](Self::open) takes one
    /// off. Steps apply in order: a step on the tool before the unbind is
    /// checked and then has no effect, and one after it is refused
    /// ([`BindError::UnboundInEdit`]). An unknown tool or a branch is
    /// refused, as for any step. For an MCP server's tool that is gone upstream.
    ///
    /// ```
    /// use toolgraft::{BindError, Tool, Toolset};
    /// use toolgraft::ext::Trace;
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let tool = |name: &str| Tool::builder().name(name).description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build();
    /// let toolset = Toolset::new();
    /// toolset.bind((tool("shout")?.combo().with(Trace), tool("whisper")?.combo()))?;
    /// toolset.edit().unbind("shout").commit()?;
    /// assert_eq!(toolset.names(), ["whisper"]);
    ///
    /// let after = toolset.edit().unbind("whisper").publish("whisper", Publish::All).commit();
    /// assert!(matches!(after, Err(BindError::UnboundInEdit { .. })));
    /// let again = toolset.edit().unbind("shout").commit();
    /// assert!(matches!(again, Err(BindError::UnknownTool { .. })));
    ///
    /// // Bound again, it starts fresh.
    /// toolset.bind((tool("shout")?.combo(),))?;
    /// assert_eq!(toolset.names(), ["shout", "whisper"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unbind(mut self, tool: &str) -> Self {
        self.steps.push(Step::Unbind {
            tool: tool.to_owned(),
        });
        self
    }

    /// Puts `policy` on `name` (replacing one there): who may call and see it
    /// (see [`access`](crate::access)). `name` is a bound name (a base tool's
    /// policy decides every name of the tool; a branch's, that branch) or a
    /// published one; a name that is neither once the edit's other steps apply is
    /// refused at commit ([`BindError::UnknownTool`]), so a typo never leaves the
    /// name it meant open.
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolgraft::{Tool, ToolError, Toolset, BindError};
    /// use toolgraft::access::Scopes;
    /// use toolgraft::context::{self, Identity};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// toolset.edit().authorize("shout", Scopes::all(["shout"])).commit()?;
    /// let anonymous = toolset.call("shout", json!({"text": "hi"})).await;
    /// assert!(matches!(anonymous, Err(ToolError::UnknownTool { .. })));
    /// let loud = Identity::new("ann").with_scopes(["shout"]);
    /// assert_eq!(context::with(loud, toolset.call("shout", json!({"text": "hi"}))).await?, json!("hi"));
    ///
    /// let typo = toolset.edit().authorize("shuot", Scopes::all(["shout"])).commit();
    /// assert!(matches!(typo, Err(BindError::UnknownTool { .. })));
    /// # Ok(()) }
    /// ```
    pub fn authorize(mut self, name: &str, policy: impl Policy) -> Self {
        self.rules.push(RuleChange {
            name: name.to_owned(),
            policy: Some(Arc::new(policy)),
            of_tool: None,
        });
        self
    }

    /// Takes the policy off `name`, if it has one: anyone the server lets in
    /// may call and see it again.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// use toolgraft::access::Scopes;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo(),))?;
    /// toolset.edit().authorize("shout", Scopes::all(["shout"])).commit()?;
    /// assert!(!toolset.visible(None, "shout"));
    /// toolset.edit().open("shout").commit()?;
    /// assert!(toolset.visible(None, "shout"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(mut self, name: &str) -> Self {
        self.rules.push(RuleChange {
            name: name.to_owned(),
            policy: None,
            of_tool: None,
        });
        self
    }

    /// Defines the audience `name` (replacing its policy, in its place, if it
    /// is defined): the callers `policy` allows, shown what each tool
    /// [publishes to it](Self::publish_to) in place of what it publishes to
    /// everyone. A caller is in the first audience, in the order they were
    /// defined, whose policy allows it, and in none when none does. An audience
    /// decides what is shown, not who may call: put policies on the names for
    /// that ([`authorize`](Self::authorize)). A policy that reads a call's
    /// arguments is refused at commit ([`BindError::AudienceReadsArguments`]).
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::ext::{Cache, Timeout};
    /// use toolgraft::access::Claim;
    /// use toolgraft::context::{self, Identity};
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Query { q: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let search = Tool::builder().name("search").description("Search.").read_only()
    /// #     .body(|i: Query| async move { Ok(i.q) }).build()?;
    /// # use std::time::Duration;
    /// let toolset = Toolset::new();
    /// toolset.bind((search.combo().with(Cache::default()).with(Timeout::new(Duration::from_secs(1))),))?;
    /// // Everyone gets `search` with a timeout; the pro plan the cache alone.
    /// toolset.edit()
    ///     .publish("search", Publish::InPlace)
    ///     .audience("pro", Claim::is("plan", "pro"))
    ///     .publish_to("pro", "search", Publish::only([("search", "search_cache")])?)
    ///     .commit()?;
    /// let pro = Identity::new("ann").with_claim("plan", "pro");
    /// assert_eq!(toolset.resolve_for(Some(&pro), "search").unwrap().name, "search_cache");
    /// assert_eq!(toolset.resolve_for(None, "search").unwrap().name, "search_cache_timeout");
    /// let answer = context::with(pro, toolset.call_published("search", json!({"q": "tea"}))).await?;
    /// assert_eq!(answer, json!("tea"));
    /// # Ok(()) }
    /// ```
    pub fn audience(mut self, name: &str, policy: impl Policy) -> Self {
        self.audiences.push(AudienceChange {
            name: name.to_owned(),
            policy: Some(Arc::new(policy)),
        });
        self
    }

    /// Takes the audience `name` away, with what every tool publishes to it:
    /// its callers are shown what everyone is.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// use toolgraft::access::Claim;
    /// use toolgraft::context::Identity;
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Query { q: String }
    /// # let search = Tool::builder().name("search").description("Search.").read_only()
    /// #     .body(|i: Query| async move { Ok(i.q) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((search.combo(),))?;
    /// toolset.edit()
    ///     .audience("pro", Claim::is("plan", "pro"))
    ///     .publish_to("pro", "search", Publish::only([("find", "search")])?)
    ///     .commit()?;
    /// let pro = Identity::new("ann").with_claim("plan", "pro");
    /// assert!(toolset.visible(Some(&pro), "find") && !toolset.visible(Some(&pro), "search"));
    /// toolset.edit().remove_audience("pro").commit()?;
    /// assert!(toolset.visible(Some(&pro), "search") && !toolset.visible(Some(&pro), "find"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove_audience(mut self, name: &str) -> Self {
        self.audiences.push(AudienceChange {
            name: name.to_owned(),
            policy: None,
        });
        self
    }

    /// Sets what `tool` publishes to the callers of `audience` in place of
    /// what it publishes to everyone ([`publish`](Self::publish)): checked
    /// by the same rules, within what that audience is shown
    /// ([published-names](crate::rulebook#published-names)). The audience
    /// must be defined once the edit lands ([`BindError::UnknownAudience`]).
    /// See [`audience`](Self::audience).
    pub fn publish_to(mut self, audience: &str, tool: &str, publish: Publish) -> Self {
        self.steps.push(Step::PublishTo {
            audience: audience.to_owned(),
            tool: tool.to_owned(),
            publish: Some(publish),
        });
        self
    }

    /// Undoes [`publish_to`](Self::publish_to): `tool` publishes to the
    /// callers of `audience` what it publishes to everyone.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// use toolgraft::access::Claim;
    /// use toolgraft::context::Identity;
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Query { q: String }
    /// # let search = Tool::builder().name("search").description("Search.").read_only()
    /// #     .body(|i: Query| async move { Ok(i.q) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((search.combo(),))?;
    /// toolset.edit()
    ///     .audience("pro", Claim::is("plan", "pro"))
    ///     .publish_to("pro", "search", Publish::Only(Vec::new()))
    ///     .commit()?;
    /// let pro = Identity::new("ann").with_claim("plan", "pro");
    /// assert!(!toolset.visible(Some(&pro), "search"));
    /// toolset.edit().unpublish_to("pro", "search").commit()?;
    /// assert!(toolset.visible(Some(&pro), "search"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unpublish_to(mut self, audience: &str, tool: &str) -> Self {
        self.steps.push(Step::PublishTo {
            audience: audience.to_owned(),
            tool: tool.to_owned(),
            publish: None,
        });
        self
    }

    /// [`authorize`](Self::authorize) for a manifest's entry of `tool`: refused
    /// at commit unless `name` is one of the tool's.
    pub(crate) fn authorize_for(mut self, tool: &str, name: &str, policy: impl Policy) -> Self {
        self.rules.push(RuleChange {
            name: name.to_owned(),
            policy: Some(Arc::new(policy)),
            of_tool: Some(tool.to_owned()),
        });
        self
    }

    /// Applies every step as one change: all of it, or on any error none of it
    /// (see [`Edit`] for the order of the checks). An edit without steps changes
    /// nothing.
    ///
    /// Atomic per toolset: a call sees each tool's names either all before or all
    /// after. The new combos are built outside the toolset's lock; if another
    /// change of a tool the edit touches lands meanwhile, the edit is prepared
    /// again over it (its factories run again).
    ///
    /// ```
    /// # use toolgraft::runtime::manifest::ElementSpec;
    /// # use toolgraft::{BindError, Registry, Tool, Toolset};
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let tool = |name: &str| Tool::builder().name(name).description("Return the text.").read_only()
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build();
    /// let toolset = Toolset::new();
    /// toolset.bind((tool("shout")?.combo(), tool("whisper")?.combo()))?;
    /// let mut registry = Registry::new();
    /// registry.register(Trace)?;
    /// let trace = [ElementSpec::named("trace")];
    /// // The second step fails, so the first does not happen either.
    /// let err = toolset.edit().attach(&registry, "shout", &trace).attach(&registry, "ghost", &trace).commit();
    /// assert!(matches!(err, Err(BindError::UnknownTool { .. })));
    /// assert_eq!(toolset.names(), ["shout", "whisper"]);
    /// toolset.edit().attach(&registry, "shout", &trace).attach(&registry, "whisper", &trace).commit()?;
    /// assert_eq!(toolset.names(), ["shout", "shout_trace", "whisper", "whisper_trace"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn commit(self) -> Result<(), BindError> {
        if self.steps.is_empty() && self.rules.is_empty() && self.audiences.is_empty() {
            return Ok(());
        }
        loop {
            let (changes, unbound) = self.prepare()?;
            if self
                .toolset
                .install(changes, &unbound, &self.rules, &self.audiences)?
                == Retry::No
            {
                return Ok(());
            }
        }
    }

    /// Each touched tool's group after the steps, with the generation it started
    /// from; and each tool unbound, with its generation.
    #[allow(clippy::type_complexity)]
    fn prepare(&self) -> Result<(Vec<(ToolGroup, Option<u64>)>, Vec<(Name, u64)>), BindError> {
        let mut tools: Vec<(ToolGroup, Vec<Slot<'a>>)> = Vec::new();
        let mut unbound: Vec<Name> = Vec::new();
        for step in &self.steps {
            let tool = step.tool();
            if let Some(tool) = unbound.iter().find(|unbound| *unbound == tool) {
                return Err(BindError::UnboundInEdit { tool: tool.clone() });
            }
            let at = match tools
                .iter()
                .position(|(group, _)| group.base.running.base == tool)
            {
                Some(at) => at,
                None => {
                    let group = self.toolset.group(tool)?;
                    let slots = group.combos.iter().cloned().map(Slot::Kept).collect();
                    tools.push((group, slots));
                    tools.len() - 1
                }
            };
            let (group, slots) = &mut tools[at];
            let base = group.base.running.base.clone();
            let base = &base;
            let attached =
                |slots: &[Slot], key: &[ElementSpec]| slots.iter().any(|slot| slot.key() == key);
            match step {
                Step::Unbind { .. } => {
                    slots.clear();
                    unbound.push(base.clone());
                }
                Step::Rebase {
                    registry,
                    base: new,
                } => {
                    group.rebase(new.clone());
                    // Every combo built on the old base is built again on the new.
                    for slot in slots.iter_mut() {
                        if let Slot::Kept(attached) = slot {
                            *slot = Slot::New(std::mem::take(&mut attached.elements), registry);
                        }
                    }
                }
                Step::Attach {
                    registry, combo, ..
                } => {
                    let key = bind::combo_key(combo);
                    if attached(slots, &key) {
                        return Err(BindError::AlreadyAttached {
                            tool: base.clone(),
                            combo: listed(&key),
                        });
                    }
                    slots.push(Slot::New(key, registry));
                }
                Step::Detach { combo, .. } => {
                    let key = bind::combo_key(combo);
                    let Some(at) = slots.iter().position(|slot| slot.key() == key) else {
                        let attached: Vec<String> = slots
                            .iter()
                            .map(|slot| format!("[{}]", listed(slot.key())))
                            .collect();
                        return Err(BindError::NotAttached {
                            tool: base.clone(),
                            combo: listed(&key),
                            attached: if attached.is_empty() {
                                "none".to_owned()
                            } else {
                                attached.join(", ")
                            },
                        });
                    };
                    slots.remove(at);
                }
                Step::Publish { publish, .. } => group.publish = publish.clone(),
                Step::PublishTo {
                    audience, publish, ..
                } => {
                    let audience = Name::new(audience)?;
                    match publish {
                        Some(publish) => group.publish_to.insert(audience, publish.clone()),
                        None => group.publish_to.remove(&audience),
                    };
                }
                Step::Replace {
                    registry,
                    combos,
                    annotations,
                    ..
                } => {
                    if let Some(said) = annotations {
                        group.annotate(said);
                    }
                    slots.clear();
                    for combo in combos {
                        let key = bind::combo_key(combo);
                        if attached(slots, &key) {
                            return Err(BindError::AlreadyAttached {
                                tool: base.clone(),
                                combo: listed(&key),
                            });
                        }
                        slots.push(Slot::New(key, registry));
                    }
                }
            }
        }
        let limits = self.toolset.limits();
        let mut changes = Vec::with_capacity(tools.len());
        let mut gone = Vec::with_capacity(unbound.len());
        for (mut group, slots) in tools {
            let generation = group.generation;
            if unbound.contains(&group.base.running.base) {
                gone.push((group.base.running.base.clone(), generation));
                continue;
            }
            let mut combos = Vec::with_capacity(slots.len());
            for slot in slots {
                combos.push(match slot {
                    Slot::Kept(attached) => attached,
                    Slot::New(combo, registry) => registry.combo(&group.base, &combo, &limits)?,
                });
            }
            group.combos = combos;
            changes.push((group, Some(generation)));
        }
        Ok((changes, gone))
    }
}
