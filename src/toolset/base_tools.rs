//! [`BaseTools`]: base tools offered by name to [`Toolset::bind_manifest`].

use crate::bind::Minted;
use crate::name::Name;
use crate::tool::BaseTool;

#[cfg(doc)]
use super::Toolset;

/// Base tools offered to [`Toolset::bind_manifest`], by name, type-erased.
///
/// ```
/// use toolgraft::Tool;
/// use toolgraft::toolset::BaseTools;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
/// let shout = Tool::builder().name("shout").description("Return the text.").read_only()
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let bases = BaseTools::new().with(&shout);
/// assert_eq!(bases.names(), ["shout"]);
/// # Ok::<(), toolgraft::error::InvalidName>(())
/// ```
#[derive(Clone, Default)]
pub struct BaseTools {
    pub(super) tools: Vec<Minted>,
}

impl std::fmt::Debug for BaseTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("BaseTools").field(&self.names()).finish()
    }
}

impl BaseTools {
    /// No tools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `base` (see the type's example).
    pub fn add<B: BaseTool>(&mut self, base: &B) -> &mut Self {
        self.tools.push(Minted::base(base));
        self
    }

    /// Adds `base`, by value (see the type's example).
    pub fn with<B: BaseTool>(mut self, base: &B) -> Self {
        self.add(base);
        self
    }

    /// The tools' names, in the order they were added.
    pub fn names(&self) -> Vec<Name> {
        self.tools
            .iter()
            .map(|base| base.running.base.clone())
            .collect()
    }
}
