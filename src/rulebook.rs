//! The rulebook: every rule a combo obeys, one named section each.
//!
//! Typed combos are checked by the compiler, where a rule can be a trait bound;
//! combos that only exist at run time (a manifest, [`Toolset::edit`]) are checked
//! when they are bound, by the same binding engine, in the order below, and each
//! refusal is a [`BindError`] whose [`rule`](crate::error::BindError::rule) names its section
//! here as a [`Rule`]. Errors, diagnostics and docs across the crate point to these names;
//! a message that cites one writes it as [`Rule::cited`] does.
//!
//! [`Toolset::edit`]: crate::Toolset::edit
//! [`BindError`]: crate::BindError
//!
//! # Vocabulary
//!
//! A *tool* is a named, described async function with JSON-Schema input and
//! output. An *extension* extends one tool: given the layer below (its callable,
//! running name and description, and optional author config) it mints a new-named
//! *branch* beside it. A *combo* is an ordered, non-empty list of extensions on one
//! *base* tool; `[a, b]` is `b(a(tool))`. Its *kind* is `wrapper`, `transformer` or
//! `backend`, and kinds differ only in five properties (see
//! [`ExtensionKind`](crate::kind::ExtensionKind)): generic machinery reads a property,
//! never a kind's name.
//!
//! # branch-by-rename
//! Applying an element mints a new-named branch, `<layer input name>_<extension
//! name>`, bound alongside the original: no kind replaces a tool in place. A branch
//! whose name equals the base's is refused.
//!
//! # order
//! `[a, b]` applies `a` first, then `b`: `b` is outermost and sees the call first.
//!
//! # one-branch-per-prefix
//! Combo `[a, b]` on `tool` binds `tool`, `tool_a` and `tool_a_b`. Separate combos
//! are independent (`[[a], [b]]` never binds `tool_a_b`); identical prefixes bind
//! once; two different stacks that would mint the same name are refused.
//!
//! # depth
//! Every layer adds `_<extension>` to the branch name, and every bound name fits the
//! toolset's [`Limits::max_name_len`](crate::limits::Limits::max_name_len) (128 bytes
//! unless raised: MCP's tool-name limit), so the name limit is what limits a combo's
//! depth. A combo of `d` layers on a tool whose name has `b` bytes, its extensions'
//! names `e1`, `e2`, .. bytes, binds when `b + (1 + e1) + .. + (1 + ed)` is at most
//! the limit; with every extension name `e` bytes long, that is `d <= (128 - b) /
//! (e + 1)` at the default:
//!
//! | tool name bytes | extension name bytes | deepest combo that binds |
//! |---|---|---|
//! | 5 (`shout`) | 5 (`trace`, `cache`, `batch`) | 20 |
//! | 5 (`shout`) | 4 (`pool`) | 24 |
//! | 5 (`shout`) | 3 (`gpu`, a named pool) | 30 |
//! | 20 | 5 | 18 |
//! | 1 | 1 | 63 |
//!
//! A combo one layer deeper is refused when it is bound, typed or from a manifest,
//! with a [`BindError::NameTooLong`](crate::BindError::NameTooLong) that says how
//! many of its layers fit; shorter names (`Pool::with_name`, an extension registered
//! under a shorter name) or a higher `max_name_len` let it bind. Independently, a
//! combo has at most [`Limits::max_combo_len`](crate::limits::Limits::max_combo_len)
//! elements (64 unless raised), checked before anything else; at the default name
//! limit no combo reaches it (64 layers need a name of at least 129 bytes). Typed
//! combos compile and take typed calls at any depth: these limits are the
//! toolset's, and apply when a combo is bound.
//!
//! # unknown-extension
//! At run time, every name in a combo that the registry does not know is reported,
//! sorted, before anything else is checked.
//!
//! # cardinality
//! A kind whose `multiple` is false (a backend) appears at most once per combo; the
//! same backend twice counts twice. Two combos of one tool may each hold one.
//!
//! # locality-inside-relocation
//! An extension that needs body locality (it sets something only the body's task
//! or thread sees, like `proxy`'s route) must sit inside, that is before, every
//! extension that relocates execution: `[proxy, pool]` binds, `[pool, proxy]`
//! does not, since outside the pool the proxy would wrap only the submitting side.
//! Extensions without the need may sit outside a backend; they run in the calling
//! process. The rules see a combo's own elements: an extension's kind and locality
//! are its author's word about what its code does, and a branch whose code calls
//! another tool runs that tool with that tool's own combo. A wrapper has one
//! locality, declared once in its `Extension` impl, whatever stack it wraps.
//!
//! # caller-outside-relocation
//! The dual: an extension that needs the caller's session (it asks the caller's
//! user, or reports to the caller, like `approve`) must sit outside, that is
//! after, every extension that relocates execution: `[pool, approve]` binds,
//! `[approve, pool]` does not, since inside the pool it would run where the body
//! runs, on a worker thread or process with no caller to ask. Its locality is
//! `CallerLocal`. The rule is the binding's side of [relocation](#relocation):
//! what only the caller's process has (the MCP peer of the call) stays behind at a
//! process boundary, and this rule keeps the extensions that need it in front of
//! every backend, from typed combos, manifests and the authoring API alike.
//!
//! An authorization check (`authorize`, locality `Authorizing`) sits outside
//! every relocating extension too, for its own reason: it needs no session (the
//! caller's [`Identity`](crate::context::Identity) travels to the worker), but
//! it must decide before the call is sent, so that no job is enqueued for a
//! caller it refuses. `[remote, authorize]` binds; `[authorize, remote]` does
//! not, and its error says so in those words.
//!
//! # shared-answers-inside-authorization
//! An authorization check in a combo (`authorize`, locality `Authorizing`) decides
//! who may call the layers inside it. An extension that answers callers from what
//! it kept of earlier calls, without calling below (`cache`, locality
//! `SharedAnswers`), must sit inside, that is before, every such check:
//! `[cache, authorize]` binds, `[authorize, cache]` does not, since outside the
//! check the cache would hand a kept answer (another caller's, in a `public` one;
//! or one given under a token with more scopes than the caller's token now) to a
//! caller the check never saw. A check itself sits outside every relocating
//! extension, as a caller-local one does (rule
//! [caller-outside-relocation](#caller-outside-relocation)): it runs where the
//! caller's identity was proved, and no job is enqueued for a caller it refuses.
//!
//! Policies put on a toolset's names ([`Edit::authorize`](crate::toolset::Edit::authorize),
//! a manifest's `[access]`) are checked before every layer of the name, so no
//! layer can sit outside them: what a caller may not call, it is not shown either
//! (see [`access`](crate::access)).
//!
//! # config
//! An element's config reaches only an extension that accepts config (an empty one
//! is fine anywhere); a config the extension cannot parse or work with is refused,
//! naming the extension and the field.
//!
//! # side-effects
//! A tool's hints (MCP's annotations: `readOnlyHint`, `destructiveHint`,
//! `idempotentHint`, `openWorldHint`) are set where the tool is built (a typed
//! tool's builder, a [`DynTool`](crate::runtime::DynTool)'s presentation, an
//! imported MCP tool's own) and may be set again by the operator, in a manifest
//! entry's `"annotations"`. A wrapper's branch and a backend's present their
//! layer's hints, since they make their layer's calls; a transformer's branch is a
//! new tool (a `chain` calls another tool too, a `batch` calls many times) and
//! says nothing of side effects: its `readOnlyHint`, `destructiveHint` and
//! `idempotentHint` are unsaid (MCP's defaults: it may change and destroy things,
//! and is not idempotent); its other hints are kept.
//!
//! An extension that makes a call again with the same arguments (`retry`) binds
//! only on a layer that is read-only or idempotent; one that answers calls without
//! making them (`cache`) only on a layer that is read-only, or idempotent and said
//! not destructive (`destructiveHint: false`). Only hints that are said count, and
//! an unsaid `destructiveHint` reads as MCP's default: destructive. A typed `retry` over a tool that
//! does not say it does not compile; a manifest's is refused when bound, naming
//! the fix: annotate the tool (`.idempotent()`, `"annotations": {"idempotentHint":
//! true}`), or, for a cache whose operator wants it anyway, its config's
//! `"side_effects": "allowed"`.
//!
//! A layer that answers a repeated call (one with the same key) with the first
//! one's outcome instead of calling below again
//! ([`OncePerKey`](crate::ext::OncePerKey), `once`; its locality
//! [`AnswersRepeats`](crate::extension::AnswersRepeats)) makes its branch
//! idempotent, whatever the layer below says, a transformer's branch included:
//! `[once, retry]` binds on any tool, and clients see the `once` branch with
//! `idempotentHint: true`. It answers from what it kept, so it also sits inside
//! every authorization check ([shared-answers-inside-authorization](self#shared-answers-inside-authorization)).
//!
//! # wrapper-input-schema
//! A wrapper's branch presents its layer input's input schema unchanged, defaults,
//! descriptions and constraints included, plus the wrapper's reserved params. Typed
//! wrappers hold this by construction: a wrapper is written as `Wrap<S>`, and its
//! branch is always the one binding mints for it (`Wrapped`), which takes the
//! layer's input type; a wrapper has no `Layer` of its own. At run time it is
//! compared.
//!
//! # reserved-params
//! A wrapper may add control parameters for itself (`cache`'s `exp`, `proxy`'s
//! `proxies`); they are taken out before the layer below is called. One whose name
//! the layer input already has is refused (it would mask a real parameter), and so
//! is one that is not an inline JSON type. Parameters a transformer or backend adds
//! beside its layer input's follow the same rule.
//! An operator may pin a wrapper's reserved params in a manifest
//! (`{"name": "cache", "pin": {"exp": 60}}`), or hide them without a value
//! (`{"name": "cache", "hide": ["exp"]}`; in code, `ElementSpec::with_pins` and
//! `ElementSpec::with_hidden`): a pinned or hidden param is not in the input
//! schema of its branch or of any branch above, a call that sends it is refused
//! (`unknown field`; a pinned one sent with exactly the pinned value changes
//! nothing and is taken, as a relocated call arrives at its worker), and every
//! call passes the pinned value, or leaves a hidden
//! one out so the layer uses its default. Both apply where the layer's params
//! live: above a transformer, in what it hands the layer (each item of a
//! `batch`), not in the transformer's own arguments. Only the element's own
//! reserved params can be pinned or hidden, a pin to a value its schema admits
//! (its `type`, `minimum` and `maximum`, checked when bound): the caller's
//! bounds are the operator's, so a pin cannot do what the model may not
//! (`cache`'s `exp` is at least 1 second, for both: neither switches the cache
//! off; an operator who wants that leaves the cache off). A bound may be the
//! operator's config, and the schema then says it: `cache`'s `exp` is at most
//! its `max_ttl_secs` (a day unless set), so no caller, nor pin, keeps an
//! entry of a public cache for good.
//!
//! # transformer-input-schema
//! A transformer presents its own concrete input schema: an object with named
//! properties, or an empty object. A bare "any JSON" passthrough is refused.
//!
//! # backend-input-schema
//! No rule: a backend may add task options of its own.
//!
//! # output-schema
//! A branch inherits the base's output schema only when every element of its
//! prefix preserves output shape (no transformer in it) and it declares none of its
//! own. Typed wrappers and backends keep the output type, so this holds by
//! construction. A wrapper or backend returns its layer's output as is: it may
//! declare an output schema where its layer has none, never one that contradicts
//! its layer's.
//!
//! # description-carry-forward
//! The running description starts as the base's; an element that sets one replaces
//! it, one that does not keeps it.
//!
//! # all-or-nothing
//! A rule broken in any combo of a tool leaves none of that tool's names bound (nor
//! changed, for a live change).
//!
//! # registry
//! Registering an extension name twice is refused. The catalogue lists `{name,
//! kind}` sorted by name, kinds in lowercase.
//!
//! # branch-bookkeeping
//! Every bound name knows its base and whether it is a branch. A branch is never
//! the target of a combo.
//!
//! # relocation
//! A backend ships no code: it hands the name of its layer input (the branch just
//! inside it) and the JSON arguments to a worker that has the same tools bound, and
//! the worker runs that inner stack. Everything inside the backend runs on the
//! worker, everything outside where the call arrived; thread-locals and in-memory
//! caches do not cross. The call's [context](crate::context) does, as each entry
//! says: as it is to worker threads, serialized to worker processes, or not at all;
//! a relocation from inside a pinned entry (a body-local layer's call) is refused.
//! Backends do this through [`Departure`](crate::relocation::Departure), the one
//! way, public, the built-in ones included. A backend's branch answers with its layer's result
//! ([output-schema](#output-schema)): one that answers with something else, a job
//! ticket, is a transformer over the backend's branch (`toolgraft-jobs`' `submit`
//! sits right outside its `remote`).
//!
//! # manifest-shape
//! A manifest maps base tool names to combos: `{"tools": {"weather": [["cache",
//! "batch"], ["trace"]]}}`; a flat list is one combo. Refused, naming the tool: a
//! value that is not a list, an empty list or combo, flat elements mixed with
//! combos, and an element that is neither a non-empty name nor `{name, config}`
//! with a mapping config, a mapping `pin` and a list `hide`, and no other keys. A tool's value may also be an
//! object, `{"combos": [...], "publish": ...}`, to set its
//! [published names](#published-names) beside its combos (`"publish"`: `"all"`,
//! `"outermost"`, `"in_place"`, or `{"published": "bound", ...}`); an object with
//! other keys is refused.
//!
//! Beside `"tools"`, `"match"` puts combos on tools by what they are, for tools
//! whose names the operator cannot know in advance (an upstream MCP server's):
//! a list of entries `{"prefix": "fs_", "annotations": {"readOnlyHint": false},
//! "combos": [...]}`, `prefix` and `annotations` optional. A tool named under
//! `"tools"` takes exactly its entry there; any other takes the combos of every
//! entry it meets, in order: its name starts with `prefix`, and each hint the
//! entry says equals the tool's, read as MCP does where the tool says nothing
//! (`readOnlyHint` false, `destructiveHint` true, `idempotentHint` false,
//! `openWorldHint` true). A combo two entries give the same tool is refused
//! when it binds, as one written twice in a tool's entry. `"tools"` may be left
//! out when `"match"` is given. Refused, naming the entry by its place from 0
//! (`match[1]: ...`): an entry that is not an object, has other keys, has no
//! combos, a `prefix` that is not a non-empty string of at most
//! [`MAX_NAME_LEN`](crate::limits::MAX_NAME_LEN) bytes, `annotations` that are
//! not MCP's hints as booleans, or a `title` among them (not a condition).
//!
//! # published-names
//! Clients (an MCP server's `tools/list` and `tools/call`) see the names each tool
//! publishes ([`Publish`](crate::toolset::Publish)): all its bound names (the
//! default), the outermost branch of each combo (the base when it has none), the
//! outermost branch of its one combo under the tool's own name (in place: the
//! base when it has none; refused for a tool with several combos), or exactly the
//! `(published, bound)` pairs given, which may publish a branch under
//! its base's name (`search` served by `search_cache_timeout`) and hide the rest.
//! A call by a published name is a call of the bound name behind it, and the
//! call's [`CallName`](crate::context::CallName) is the published name. Refused,
//! with nothing changed: a pair whose bound name the tool does not bind, a name
//! published twice (by one tool or two), a name another tool binds (hidden or
//! not: a client and an in-process call of it would reach two tools), and a
//! published name longer than
//! [`Limits::max_published_len`](crate::limits::Limits::max_published_len). A
//! change of a tool's combos keeps its publication, and is refused when the
//! publication no longer holds (an alias of a branch the change removes): change
//! both in one step (one manifest entry, or one [`Edit`](crate::toolset::Edit)).
//!
//! An [audience](crate::toolset::Edit::audience) (`"audiences"` in a manifest) is
//! a group of callers with a publication of its own: a caller is in the first
//! audience whose policy allows it, and is shown and may call by name what each
//! tool publishes to that audience ([`publish_to`](crate::toolset::Edit::publish_to),
//! `"publish_to"`), or what it publishes to everyone when it says nothing for
//! it (`search` served by `search_cache_rate_limit` to everyone, by
//! `search_cache` to the `pro` plan). Each audience's publication is checked by
//! the rules above on its own, as everyone's is, and a name published in
//! several is one tool's in all of them (the policies on a published name are
//! its tool's: `find` served by one tool to everyone and by another to the
//! `pro` plan would be guarded for one and open for the other). Refused: a publication to an
//! audience the toolset does not define, and an audience decided by a policy
//! that reads a call's arguments (a caller's audience decides what it is shown
//! before it calls anything). An audience decides what is shown, not who may
//! call: the [access policies](crate::access) on a name decide that, for every
//! audience it is published to, and a name one audience is not published
//! answers its callers as one that does not exist.

