//! The binding engine: one fold over a combo's elements, shared by typed combos and
//! run-time (manifest) combos.
//!
//! A combo is folded element by element into a [`Running`] view of the layer input
//! (name, description, schemas, chain); each step applies the rules of
//! `bind::rules` in the rulebook's order. A tool's combos are then merged into one set of
//! bound names (identical prefixes once, clashes refused) or refused as a whole.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use schemars::Schema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::context::{CallName, Context};
use crate::error::BindError;
use crate::extension::{ConfigError, LayerInput, Placement};
use crate::kind::ExtensionKind;
use crate::name::InvalidName;
use crate::name::Name;
use crate::stack::ErasedStack;
use crate::stack::erased::DynStack;
use crate::tool::{BaseTool, Presentation, ToolSpec};

pub(crate) mod element;
pub(crate) mod rules;
mod publish;

pub(crate) use publish::check_unique;
pub use publish::{Publish, Published};

pub(crate) use element::{ComboSpec, ElementSpec};

/// One applied element of a bound name's stack: which extension, of which kind,
/// with which config.
///
/// ```
/// use toolgraft::Name;
/// use toolgraft::kind::ExtensionKind;
/// use toolgraft::toolset::Link;
/// use toolgraft::extension::Placement;
/// let link = Link {
///     extension: Name::new("cache")?,
///     kind: ExtensionKind::Wrapper,
///     placement: Placement::Anywhere,
///     config: None,
/// };
/// assert_eq!(link.to_string(), "cache");
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Link {
    /// The extension's name.
    pub extension: Name,
    /// Its kind.
    pub kind: ExtensionKind,
    /// Where it must run: anywhere, beside the body (inside any relocating
    /// extension) or beside the caller (outside any).
    pub placement: Placement,
    /// The author config it was applied with, if any.
    pub config: Option<Value>,
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.config {
            Some(config) => write!(
                f,
                "{}{}",
                self.extension,
                crate::error::shorten_json(config)
            ),
            None => write!(f, "{}", self.extension),
        }
    }
}

/// Where a layer (or the body) of a bound name runs.
///
/// ```
/// use toolgraft::Name;
/// use toolgraft::toolset::Site;
/// assert_eq!(Site::Caller.to_string(), "caller");
/// assert_eq!(Site::Relocated { by: Name::new("pool")? }.to_string(), "via pool");
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Site {
    /// In the process (and task) that received the call.
    Caller,
    /// Wherever the relocating extension `by` runs its layer input.
    Relocated {
        /// The relocating extension.
        by: Name,
    },
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Site::Caller => f.write_str("caller"),
            Site::Relocated { by } => write!(f, "via {by}"),
        }
    }
}

/// What a client sees of one bound name, and where it came from.
///
/// ```
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::Trace;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
/// let shout = Tool::builder().name("shout").description("Return the text.")
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((shout.combo().with(Trace),))?;
/// let info = toolset.info("shout_trace").unwrap();
/// assert_eq!((info.base.as_str(), info.is_branch()), ("shout", true));
/// assert_eq!(info.input_schema, toolset.info("shout").unwrap().input_schema);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolInfo {
    /// The bound name.
    pub name: Name,
    /// The base tool it belongs to (itself, for a base).
    pub base: Name,
    /// The extensions applied to the base, innermost first (empty for a base).
    pub chain: Vec<Link>,
    /// The running description.
    pub description: String,
    /// The input schema clients see (shared: branches often present the same one).
    pub input_schema: Arc<Schema>,
    /// The output schema, when this name has one ([output-schema](crate::rulebook#output-schema)).
    pub output_schema: Option<Arc<Schema>>,
    /// The base's title, annotations and protocol fields: every branch presents
    /// what its base does.
    pub presentation: Arc<Presentation>,
}

