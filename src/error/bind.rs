use thiserror::Error;

use super::message::side_effects;
use crate::kind::ExtensionKind;
use crate::name::{InvalidName, Name};
use crate::rulebook::Rule;

/// Why a tool and its combos could not be bound. Any of these leaves nothing of the
/// tool bound ([all-or-nothing](crate::rulebook#all-or-nothing)); [`BindError::rule`]
/// names the rule broken.
///
/// ```
/// use toolgraft::{BindError, Name};
/// let err = BindError::LocalityOutsideRelocation {
///     tool: Name::new("fetch")?,
///     extension: Name::new("proxy")?,
///     relocating: Name::new("pool")?,
/// };
/// assert!(err.to_string().contains("place `proxy` before `pool`"));
/// assert_eq!(err.rule(), Some(toolgraft::rulebook::Rule::LocalityInsideRelocation));
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum BindError {
    /// A tool or extension name is not a valid [`Name`].
    #[error(transparent)]
    InvalidName(#[from] InvalidName),

    /// Rule `branch-by-rename`: an extension minted a branch named like its base.
    #[error(
        "`{extension}` on `{tool}` mints a branch with the same name as the tool; a branch must have a new name"
    )]
    SameName {
        /// The base tool.
        tool: Name,
        /// The extension that chose the name.
        extension: Name,
    },

    /// Rule `one-branch-per-prefix`: two different stacks of one tool mint the same name.
    #[error(
        "two different stacks of `{tool}` mint `{name}`: [{first}] and [{second}]; rename an extension or drop one combo"
    )]
    NameClash {
        /// The base tool.
        tool: Name,
        /// The contested name.
        name: Name,
        /// The first stack, as `a, b`.
        first: String,
        /// The second stack.
        second: String,
    },

    /// The tool is bound already.
    #[error(
        "a base tool named `{tool}` is already bound; if it is this tool, bind all of its combos in one call, or change them with `Toolset::edit` or `apply_manifest`; if it is another tool, give one of the two another name"
    )]
    AlreadyBound {
        /// The tool.
        tool: Name,
    },

    /// A combo with no element.
    #[error("a combo of `{tool}` is empty; list at least one extension")]
    EmptyCombo {
        /// The tool.
        tool: Name,
    },

    /// A combo has more elements than the toolset's
    /// [`Limits::max_combo_len`](crate::limits::Limits::max_combo_len) ([depth](crate::rulebook#depth)).
    #[error(
        "a combo of `{tool}` has {len} elements, over the limit of {limit}; shorten it, or raise the limit with `Limits::with_max_combo_len` (rule `depth` in `toolgraft::rulebook`)"
    )]
    ComboTooLong {
        /// The tool.
        tool: Name,
        /// The combo's length.
        len: usize,
        /// The limit.
        limit: usize,
    },

    /// A name the tool would bind is longer than the toolset's
    /// [`Limits::max_name_len`](crate::limits::Limits::max_name_len) (MCP clients expect at
    /// most 128 bytes): a branch name grows with each layer, so the name limit is
    /// what limits a combo's depth ([depth](crate::rulebook#depth)).
    #[error(
        "`{tool}` would bind `{name}`, {len} bytes long, over the limit of {limit}: each layer adds `_<extension>` to the name, so {fits} of this combo's {layers} layers fit; use shorter tool or extension names (`Pool::with_name(..)`, or register the extension under a shorter name), or raise the limit with `Limits::with_max_name_len` (rule `depth` in `toolgraft::rulebook`)"
    )]
    NameTooLong {
        /// The tool.
        tool: Name,
        /// The name (shortened).
        name: String,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        limit: usize,
        /// The layers of the combo up to this name (its depth).
        layers: usize,
        /// How many of them bind: the depth whose name fits the limit.
        fits: usize,
    },

    /// An element pins a param that is not one of its reserved params
    /// ([reserved-params](crate::rulebook#reserved-params)).
    #[error(
        "`{extension}` (on `{tool}`) pins `{param}`, which is not one of its reserved params (it reserves: {reserved}); pin only those, or set the extension's config instead (rule `reserved-params` in `toolgraft::rulebook`)"
    )]
    PinNotReserved {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// The param it pins (shortened).
        param: String,
        /// The params it reserves, listed.
        reserved: String,
    },

    /// An element hides a param that is not one of its reserved params
    /// ([reserved-params](crate::rulebook#reserved-params)).
    #[error(
        "`{extension}` (on `{tool}`) hides `{param}`, which is not one of its reserved params (it reserves: {reserved}); hide only those (rule `reserved-params` in `toolgraft::rulebook`)"
    )]
    HiddenNotReserved {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// The param it hides (shortened).
        param: String,
        /// The params it reserves, listed.
        reserved: String,
    },

    /// An operator pins a reserved param to a value its schema does not admit
    /// ([reserved-params](crate::rulebook#reserved-params)).
    #[error(
        "`{extension}` (on `{tool}`) pins `{param}` to `{value}`, which its schema does not admit: it takes {expected}; pin a value it takes (rule `reserved-params` in `toolgraft::rulebook`)"
    )]
    PinMisfits {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// The param it pins (shortened).
        param: String,
        /// The pinned value, shortened.
        value: String,
        /// What the schema takes.
        expected: String,
    },

    /// A tool publishes a name its bound names do not include
    /// ([published-names](crate::rulebook#published-names)).
    #[error(
        "`{tool}` would publish `{published}` as `{bound}`, which `{tool}` does not bind; publish one of its bound names, or bind the combo that mints `{bound}` (rule `published-names` in `toolgraft::rulebook`)"
    )]
    PublishedUnbound {
        /// The tool.
        tool: Name,
        /// The published name.
        published: Name,
        /// The bound name it would be served by.
        bound: Name,
    },

    /// A published name is longer than the toolset's
    /// [`Limits::max_published_len`](crate::limits::Limits::max_published_len)
    /// ([published-names](crate::rulebook#published-names)).
    #[error(
        "`{tool}` would publish `{published}` (served by `{bound}`), {len} bytes long, over the limit of {limit} for published names; publish it under a shorter name (`Publish::only([(\"short\", \"{bound}\")])` with `Toolset::bind_publishing` or `Edit::publish`, or `\"publish\"` in the manifest), publish only the outermost branches, or raise the limit with `Limits::with_max_published_len` (rule `published-names` in `toolgraft::rulebook`)"
    )]
    PublishedTooLong {
        /// The tool.
        tool: Name,
        /// The published name (shortened).
        published: String,
        /// The bound name it would be served by.
        bound: Name,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        limit: usize,
    },

    /// Two published names are the same
    /// ([published-names](crate::rulebook#published-names)).
    #[error(
        "`{tool}` would publish `{published}`, which `{owner}` publishes already: a client calls one tool by one name; publish one of them under another name (rule `published-names` in `toolgraft::rulebook`)"
    )]
    PublishedTwice {
        /// The tool publishing it.
        tool: Name,
        /// The contested published name.
        published: Name,
        /// The tool that publishes it already (the same tool, if it lists it twice).
        owner: Name,
    },

    /// A tool is published in place ([`Publish::InPlace`](crate::toolset::Publish::InPlace))
    /// but has several combos, so no one branch can take its name
    /// ([published-names](crate::rulebook#published-names)).
    #[error(
        "`{tool}` would be published in place, but it has {} combos, whose outermost branches are {}: only one can take the name `{tool}`; publish the one you mean with `Publish::only([(\"{tool}\", \"{}\")])` (`{{\"{tool}\": \"{}\"}}` in a manifest), or give `{tool}` one combo (rule `published-names` in `toolgraft::rulebook`)",
        outermost.len(),
        super::message::ticked(&outermost.iter().map(ToString::to_string).collect::<Vec<_>>()),
        outermost[0],
        outermost[0]
    )]
    InPlaceOfSeveral {
        /// The tool.
        tool: Name,
        /// The outermost branch of each of its combos, sorted.
        outermost: Vec<Name>,
    },

    /// A tool would publish a name that another tool binds: a client calling it
    /// would get one tool, an in-process call of the same name the other's.
    #[error(
        "`{tool}` would publish `{published}`, which `{owner}` binds: a client and an in-process call of one name would reach two tools; publish it under another name (rule `published-names` in `toolgraft::rulebook`)"
    )]
    PublishedNameOfAnother {
        /// The tool publishing it.
        tool: Name,
        /// The published name.
        published: Name,
        /// The tool that binds that name.
        owner: Name,
    },

    /// A tool publishes to an audience the toolset does not define
    /// ([published-names](crate::rulebook#published-names)): define it in the
    /// same edit ([`Edit::audience`](crate::toolset::Edit::audience)) or in the
    /// manifest's `"audiences"`.
    #[error(
        "`{tool}` publishes to the audience `{audience}`, which the toolset does not define; define it (`Edit::audience`, or `\"audiences\"` in the manifest) or fix the name (rule `published-names` in `toolgraft::rulebook`)"
    )]
    UnknownAudience {
        /// The tool.
        tool: Name,
        /// The audience it names (shortened).
        audience: String,
    },

    /// An audience's policy reads a call's arguments: a caller's audience
    /// decides what it is shown before it calls anything, so it must follow
    /// from who the caller is alone.
    #[error(
        "the audience `{audience}` is decided by a policy that reads a call's arguments; an audience decides what a caller is shown before any call, so decide it from the caller's identity alone (scopes, claims, `access::identity_fn`) (rule `published-names` in `toolgraft::rulebook`)"
    )]
    AudienceReadsArguments {
        /// The audience.
        audience: Name,
    },

    /// What the toolset would publish to an audience breaks a rule of
    /// [published-names](crate::rulebook#published-names): `error` says which.
    #[error("publishing to the audience `{audience}`: {error}")]
    InAudience {
        /// The audience.
        audience: Name,
        /// The refusal, as for the names everyone is shown.
        error: Box<BindError>,
    },

    /// A run-time extension's factory failed (or panicked) while building a branch.
    #[error("`{extension}` (on `{tool}`) could not build its branch: {problem}")]
    ExtensionFailed {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// What its factory said.
        problem: String,
    },

    /// Rule `branch-by-rename`: the branch name an extension chose is not a valid name.
    #[error(
        "`{extension}` (on `{tool}`) names its branch `{name}`, which is not a valid name: {problem}"
    )]
    InvalidBranchName {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// The name it chose.
        name: String,
        /// What is wrong with it.
        problem: String,
    },

    /// A manifest's entry of `tool` puts an access policy on a name of another
    /// tool: each entry says the access of its own tool's names only.
    #[error(
        "the entry of `{tool}` puts an access policy on `{name}`, a name of `{owner}`; write it in the entry of `{owner}`"
    )]
    AccessOfAnother {
        /// The tool whose entry it is.
        tool: String,
        /// The name the policy is on.
        name: Name,
        /// The tool the name is of.
        owner: Name,
    },

    /// A published name that carries an access policy would be published by
    /// another tool than the one it was set for: the policy decides the name
    /// only while it is its tool's, so the name would open silently. Set its
    /// policy again ([`Edit::authorize`](crate::toolset::Edit::authorize)), or
    /// open it ([`Edit::open`](crate::toolset::Edit::open)), in the same edit.
    #[error(
        "`{name}` carries an access policy set while it was `{owner}`'s, and would now be published by `{tool}`, open to any caller; authorize it again or open it in the same edit"
    )]
    GuardedNameMoved {
        /// The published name.
        name: Name,
        /// The tool the policy was set for.
        owner: Name,
        /// The tool that would publish it.
        tool: Name,
    },

    /// A name the tool would bind is already bound by another tool.
    #[error("`{name}` is already bound (by tool `{owner}`); `{tool}` cannot bind it too")]
    NameTaken {
        /// The tool being bound.
        tool: Name,
        /// The contested name.
        name: Name,
        /// The base tool that holds it.
        owner: Name,
    },

    /// A change or a manifest names a tool that is not bound.
    #[error(
        "no base tool `{tool}` is bound (or offered in the `BaseTools` given to `bind_manifest`); bind or offer it first, or fix the name"
    )]
    UnknownTool {
        /// The name asked for.
        tool: String,
    },

    /// Rule `branch-bookkeeping`: a change or a manifest targets a branch instead of a base tool.
    #[error(
        "`{name}` is a branch of `{base}`, not a base tool; attach the combo to `{base}` instead"
    )]
    NotABase {
        /// The branch named.
        name: Name,
        /// Its base tool.
        base: Name,
    },

    /// A combo added to a tool that already carries it.
    #[error("[{combo}] is already attached to `{tool}`; leave it, or detach it first")]
    AlreadyAttached {
        /// The tool.
        tool: Name,
        /// The combo, as `a, b`.
        combo: String,
    },

    /// A combo removed from a tool that does not carry it.
    #[error("[{combo}] is not attached to `{tool}`; its combos are {attached}")]
    NotAttached {
        /// The tool.
        tool: Name,
        /// The combo, as `a, b`.
        combo: String,
        /// The combos it carries, as `[a, b], [c]`, or `none`.
        attached: String,
    },

    /// A step of an edit on a tool an earlier step of the same edit unbinds
    /// ([`Edit::unbind`](crate::toolset::Edit::unbind)): steps apply in order,
    /// and after the unbind there is no tool to change.
    #[error(
        "`{tool}` is unbound by an earlier step of this edit; put this step before the unbind, or leave it out"
    )]
    UnboundInEdit {
        /// The tool.
        tool: Name,
    },

    /// Rule `unknown-extension`: extensions that the registry does not know.
    #[error("unknown extension{} {} in a combo of `{tool}`; check the spelling, or register {}; registered: {}", if .names.len() == 1 { "" } else { "s" }, crate::error::ticked(.names), if .names.len() == 1 { "it" } else { "them" }, crate::error::ticked(.registered))]
    UnknownExtensions {
        /// The tool.
        tool: Name,
        /// Every unknown name, sorted.
        names: Vec<String>,
        /// The registered names, sorted.
        registered: Vec<String>,
    },

    /// Rule `cardinality`: more than one extension of a kind whose `multiple` is false.
    #[error("a combo of `{tool}` holds more than one {kind}: [{}]; a combo allows one {kind}, so put each in its own combo", crate::error::listed(.extensions))]
    MultipleOfKind {
        /// The tool.
        tool: Name,
        /// The kind.
        kind: ExtensionKind,
        /// The offending extensions, in combo order.
        extensions: Vec<Name>,
    },

    /// Rule `locality-inside-relocation`: a body-locality extension outside a relocating one.
    #[error(
        "on `{tool}`, `{extension}` needs to run beside the tool body but sits outside `{relocating}`, which runs the body elsewhere; place `{extension}` before `{relocating}`"
    )]
    LocalityOutsideRelocation {
        /// The tool.
        tool: Name,
        /// The extension that needs body locality.
        extension: Name,
        /// The relocating extension inside it.
        relocating: Name,
    },

    /// Rule `caller-outside-relocation`: an extension that needs the caller's session
    /// inside a relocating one.
    #[error(
        "on `{tool}`, `{extension}` needs the caller's session but sits inside `{relocating}`, which would run it on a worker with no caller to ask or report to; place `{extension}` after `{relocating}`"
    )]
    CallerLocalInsideRelocation {
        /// The tool.
        tool: Name,
        /// The extension that needs the caller's session.
        extension: Name,
        /// The relocating extension outside it.
        relocating: Name,
    },

    /// Rule `caller-outside-relocation`, for an authorization check: one inside a
    /// relocating extension would decide on the worker, once the call was
    /// enqueued, not where the caller's identity was proved.
    #[error(
        "on `{tool}`, `{authorizer}` decides who may call but sits inside `{relocating}`, which would run the check on a worker once the call is enqueued, so a caller it refuses would still have a job sent; place `{authorizer}` after `{relocating}`"
    )]
    AuthorizationInsideRelocation {
        /// The tool.
        tool: Name,
        /// The authorization check.
        authorizer: Name,
        /// The relocating extension outside it.
        relocating: Name,
    },

    /// Rule `shared-answers-inside-authorization`: an extension that answers from
    /// what it kept sits outside (after) an authorization check.
    #[error(
        "on `{tool}`, `{extension}` answers callers from what it kept but sits outside `{authorizer}`, which decides who may call: it would answer callers `{authorizer}` never saw; place `{extension}` before `{authorizer}`"
    )]
    SharedAnswerOutsideAuthorization {
        /// The tool.
        tool: Name,
        /// The extension that answers from what it kept.
        extension: Name,
        /// The authorization check inside it.
        authorizer: Name,
    },

    /// Rule `side-effects`: an extension that makes a call again (`retry`) or
    /// answers without making it (`cache`), on a layer whose hints do not allow it.
    #[error("{}", side_effects(.tool, .extension, .layer, *.demand, .transformer.as_ref()))]
    SideEffects {
        /// The tool.
        tool: Name,
        /// The extension that relies on the hints.
        extension: Name,
        /// The layer it sits on (the tool, or a branch of it).
        layer: Name,
        /// What it relies on them for.
        demand: crate::annotations::Demand,
        /// The transformer inside it whose branch, a new tool, says nothing of
        /// side effects, when there is one.
        transformer: Option<Name>,
    },

    /// Rule `config`: non-empty config for an extension that takes none.
    #[error(
        "`{extension}` (on `{tool}`) does not accept config; remove its `config` or leave it empty"
    )]
    ConfigNotAccepted {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
    },

    /// Rule `config`: a config the extension cannot parse.
    #[error(
        "config of `{extension}` (on `{tool}`) is invalid at `{field}`: {problem}; fix that field, or leave the config out for the default"
    )]
    InvalidConfig {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// The offending field.
        field: String,
        /// What is wrong.
        problem: String,
    },

    /// Rule `wrapper-input-schema`: a wrapper presented another input schema than its layer input's.
    #[error(
        "wrapper changed the schema: `{extension}` on `{tool}` must present the input schema of `{below}` unchanged (plus its reserved params), but {difference}; present it unchanged, or declare `{extension}` a transformer"
    )]
    WrapperChangedSchema {
        /// The tool.
        tool: Name,
        /// The wrapper.
        extension: Name,
        /// Its layer input.
        below: Name,
        /// The first difference found.
        difference: String,
    },

    /// Rule `output-schema`: a kind that returns the layer's output declared another
    /// output schema than the layer's.
    #[error(
        "`{extension}` on `{tool}` returns the output of `{below}` unchanged, but declares another output schema than its; declare none (the branch inherits it), or make `{extension}` a transformer"
    )]
    OutputSchemaContradicts {
        /// The tool.
        tool: Name,
        /// The extension.
        extension: Name,
        /// Its layer input.
        below: Name,
    },

    /// Rule `reserved-params`: a reserved param that would mask a parameter of the layer input.
    #[error(
        "reserved param `{param}` already exists: `{extension}` on `{tool}` reserves `{param}`, which `{below}` already takes; rename the reserved param"
    )]
    ReservedParamExists {
        /// The tool.
        tool: Name,
        /// The wrapper.
        extension: Name,
        /// Its layer input.
        below: Name,
        /// The contested parameter.
        param: String,
    },

    /// Rule `reserved-params`: a reserved param whose schema is not inline.
    #[error(
        "reserved param `{param}` of `{extension}` (on `{tool}`) is not an inline JSON type; reserved params cannot use `$defs` or `$ref`"
    )]
    ReservedParamNotInline {
        /// The tool.
        tool: Name,
        /// The wrapper.
        extension: Name,
        /// The parameter.
        param: String,
    },

    /// A layer input's schema is not a JSON Schema the rules can work with.
    #[error(
        "the input schema below `{extension}` (on `{tool}`) is malformed: {problem}; the layer below must present a valid object schema"
    )]
    MalformedSchema {
        /// The tool.
        tool: Name,
        /// The extension that could not be applied.
        extension: Name,
        /// What is wrong.
        problem: String,
    },

    /// Rule `transformer-input-schema`: a transformer without a concrete input schema of its own.
    #[error(
        "transformer must present its own concrete schema: `{extension}` on `{tool}` presents {presented}; give it an object schema with named properties (or none, for zero parameters)"
    )]
    TransformerSchemaNotConcrete {
        /// The tool.
        tool: Name,
        /// The transformer.
        extension: Name,
        /// What it presented instead.
        presented: String,
    },
}