use std::fmt;
use std::str::FromStr;

/// A section of the [rulebook](self): the rule an error cites, by its anchor name.
///
/// [`BindError::rule`](crate::BindError::rule) and
/// [`ToolError::rule`](crate::ToolError::rule) return one, the integration crates
/// report it (`toolgraft-http`'s `{"error": ..., "rule": ...}`, `toolgraft-mcp`'s
/// error data), and it serializes as [`as_str`](Rule::as_str), the section's stable
/// anchor name.
///
/// ```
/// use toolgraft::rulebook::Rule;
/// let rule: Rule = "locality-inside-relocation".parse()?;
/// assert_eq!(rule, Rule::LocalityInsideRelocation);
/// assert_eq!(rule.to_string(), "locality-inside-relocation");
/// assert_eq!(serde_json::to_value(rule)?, "locality-inside-relocation");
/// assert_eq!(serde_json::from_str::<Rule>(r#""cardinality""#)?, Rule::Cardinality);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// [branch-by-rename](self#branch-by-rename): every element mints a new-named branch.
    BranchByRename,
    /// [order](self#order): `[a, b]` applies `a` first; `b` sees the call first.
    Order,
    /// [one-branch-per-prefix](self#one-branch-per-prefix): each prefix of a combo
    /// binds one name, and two different stacks may not mint the same one.
    OneBranchPerPrefix,
    /// [depth](self#depth): every bound name fits the toolset's name limit, which
    /// limits a combo's depth; a combo fits its length limit.
    Depth,
    /// [unknown-extension](self#unknown-extension): every name in a run-time combo
    /// is registered.
    UnknownExtension,
    /// [cardinality](self#cardinality): at most one extension of a kind that is not
    /// `multiple` (a backend) per combo.
    Cardinality,
    /// [locality-inside-relocation](self#locality-inside-relocation): an extension
    /// that needs body locality sits inside every relocating one.
    LocalityInsideRelocation,
    /// [caller-outside-relocation](self#caller-outside-relocation): an extension
    /// that needs the caller's session sits outside every relocating one.
    CallerOutsideRelocation,
    /// [shared-answers-inside-authorization](self#shared-answers-inside-authorization):
    /// an extension that answers from what it kept sits inside every
    /// authorization check.
    SharedAnswersInsideAuthorization,
    /// [side-effects](self#side-effects): an extension that makes a call again, or
    /// answers without making it, sits only where the tool's hints allow it.
    SideEffects,
    /// [config](self#config): config reaches only an extension that accepts it, and
    /// must be one it can work with.
    Config,
    /// [wrapper-input-schema](self#wrapper-input-schema): a wrapper presents its layer
    /// input's input schema unchanged.
    WrapperInputSchema,
    /// [reserved-params](self#reserved-params): a reserved param masks no parameter
    /// of the layer input, and is an inline JSON type.
    ReservedParams,
    /// [transformer-input-schema](self#transformer-input-schema): a transformer
    /// presents a concrete input schema of its own.
    TransformerInputSchema,
    /// [backend-input-schema](self#backend-input-schema): no rule; a backend may add
    /// task options.
    BackendInputSchema,
    /// [output-schema](self#output-schema): which branches inherit the base's output
    /// schema, and what a shape-preserving kind may declare.
    OutputSchema,
    /// [description-carry-forward](self#description-carry-forward): the running
    /// description, replaced by an element that sets one.
    DescriptionCarryForward,
    /// [all-or-nothing](self#all-or-nothing): a refused combo leaves nothing of its
    /// tool bound or changed.
    AllOrNothing,
    /// [registry](self#registry): an extension name is registered once.
    Registry,
    /// [branch-bookkeeping](self#branch-bookkeeping): a branch is never the target
    /// of a combo.
    BranchBookkeeping,
    /// [relocation](self#relocation): what a backend carries to where the body runs,
    /// and what stays behind.
    Relocation,
    /// [manifest-shape](self#manifest-shape): how a manifest writes tools and combos.
    ManifestShape,
    /// [published-names](self#published-names): which names clients see; each
    /// published once, bound, and within its length limit.
    PublishedNames,
}