impl ToolInfo {
    /// Whether an extension minted this name.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// assert!(toolset.info("shout_trace").unwrap().is_branch());
    /// assert!(!toolset.info("shout").unwrap().is_branch());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_branch(&self) -> bool {
        !self.chain.is_empty()
    }

    /// Where each layer of the chain runs, innermost first: inside a relocating
    /// extension, it runs wherever that one sends it.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// assert_eq!(toolset.info("shout_trace").unwrap().sites(), [toolgraft::toolset::Site::Caller]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sites(&self) -> Vec<Site> {
        (0..self.chain.len())
            .map(|layer| self.site_inside(layer + 1))
            .collect()
    }

    /// Where the tool body runs.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// assert_eq!(toolset.info("shout_trace").unwrap().body_site(), toolgraft::toolset::Site::Caller);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn body_site(&self) -> Site {
        self.site_inside(0)
    }

    /// The site of whatever sits inside the chain from `from` outwards: the nearest
    /// relocating element at or after `from` sends it away.
    fn site_inside(&self, from: usize) -> Site {
        match self.chain[from..]
            .iter()
            .find(|link| link.kind.relocates_execution())
        {
            Some(link) => Site::Relocated {
                by: link.extension.clone(),
            },
            None => Site::Caller,
        }
    }
}

/// One combo element, as the engine sees it: typed or from a manifest.
#[derive(Clone, Debug)]
pub(crate) struct Element {
    pub name: Name,
    pub kind: ExtensionKind,
    /// Where the element must run (rules `locality-inside-relocation`, `caller-outside-relocation`).
    pub placement: Placement,
    pub accepts_config: bool,
    /// What the element relies on the tool's hints for (rule `side-effects`).
    pub demand: Option<crate::tool::Demand>,
    /// The config the combo wrote for the element (empty is none): what rule `config`
    /// checks, and the element's identity among a tool's attached combos.
    pub written: Option<Map<String, Value>>,
    /// The reserved params the operator pins, with their values.
    pub pinned: Option<Map<String, Value>>,
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
            accepts_config: false,
            demand: None,
            written: None,
            pinned: None,
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
    /// The reserved params pinned by this layer and those below, with their
    /// values: not in the input schema, refused from callers, passed on every call.
    pub pinned: Arc<Map<String, Value>>,
    pub chain: Arc<[Link]>,
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
            pinned: Arc::default(),
            chain: Arc::new([]),
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

    /// Applies one element (the rulebook's per-layer order: locality, caller side,
    /// config, same name, input rule, output fold, description).
    pub(crate) fn apply(&self, element: &Element) -> Result<Running, BindError> {
        rules::locality(self, element)?;
        rules::caller_side(self, element)?;
        rules::config(self, element)?;
        rules::side_effects(self, element)?;
        rules::new_name(self, element)?;
        let mut input_schema = rules::input_schema(self, element)?;
        let mut pinned = self.pinned.clone();
        if let Some(pins) = element.pinned.as_ref().filter(|pins| !pins.is_empty()) {
            rules::pins(self, element, pins)?;
            let names: Vec<String> = pins.keys().cloned().collect();
            input_schema = Arc::new(crate::schema::without(&input_schema, &names));
            let mut all = Map::clone(&pinned);
            all.extend(pins.clone());
            pinned = Arc::new(all);
        }
        let output_schema = rules::output_schema(self, element)?;
        let description = rules::description(self, element);
        let link = Link {
            extension: element.name.clone(),
            kind: element.kind,
            placement: element.placement,
            config: element.config.clone(),
        };
        let chain = self.chain.iter().cloned().chain([link]).collect();
        Ok(Running {
            name: element.branch.clone(),
            base: self.base.clone(),
            description,
            input_schema,
            output_schema,
            presentation: rules::presentation(self, element),
            pinned,
            chain,
        })
    }

    /// What tells two stacks minting one name apart, if anything: identical
    /// prefixes bind once (rule `one-branch-per-prefix`) only if clients would see the same thing.
    fn difference(&self, other: &Running) -> Option<&'static str> {
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
    fn past(&self, element: &Element) -> Running {
        Running {
            name: element.branch.clone(),
            ..self.clone()
        }
    }

