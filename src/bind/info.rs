//! What a client sees of a bound name: its chain of links and where each runs.

use std::fmt;
use std::sync::Arc;

use schemars::Schema;
use serde::Serialize;
use serde_json::Value;

use crate::extension::{AccessRole, Placement};
use crate::kind::ExtensionKind;
use crate::name::Name;
use crate::tool::Presentation;

/// One applied element of a bound name's stack: which extension, of which kind,
/// with which config.
///
/// ```
/// use toolgraft::Name;
/// use toolgraft::kind::ExtensionKind;
/// use toolgraft::toolset::Link;
/// use toolgraft::extension::{AccessRole, Placement};
/// let link = Link {
///     extension: Name::new("cache")?,
///     kind: ExtensionKind::Wrapper,
///     placement: Placement::Anywhere,
///     access: AccessRole::SharesAnswers,
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
    /// Whether it decides who may call, or answers from what it kept (rule
    /// `shared-answers-inside-authorization`); left out of the JSON when neither.
    #[serde(skip_serializing_if = "AccessRole::is_neutral")]
    pub access: AccessRole,
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