impl Rule {
    /// Every rule, in the rulebook's order.
    ///
    /// ```
    /// use toolgraft::rulebook::Rule;
    /// assert_eq!(Rule::ALL[0], Rule::BranchByRename);
    /// assert_eq!(Rule::ALL.last(), Some(&Rule::PublishedNames));
    /// ```
    pub const ALL: [Rule; 23] = [
        Self::BranchByRename,
        Self::Order,
        Self::OneBranchPerPrefix,
        Self::Depth,
        Self::UnknownExtension,
        Self::Cardinality,
        Self::LocalityInsideRelocation,
        Self::CallerOutsideRelocation,
        Self::SharedAnswersInsideAuthorization,
        Self::Config,
        Self::SideEffects,
        Self::WrapperInputSchema,
        Self::ReservedParams,
        Self::TransformerInputSchema,
        Self::BackendInputSchema,
        Self::OutputSchema,
        Self::DescriptionCarryForward,
        Self::AllOrNothing,
        Self::Registry,
        Self::BranchBookkeeping,
        Self::Relocation,
        Self::ManifestShape,
        Self::PublishedNames,
    ];

    /// The section's anchor name, as the rulebook heads it (`cardinality`): stable,
    /// and what [`Display`](fmt::Display), serde and [`FromStr`] use.
    ///
    /// ```
    /// use toolgraft::rulebook::Rule;
    /// assert_eq!(Rule::OneBranchPerPrefix.as_str(), "one-branch-per-prefix");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::BranchByRename => "branch-by-rename",
            Self::Order => "order",
            Self::OneBranchPerPrefix => "one-branch-per-prefix",
            Self::Depth => "depth",
            Self::UnknownExtension => "unknown-extension",
            Self::Cardinality => "cardinality",
            Self::LocalityInsideRelocation => "locality-inside-relocation",
            Self::CallerOutsideRelocation => "caller-outside-relocation",
            Self::SharedAnswersInsideAuthorization => "shared-answers-inside-authorization",
            Self::Config => "config",
            Self::SideEffects => "side-effects",
            Self::WrapperInputSchema => "wrapper-input-schema",
            Self::ReservedParams => "reserved-params",
            Self::TransformerInputSchema => "transformer-input-schema",
            Self::BackendInputSchema => "backend-input-schema",
            Self::OutputSchema => "output-schema",
            Self::DescriptionCarryForward => "description-carry-forward",
            Self::AllOrNothing => "all-or-nothing",
            Self::Registry => "registry",
            Self::BranchBookkeeping => "branch-bookkeeping",
            Self::Relocation => "relocation",
            Self::ManifestShape => "manifest-shape",
            Self::PublishedNames => "published-names",
        }
    }

    /// The rule as a message cites it: ``rule `cardinality` in `toolgraft::rulebook` ``.
    /// [`ToolError::rule`](crate::ToolError::rule) finds a rule cited so in a
    /// refusal's reason.
    ///
    /// ```
    /// use toolgraft::rulebook::Rule;
    /// let reason = format!("place `proxy` inside `pool` ({})", Rule::LocalityInsideRelocation.cited());
    /// assert_eq!(reason, "place `proxy` inside `pool` (rule `locality-inside-relocation` in `toolgraft::rulebook`)");
    /// ```
    pub fn cited(self) -> String {
        format!("rule `{}` in `toolgraft::rulebook`", self.as_str())
    }

    /// The first rule `text` cites as [`cited`](Rule::cited) writes it.
    pub(crate) fn cited_in(text: &str) -> Option<Rule> {
        text.match_indices("rule `").find_map(|(at, opening)| {
            let rest = &text[at + opening.len()..];
            let (name, after) = rest.split_once('`')?;
            let rule = name.parse().ok()?;
            after
                .starts_with(" in `toolgraft::rulebook`")
                .then_some(rule)
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`Rule`].
///
/// ```
/// use toolgraft::rulebook::Rule;
/// let err = "at-most-one-backend".parse::<Rule>().unwrap_err();
/// assert_eq!(err.to_string(),
///     "no rule `at-most-one-backend` in the rulebook; see `toolgraft::rulebook` for the section names");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "no rule `{}` in the rulebook; see `toolgraft::rulebook` for the section names",
    crate::quote::shorten(.input)
)]
pub struct UnknownRule {
    /// The rejected input, verbatim.
    pub input: String,
}