    fn into_info(self) -> ToolInfo {
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

/// A bound name: what clients see, and the stack that serves it.
pub(crate) struct Entry {
    pub info: ToolInfo,
    pub stack: Arc<dyn ErasedStack>,
    /// The context of a call by this name from outside any other call: made once,
    /// so that the common call allocates no context of its own.
    pub called: Context,
    /// The reserved params the operator pinned on this name's layers, with their
    /// values: refused from a caller, passed on every call.
    pub pinned: Arc<Map<String, Value>>,
}

/// A bound name before it is bound: what clients will see, and the stack serving
/// it.
#[derive(Clone)]
pub(crate) struct Minted {
    pub running: Running,
    pub stack: Arc<dyn ErasedStack>,
}

impl Minted {
    /// The base tool itself.
    pub(crate) fn base<B: BaseTool>(base: &B) -> Self {
        Self {
            running: Running::of_base(base.spec()),
            // Decoding through `ErasedStack` keeps the arguments as given, without a
            // copy for a typed tool (`Stack::decode_keeping`).
            stack: Arc::new(base.clone()),
        }
    }

    /// Whether `other` is the same base tool as far as clients could tell: the
    /// same name, description and schemas (two tools of one name in one
    /// binding are refused, unless they are clones of one tool).
    pub(crate) fn same_base(&self, other: &Minted) -> bool {
        self.running.name == other.running.name && self.running.difference(&other.running).is_none()
    }

    /// This name through JSON, to layer run-time extensions over.
    pub(crate) fn dyn_stack(&self) -> DynStack {
        DynStack::erased(self.running.name.clone(), self.stack.clone())
    }

    fn into_entry(self) -> Entry {
        let pinned = self.running.pinned.clone();
        let info = self.running.into_info();
        Entry {
            called: Context::new().with(CallName(info.name.clone())),
            info,
            stack: self.stack,
            pinned,
        }
    }
}

/// A combo attached to a tool: what identifies it (its elements, for "already
/// attached" and "not attached"), and the branches it mints.
#[derive(Clone)]
pub(crate) struct Attached {
    pub elements: ComboSpec,
    pub branches: Vec<Minted>,
}

/// A combo being folded: its elements, one erased stack per prefix, and the first
/// rule it broke. (`pub` only so the sealed [`Combos`](crate::Combos) can name it.)
pub struct ComboDraft {
    base: Name,
    running: Running,
    /// What a finished combo needs of its elements (the whole elements are large,
    /// and binding makes one list per combo).
    elements: Vec<Folded>,
    branches: Vec<Minted>,
    refused: Option<BindError>,
    /// The base tool a typed combo was started from, to bind it from its combos.
    origin: Option<Minted>,
}

impl std::fmt::Debug for ComboDraft {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // How a combo reads: `fetch_proxy_pool [proxy > pool]`.
        write!(f, "{} [", self.name())?;
        for (at, element) in self.elements.iter().enumerate() {
            let separator = if at == 0 { "" } else { " > " };
            write!(f, "{separator}{}", element.name)?;
        }
        f.write_str("]")
    }
}

impl ComboDraft {
    pub(crate) fn new(base: &Running) -> Self {
        Self {
            base: base.base.clone(),
            running: base.clone(),
            elements: Vec::with_capacity(4),
            branches: Vec::with_capacity(4),
            refused: None,
            origin: None,
        }
    }

    /// The draft of a typed combo started from `base`, which it remembers.
    pub(crate) fn typed<B: BaseTool>(base: &B) -> Self {
        let origin = Minted::base(base);
        Self {
            origin: Some(origin.clone()),
            ..Self::new(&origin.running)
        }
    }

    /// The base tool the combo was started from (typed combos only).
    pub(crate) fn origin(&self) -> Option<&Minted> {
        self.origin.as_ref()
    }

    /// The layer input of the next element.
    pub(crate) fn running(&self) -> &Running {
        &self.running
    }

