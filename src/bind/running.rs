//! The fold's state: the layer input of the next element ([`Running`]), and the
//! element folded into it ([`Element`]).

use std::sync::Arc;

use schemars::Schema;
use serde_json::{Map, Value};

use super::info::{Link, ToolInfo};
use crate::extension::{AccessRole, ConfigError, LayerInput, Placement};
use crate::kind::ExtensionKind;
use crate::name::{InvalidName, Name};
use crate::tool::{Presentation, ToolSpec};

/// One combo element, as the engine sees it: typed or from a manifest.
#[derive(Clone, Debug)]
pub(crate) struct Element {
    pub name: Name,
    pub kind: ExtensionKind,
    /// Where the element must run (rules `locality-inside-relocation`, `caller-outside-relocation`).
    pub placement: Placement,
    /// What it does about who may have an answer (rule `shared-answers-inside-authorization`).
    pub access: AccessRole,
    /// Whether it answers a repeated call with the first one's outcome (rule `side-effects`).
    pub answers_repeats: bool,
    /// An authorization check's policy.
    pub policy: Option<Arc<dyn crate::access::Policy>>,
    pub accepts_config: bool,
    /// What the element relies on the tool's hints for (rule `side-effects`).
    pub demand: Option<crate::tool::Demand>,
    /// The config the combo wrote for the element (empty is none): what rule `config`
    /// checks, and the element's identity among a tool's attached combos.
    pub written: Option<Map<String, Value>>,
    /// The reserved params the operator pins, with their values.
    pub pinned: Option<Map<String, Value>>,
    /// The reserved params the operator hides.
    pub hidden: Option<Vec<String>>,
    /// The config the built extension reports: what clients see in its [`Link`].
    pub config: Option<Value>,
    /// What went wrong building the element, found when it was made.
    pub problem: Option<Problem>,
    /// The name of the branch this element mints.
    pub branch: Name,
    /// Schemas are shared, not copied: the same few are bound into many branches.
    pub reserved: Option<Arc<Schema>>,
    /// Parameters a non-wrapper adds on top of its layer input's (rule `reserved-params` applies).
    pub own_params: Vec<String>,
    pub presented_input: Option<Arc<Schema>>,
    pub declared_output: Option<Arc<Schema>>,
    pub description: Option<String>,
}

impl Element {
    /// An element with only what every element has: the rest is the caller's.
    pub(crate) fn bare(name: &Name, kind: ExtensionKind, below: &Running) -> Self {
        Self {
            name: name.clone(),
            kind,
            placement: Placement::Anywhere,
            access: AccessRole::Neutral,
            answers_repeats: false,
            policy: None,
            accepts_config: false,
            demand: None,
            written: None,
            pinned: None,
            hidden: None,
            config: None,
            problem: None,
            branch: below.name.branch(name),
            reserved: None,
            own_params: Vec::new(),
            presented_input: None,
            declared_output: None,
            description: None,
        }
    }
}

/// What went wrong building an element, reported at its rule's turn.
#[derive(Clone, Debug)]
pub(crate) enum Problem {
    /// Rule `config`: the config does not build the extension.
    Config(ConfigError),
    /// A run-time factory failed (or panicked) without config to blame.
    Failed(String),
    /// Rule `branch-by-rename`: the branch name the extension chose is not a name.
    BranchName(InvalidName),
}
/// The layer input of the next element: what has been folded so far.
///
/// Shared parts throughout: a running view is cloned into every branch it mints
/// and every plan, and most of it is the layer input's as is.
#[derive(Clone, Debug)]
pub(crate) struct Running {
    pub name: Name,
    pub base: Name,
    pub description: Arc<str>,
    pub input_schema: Arc<Schema>,
    pub output_schema: Option<Arc<Schema>>,
    pub presentation: Arc<Presentation>,
    /// The reserved params pinned or hidden by this layer and those below it up
    /// to the nearest transformer (above one, they are an item's, not the
    /// arguments'): not in the input schema, refused from callers.
    pub withheld: Arc<[String]>,
    pub chain: Arc<[Link]>,
    /// The authorization checks of the chain's layers, innermost first.
    pub checks: crate::access::Checks,
    /// Whether a layer since the nearest transformer answers repeated calls
    /// from what it kept: a call made again does no more than once (rule
    /// `side-effects`).
    pub answers_repeats: bool,
}

impl Running {
    pub(crate) fn of_base(spec: &ToolSpec) -> Self {
        Self {
            name: spec.name.clone(),
            base: spec.name.clone(),
            description: spec.description.as_str().into(),
            input_schema: spec.input_schema.clone(),
            output_schema: spec.output_schema.clone(),
            presentation: spec.presentation.clone(),
            withheld: Arc::new([]),
            chain: Arc::new([]),
            checks: crate::access::Checks::default(),
            answers_repeats: false,
        }
    }

    pub(crate) fn layer_input<'a, E: ?Sized>(&'a self, branch: &'a Name) -> LayerInput<'a, E> {
        LayerInput::new(
            &self.name,
            branch,
            &self.base,
            &self.description,
            &self.input_schema,
            self.output_schema.as_ref(),
            &self.presentation,
        )
    }

    /// What tells two stacks minting one name apart, if anything: identical
    /// prefixes bind once (rule `one-branch-per-prefix`) only if clients would see the same thing.
    pub(super) fn difference(&self, other: &Running) -> Option<&'static str> {
        if self.chain != other.chain {
            Some("chain")
        } else if self.description != other.description {
            Some("description")
        } else if !same_schema(&self.input_schema, &other.input_schema) {
            Some("input schema")
        } else if !match (&self.output_schema, &other.output_schema) {
            (Some(this), Some(other)) => same_schema(this, other),
            (this, other) => this.is_none() && other.is_none(),
        } {
            Some("output schema")
        } else {
            None
        }
    }

    /// A stand-in for the next layer input after a refused element, so building the
    /// rest of a doomed combo can go on (it will not be bound).
    pub(super) fn past(&self, element: &Element) -> Running {
        Running {
            name: element.branch.clone(),
            ..self.clone()
        }
    }

    pub(super) fn into_info(self) -> ToolInfo {
        ToolInfo {
            name: self.name,
            base: self.base,
            chain: self.chain.to_vec(),
            description: self.description.to_string(),
            input_schema: self.input_schema,
            output_schema: self.output_schema,
            presentation: self.presentation,
        }
    }
}

/// Whether two shared schemas are equal: the same one, mostly (comparing a schema
/// with itself would walk all of it).
fn same_schema(this: &Arc<Schema>, other: &Arc<Schema>) -> bool {
    Arc::ptr_eq(this, other) || this == other
}