impl FromStr for Rule {
    type Err = UnknownRule;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|rule| rule.as_str() == input)
            .ok_or_else(|| UnknownRule {
                input: input.to_owned(),
            })
    }
}

impl serde::Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Rule {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::Rule;

    /// The sections this file heads, in order (the vocabulary is not a rule).
    fn sections() -> Vec<&'static str> {
        include_str!("rulebook.rs")
            .lines()
            .filter_map(|line| line.strip_prefix("//! # "))
            .filter(|heading| *heading != "Vocabulary")
            .collect()
    }

    #[test]
    fn every_rule_has_a_section_and_every_section_a_rule() {
        let names: Vec<&str> = Rule::ALL.iter().map(|rule| rule.as_str()).collect();
        assert_eq!(names, sections());
        for rule in Rule::ALL {
            assert_eq!(rule.as_str().parse::<Rule>(), Ok(rule));
        }
    }

    /// Every rule the workspace's messages and compiler notes cite, as
    /// [`Rule::cited`] writes it, is a section of the rulebook.
    #[test]
    fn every_rule_cited_in_the_sources_is_a_rule() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("src"), root.join("crates")];
        let mut cited = 0;
        while let Some(path) = files.pop() {
            if path.is_dir() {
                if path.ends_with("target") {
                    continue;
                }
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.ends_with("rulebook.rs") || path.extension().is_none_or(|ext| ext != "rs") {
                continue; // The rulebook's own examples cite made-up names.
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (at, _) in text.match_indices("` in `toolgraft::rulebook`") {
                let name = text[..at].rsplit('`').next().unwrap_or_default();
                assert!(
                    name.parse::<Rule>().is_ok(),
                    "{} cites `{name}`, which is no rule",
                    path.display()
                );
                cited += 1;
            }
        }
        assert!(cited > 5, "found only {cited} citations");
    }

    #[test]
    fn a_cited_rule_is_found_in_a_message() {
        let message = format!("no; {} and more", Rule::Registry.cited());
        assert_eq!(Rule::cited_in(&message), Some(Rule::Registry));
        assert_eq!(Rule::cited_in("rule `registry` elsewhere"), None);
        assert_eq!(Rule::cited_in("rule `nope` in `toolgraft::rulebook`"), None);
        assert_eq!(Rule::cited_in("rule `"), None);
    }
}