    /// Records a rule broken before the element could be described (a bad name).
    pub(crate) fn refuse(&mut self, error: BindError) {
        self.refused.get_or_insert(error);
    }

    /// Folds `element` in; `stack` serves the branch it mints (`None` when it could
    /// not be built, which the element's recorded problem explains).
    pub(crate) fn push(&mut self, element: Element, stack: Option<Arc<dyn ErasedStack>>) {
        let next = if self.refused.is_some() {
            self.running.past(&element)
        } else {
            match (self.running.apply(&element), stack) {
                (Ok(next), Some(stack)) => {
                    self.branches.push(Minted {
                        running: next.clone(),
                        stack,
                    });
                    next
                }
                (Ok(_), None) => {
                    unreachable!("an element without a stack carries a problem `apply` reports")
                }
                (Err(error), _) => {
                    self.refused = Some(error);
                    self.running.past(&element)
                }
            }
        };
        self.running = next;
        self.elements.push(Folded {
            name: element.name,
            kind: element.kind,
            written: element.written,
            pinned: element.pinned,
        });
    }

    /// How many elements the combo has.
    pub(crate) fn len(&self) -> usize {
        self.elements.len()
    }

    /// Whether a rule already refused the combo.
    pub(crate) fn is_refused(&self) -> bool {
        self.refused.is_some()
    }

    /// The bound name of the whole combo.
    pub(crate) fn name(&self) -> &Name {
        &self.running.name
    }

    /// The attached combo, or the first rule it breaks (whole-combo cardinality
    /// first, then the first refused layer). A draft is attached to the base it
    /// was started from, which it carries: no combo of one tool can reach another.
    pub(crate) fn finish(self) -> Result<Attached, BindError> {
        rules::cardinality(
            &self.base,
            self.elements
                .iter()
                .map(|element| (&element.name, element.kind)),
        )?;
        if let Some(error) = self.refused {
            return Err(error);
        }
        let elements = self
            .elements
            .into_iter()
            .map(|element| ElementSpec {
                name: element.name.as_str().to_owned(),
                config: element.written,
                pin: element.pinned,
            })
            .collect();
        Ok(Attached {
            elements,
            branches: self.branches,
        })
    }
}

/// An element folded into a draft, as [`ComboDraft::finish`] needs it.
struct Folded {
    name: Name,
    kind: ExtensionKind,
    written: Option<Map<String, Value>>,
    pinned: Option<Map<String, Value>>,
}

/// Whether `spec` is the combo `key` (a [`combo_key`]), without making its key.
pub(crate) fn is_combo(key: &[ElementSpec], spec: &[ElementSpec]) -> bool {
    key.len() == spec.len()
        && key.iter().zip(spec).all(|(key, element)| {
            key.name == element.name
                && key.config.as_ref()
                    == element.config.as_ref().filter(|config| !config.is_empty())
                && key.pin.as_ref() == element.pin.as_ref().filter(|pins| !pins.is_empty())
        })
}

/// Config as written, for identity and rule `config`: an empty mapping is no config.
pub(crate) fn written_config(config: Option<&Value>) -> Option<Map<String, Value>> {
    match config? {
        Value::Object(map) if !map.is_empty() => Some(map.clone()),
        Value::Object(_) | Value::Null => None,
        other => Some(Map::from_iter([("value".to_owned(), other.clone())])),
    }
}

/// The identity of a combo as a manifest writes it: an empty config is no config.
pub(crate) fn combo_key(elements: &[ElementSpec]) -> ComboSpec {
    elements
        .iter()
        .map(|element| ElementSpec {
            name: element.name.clone(),
            config: element
                .config
                .as_ref()
                .filter(|config| !config.is_empty())
                .cloned(),
            pin: element
                .pin
                .as_ref()
                .filter(|pins| !pins.is_empty())
                .cloned(),
        })
        .collect()
}

/// Plans one tool: its base and every branch of every combo (rule `one-branch-per-prefix`: identical
/// prefixes once; two stacks minting one name refused). Any broken rule refuses the
/// whole tool (rule `all-or-nothing`).
pub(crate) fn plan_tool(base: &Minted, combos: &[Attached]) -> Result<Vec<Entry>, BindError> {
    let tool = &base.running.base;
    let branches = combos.iter().flat_map(|combo| &combo.branches);
    let names = 1 + branches.clone().count();
    let mut planned = Vec::with_capacity(names);
    planned.push(base.clone());
    // A tool mostly mints a handful of names, which a scan finds sooner than a hash
    // map (and its allocations) would; many combos get the map.
    let mut index: Option<HashMap<Name, usize>> =
        (names > 32).then(|| HashMap::from_iter([(tool.clone(), 0)]));
    for minted in branches {
        let running = &minted.running;
        let found = match &index {
            Some(index) => index.get(&running.name).copied(),
            None => planned
                .iter()
                .position(|planned| planned.running.name == running.name),
        };
        match found {
            Some(at) => {
                if let Some(what) = planned[at].running.difference(running) {
                    let (first, second) = (
                        crate::error::listed(&planned[at].running.chain),
                        crate::error::listed(&running.chain),
                    );
                    let second = if first == second {
                        format!("{second}, with another {what}")
                    } else {
                        second
                    };
                    return Err(BindError::NameClash {
                        tool: tool.clone(),
                        name: running.name.clone(),
                        first,
                        second,
                    });
                }
            }
            None => {
                if let Some(index) = &mut index {
                    index.insert(running.name.clone(), planned.len());
                }
                planned.push(minted.clone());
            }
        }
    }
    Ok(planned.into_iter().map(Minted::into_entry).collect())
}

#[cfg(test)]
mod tests {
    //! The engine on hand-made elements: what a run-time combo can present that a
    //! typed one cannot (the typed path proves these by construction).

