//! A combo being folded, element by element, into the branches it mints.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::element::ElementSpec;
use super::plan::{Attached, Minted};
use super::rules;
use super::running::{Element, Running};
use crate::error::BindError;
use crate::kind::ExtensionKind;
use crate::name::Name;
use crate::stack::ErasedStack;
use crate::tool::BaseTool;

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
            hidden: element.hidden,
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
                hide: element.hidden,
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
    hidden: Option<Vec<String>>,
}