impl BindError {
    /// The section of the [rulebook](crate::rulebook) this refusal enforces, such
    /// as [`Rule::Cardinality`]; `None` for a refusal that is not one of the rules (a
    /// limit, an unknown tool, a live change that does not apply).
    ///
    /// ```
    /// use toolgraft::{BindError, Name};
    /// use toolgraft::rulebook::Rule;
    /// let err = BindError::EmptyCombo { tool: Name::new("fetch")? };
    /// assert_eq!(err.rule(), Some(Rule::ManifestShape));
    /// assert_eq!(err.rule().map(Rule::as_str), Some("manifest-shape"));
    /// # Ok::<(), toolgraft::error::InvalidName>(())
    /// ```
    pub fn rule(&self) -> Option<Rule> {
        Some(match self {
            Self::InvalidName(_) | Self::SameName { .. } | Self::InvalidBranchName { .. } => {
                Rule::BranchByRename
            }
            Self::NameClash { .. } | Self::NameTaken { .. } => Rule::OneBranchPerPrefix,
            Self::EmptyCombo { .. } => Rule::ManifestShape,
            Self::NotABase { .. } => Rule::BranchBookkeeping,
            Self::UnknownExtensions { .. } => Rule::UnknownExtension,
            Self::MultipleOfKind { .. } => Rule::Cardinality,
            Self::LocalityOutsideRelocation { .. } => Rule::LocalityInsideRelocation,
            Self::CallerLocalInsideRelocation { .. }
            | Self::AuthorizationInsideRelocation { .. } => Rule::CallerOutsideRelocation,
            Self::SharedAnswerOutsideAuthorization { .. } => Rule::SharedAnswersInsideAuthorization,
            Self::SideEffects { .. } => Rule::SideEffects,
            Self::ExtensionFailed { .. }
            | Self::ConfigNotAccepted { .. }
            | Self::InvalidConfig { .. } => Rule::Config,
            Self::WrapperChangedSchema { .. } => Rule::WrapperInputSchema,
            Self::PinNotReserved { .. }
            | Self::HiddenNotReserved { .. }
            | Self::PinMisfits { .. }
            | Self::ReservedParamExists { .. }
            | Self::ReservedParamNotInline { .. }
            | Self::MalformedSchema { .. } => Rule::ReservedParams,
            Self::TransformerSchemaNotConcrete { .. } => Rule::TransformerInputSchema,
            Self::OutputSchemaContradicts { .. } => Rule::OutputSchema,
            Self::ComboTooLong { .. } | Self::NameTooLong { .. } => Rule::Depth,
            Self::PublishedUnbound { .. }
            | Self::PublishedTooLong { .. }
            | Self::PublishedTwice { .. }
            | Self::PublishedNameOfAnother { .. }
            | Self::InPlaceOfSeveral { .. }
            | Self::UnknownAudience { .. }
            | Self::AudienceReadsArguments { .. } => Rule::PublishedNames,
            Self::InAudience { error, .. } => return error.rule(),
            // Live-change bookkeeping, not rules of a combo.
            Self::AlreadyBound { .. }
            | Self::UnknownTool { .. }
            | Self::AccessOfAnother { .. }
            | Self::GuardedNameMoved { .. }
            | Self::AlreadyAttached { .. }
            | Self::NotAttached { .. }
            | Self::UnboundInEdit { .. } => return None,
        })
    }
}