    use serde_json::json;

    use super::*;
    use crate::kind::ExtensionKind::{Backend, Transformer, Wrapper};

    fn name(text: &str) -> Name {
        Name::new(text).unwrap()
    }

    fn schema(value: Value) -> Arc<Schema> {
        Arc::new(Schema::try_from(value).unwrap())
    }

    fn shout() -> Running {
        Running::of_base(&ToolSpec {
            name: name("shout"),
            description: "Return the text.".into(),
            input_schema: schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            })),
            output_schema: Some(schema(json!({"type": "string"}))),
            presentation: Default::default(),
        })
    }

    fn element(below: &Running, extension: &str, kind: ExtensionKind) -> Element {
        Element::bare(&name(extension), kind, below)
    }

    fn fold(elements: &[Element]) -> Result<Vec<Running>, BindError> {
        let mut running = shout();
        let mut all = Vec::new();
        for element in elements {
            running = running.apply(element)?;
            all.push(running.clone());
        }
        Ok(all)
    }

    #[test]
    fn cardinality_names_the_kind_and_every_offender_in_order() {
        let base = shout();
        let pool = element(&base, "pool", Backend);
        let other = element(&base, "other_backend", Backend);
        let trace = element(&base, "trace", Wrapper);
        let check = |elements: &[Element]| {
            let kinds: Vec<(&Name, ExtensionKind)> =
                elements.iter().map(|e| (&e.name, e.kind)).collect();
            rules::cardinality(&base.base, kinds.into_iter())
        };
        let err = check(&[pool.clone(), trace.clone(), pool.clone()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a combo of `shout` holds more than one backend: [pool, pool]; a combo allows one backend, so put each in its own combo"
        );
        let err = check(&[pool.clone(), other]).unwrap_err();
        assert!(
            matches!(err, BindError::MultipleOfKind { kind: Backend, ref extensions, .. }
            if extensions.iter().map(Name::as_str).eq(["pool", "other_backend"]))
        );
        assert!(check(&[trace.clone(), pool, trace]).is_ok());
    }

    #[test]
    fn locality_inside_relocation_names_both_and_the_fix() {
        let base = shout();
        let pool = element(&base, "pool", Backend);
        let mut proxy = element(&base, "proxy", Wrapper);
        proxy.placement = Placement::BesideBody;
        let after_pool = base.apply(&pool).unwrap();
        let mut outside = proxy.clone();
        outside.branch = after_pool.name.branch(&outside.name);
        let err = after_pool.apply(&outside).unwrap_err();
        assert_eq!(
            err.to_string(),
            "on `shout`, `proxy` needs to run beside the tool body but sits outside `pool`, which runs the body elsewhere; place `proxy` before `pool`"
        );
        // Inside is fine, and so is a wrapper without the flag outside.
        let inside = base.apply(&proxy).unwrap();
        let mut pool_outside = pool.clone();
        pool_outside.branch = inside.name.branch(&pool.name);
        assert!(inside.apply(&pool_outside).is_ok());
        let mut trace = element(&after_pool, "trace", Wrapper);
        trace.branch = after_pool.name.branch(&trace.name);
        assert!(after_pool.apply(&trace).is_ok());
    }

    #[test]
    fn caller_outside_relocation_names_both_and_the_fix() {
        let base = shout();
        let mut approve = element(&base, "approve", Wrapper);
        approve.placement = Placement::BesideCaller;
        let approved = base.apply(&approve).unwrap();
        let mut pool = element(&approved, "pool", Backend);
        pool.branch = approved.name.branch(&pool.name);
        let err = approved.apply(&pool).unwrap_err();
        assert_eq!(
            err.rule(),
            Some(crate::rulebook::Rule::CallerOutsideRelocation)
        );
        assert_eq!(
            err.to_string(),
            "on `shout`, `approve` needs the caller's session but sits inside `pool`, which would run it on a worker with no caller to ask or report to; place `approve` after `pool`"
        );
        // Outside is fine, and so are wrappers of every other placement inside.
        let pooled = base.apply(&element(&base, "pool", Backend)).unwrap();
        let mut outside = approve.clone();
        outside.branch = pooled.name.branch(&approve.name);
        assert!(pooled.apply(&outside).is_ok());
        for placement in [Placement::Anywhere, Placement::BesideBody] {
            let mut inner = element(&base, "inner", Wrapper);
            inner.placement = placement;
            let wrapped = base.apply(&inner).unwrap();
            let mut pool = element(&wrapped, "pool", Backend);
            pool.branch = wrapped.name.branch(&pool.name);
            assert!(wrapped.apply(&pool).is_ok(), "{placement}");
        }
        // The chain says where each layer must run.
        let outer = pooled.apply(&outside).unwrap();
        let placements: Vec<Placement> = outer.chain.iter().map(|link| link.placement).collect();
        assert_eq!(placements, [Placement::Anywhere, Placement::BesideCaller]);
    }

    #[test]
    fn a_branch_named_like_the_base_is_refused() {
        // A wrapper whose branch would take the base tool's own name: refused.
        let base = shout();
        let mut renamer = element(&base, "renamer", Wrapper);
        renamer.branch = name("shout");
        let err = base.apply(&renamer).unwrap_err();
        assert!(matches!(err, BindError::SameName { .. }));
        assert!(err.to_string().contains("same name"));
    }

    #[test]
    fn config_reaches_only_extensions_that_accept_it() {
        // Config for an extension that takes none is refused unless it is empty.
        let base = shout();
        let mut trace = element(&base, "trace", Wrapper);
        trace.written = written_config(Some(&json!({"x": 1})));
        let err = base.apply(&trace).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`trace` (on `shout`) does not accept config; remove its `config` or leave it empty"
        );
        trace.written = written_config(Some(&json!({})));
        assert!(base.apply(&trace).is_ok());
        trace.written = written_config(Some(&json!({"x": 1})));
        trace.accepts_config = true;
        assert!(base.apply(&trace).is_ok());
    }

    #[test]
    fn a_run_time_wrapper_must_present_its_layer_input_schema() {
        let base = shout();
        // A wrapper presenting `{ txt }` over `shout`'s `{ text }` changed the schema.
        let mut renamer = element(&base, "renamer", Wrapper);
        renamer.presented_input = Some(schema(json!({
            "type": "object", "properties": {"txt": {"type": "string"}}, "required": ["txt"],
        })));
        let err = base.apply(&renamer).unwrap_err();
        assert!(
            err.to_string().starts_with("wrapper changed the schema"),
            "{err}"
        );
        assert!(err.to_string().contains("`txt`"), "{err}");

        // A changed type is a change too.
        renamer.presented_input = Some(schema(json!({
            "type": "object", "properties": {"text": {"type": "integer"}}, "required": ["text"],
        })));
        let err = base.apply(&renamer).unwrap_err();
        assert!(err.to_string().contains("/properties/text/type"), "{err}");

        // The same schema plus declared reserved params binds.
        let mut cache = element(&base, "cache", Wrapper);
        cache.reserved = Some(schema(
            json!({"type": "object", "properties": {"exp": {"type": "number"}}}),
        ));
        cache.presented_input = Some(schema(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}, "exp": {"type": "number"}},
            "required": ["text"],
        })));
        let branch = base.apply(&cache).unwrap();
        assert_eq!(
            branch.input_schema.get("properties").unwrap()["exp"]["type"],
            "number"
        );
    }

    #[test]
    fn an_empty_required_list_equals_an_absent_one() {
        // `ping {}` plus a reserved `exp`, with `required: []` written out, as a
        // run-time wrapper would present it.
        let ping = Running::of_base(&ToolSpec {
            name: name("ping"),
            description: "Answer pong.".into(),
            input_schema: schema(json!({"type": "object", "properties": {}})),
            output_schema: None,
            presentation: Default::default(),
        });
        let mut cache = element(&ping, "cache", Wrapper);
        cache.reserved = Some(schema(
            json!({"type": "object", "properties": {"exp": {"type": "number"}}}),
        ));
        cache.presented_input = Some(schema(json!({
            "type": "object", "properties": {"exp": {"type": "number"}}, "required": [],
        })));
        assert!(ping.apply(&cache).is_ok());
    }

    #[test]
    fn reserved_params_must_be_new_and_inline() {
        let base = shout();
        let mut shadow = element(&base, "shadow", Wrapper);
        shadow.reserved = Some(schema(
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        ));
        let err = base.apply(&shadow).unwrap_err();
        assert_eq!(
            err.to_string(),
            "reserved param `text` already exists: `shadow` on `shout` reserves `text`, which `shout` already takes; rename the reserved param"
        );
        shadow.reserved = Some(schema(json!({
            "type": "object",
            "properties": {"mode": {"$ref": "#/$defs/Mode"}},
            "$defs": {"Mode": {"enum": ["a", "b"]}},
        })));
        assert!(matches!(
            base.apply(&shadow).unwrap_err(),
            BindError::ReservedParamNotInline { .. }
        ));
        // Declared by a non-wrapper, reserved params are ignored.
        let mut backend = element(&base, "remote", Backend);
        backend.reserved = Some(schema(
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        ));
        assert_eq!(
            base.apply(&backend).unwrap().input_schema,
            base.input_schema
        );
    }

    #[test]
    fn transformers_present_concrete_schemas_and_backends_anything() {
        let base = shout();
        let mut transformer = element(&base, "batch", Transformer);
        assert!(matches!(
            base.apply(&transformer).unwrap_err(),
            BindError::TransformerSchemaNotConcrete { .. }
        ));
        transformer.presented_input = Some(schema(json!({"type": "object", "properties": {}})));
        assert!(base.apply(&transformer).is_ok());
        // A backend may present any schema: its branch takes it as it is.
        let mut backend = element(&base, "remote", Backend);
        backend.presented_input = Some(schema(json!({
            "type": "object", "properties": {"other": {"type": "integer"}},
        })));
        let branch = base.apply(&backend).unwrap();
        assert_eq!(branch.input_schema, backend.presented_input.unwrap());
    }

    #[test]
    fn output_schema_folds_by_shape_and_declarations() {
        let base = shout();
        let trace = element(&base, "trace", Wrapper);
        let mut batch = element(&base, "batch", Transformer);
        batch.presented_input = Some(schema(
            json!({"type": "object", "properties": {"items": {}}}),
        ));
        let folded = fold(&[trace.clone(), {
            let mut b = batch.clone();
            b.branch = name("shout_trace_batch");
            b
        }])
        .unwrap();
        assert_eq!(folded[0].output_schema, base.output_schema);
        assert_eq!(folded[1].output_schema, None);
        // A wrapper may not contradict its layer's output schema; it may declare
        // one where its layer has none (after a transformer).
        let mut declaring = element(&base, "typed", Wrapper);
        declaring.declared_output = Some(schema(json!({"type": "object"})));
        assert!(matches!(
            base.apply(&declaring),
            Err(BindError::OutputSchemaContradicts { .. })
        ));
        let after_batch = &folded[1];
        let mut declaring = element(after_batch, "typed", Wrapper);
        declaring.declared_output = Some(schema(json!({"type": "array"})));
        assert_eq!(
            after_batch
                .apply(&declaring)
                .unwrap()
                .output_schema
                .as_deref(),
            declaring.declared_output.as_deref()
        );
    }

    #[test]
    fn per_layer_rules_run_in_spec_order() {
        // Locality before config: an element that breaks both reports locality, as
        // the manifest path must.
        let base = shout();
        let after_pool = base.apply(&element(&base, "pool", Backend)).unwrap();
        let mut proxy = element(&after_pool, "proxy", Wrapper);
        proxy.placement = Placement::BesideBody;
        proxy.written = written_config(Some(&json!({"allow": ["a"]})));
        let err = after_pool.apply(&proxy).unwrap_err();
        assert!(
            matches!(err, BindError::LocalityOutsideRelocation { .. }),
            "{err:?}"
        );
        // Config before the input rule.
        let mut renamer = element(&base, "renamer", Wrapper);
        renamer.written = written_config(Some(&json!({"x": 1})));
        renamer.presented_input =
            Some(schema(json!({"type": "object", "properties": {"txt": {}}})));
        assert!(matches!(
            base.apply(&renamer).unwrap_err(),
            BindError::ConfigNotAccepted { .. }
        ));
    }

    #[test]
    fn a_malformed_layer_schema_is_an_error_not_a_panic() {
        let base = shout();
        let mut odd = element(&base, "odd", Backend);
        odd.presented_input = Some(schema(json!({"type": "object", "properties": 5})));
        let below = base.apply(&odd).unwrap();
        let mut cache = element(&below, "cache", Wrapper);
        cache.reserved = Some(schema(
            json!({"type": "object", "properties": {"exp": {"type": "number"}}}),
        ));
        let err = below.apply(&cache).unwrap_err();
        assert!(matches!(err, BindError::MalformedSchema { .. }), "{err:?}");
        assert!(err.to_string().contains("`properties` is `5`"), "{err}");
    }

    #[test]
    fn required_is_a_set() {
        let base = shout();
        let mut presented = (*base.input_schema).clone();
        presented.insert("required".into(), json!(["text"]));
        let mut two = element(&base, "two", Wrapper);
        two.reserved = Some(schema(
            json!({"type": "object", "properties": {"mode": {"type": "string"}}, "required": ["mode"]}),
        ));
        let mut flipped = presented.clone();
        flipped
            .get_mut("properties")
            .unwrap()
            .as_object_mut()
            .unwrap()
            .insert("mode".into(), json!({"type": "string"}));
        flipped.insert("required".into(), json!(["mode", "text"]));
        two.presented_input = Some(Arc::new(flipped));
        assert!(
            base.apply(&two).is_ok(),
            "`required` in another order is the same schema"
        );
    }
}
