//! What the registry keeps under a name: a factory of elements over the layer below.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::bind::{Element, Running};
use crate::kind::ExtensionKind;
use crate::name::Name;
use crate::stack::ErasedStack;
use crate::stack::erased::DynStack;

/// What the registry does with a name.
pub(super) trait Factory: Send + Sync + 'static {
    fn kind(&self) -> ExtensionKind;

    /// The element for `config` (as written, an empty one already dropped) over the
    /// layer input `below`, and its branch's stack (`None` when it could not be
    /// built; the element's problem says why).
    fn apply(
        &self,
        name: &Name,
        config: Option<&Map<String, Value>>,
        below: &Running,
        stack: DynStack,
    ) -> (Element, Option<Arc<dyn ErasedStack>>);
}
