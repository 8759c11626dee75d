//! Hints about what calling a tool does (MCP's tool annotations), as values, and
//! what an extension relies on them for: the facts rule `side-effects` in the
//! [rulebook](crate::rulebook) reads, below the errors that report it.

use serde::Serialize;

/// Hints about what calling a tool does, as MCP's tool annotations say them
/// (`readOnlyHint` and the rest): hints for a client, which a client must not
/// trust from a server it does not trust. `None` is "not said".
///
/// ```
/// use toolgraft::tool::Annotations;
/// let hints = Annotations { destructive: Some(true), ..Annotations::default() };
/// assert!(!hints.is_empty());
/// assert!(Annotations::default().is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Annotations {
    /// A title for the annotations' own use (MCP keeps one here too, beside the
    /// tool's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool changes nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The tool may destroy or overwrite (meaningful when not read-only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// Calling it twice with the same arguments does no more than once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// The tool reaches things outside the server (the web, other systems).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl Annotations {
    /// Whether no hint is said.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What an extension relies on a tool's hints for: what it does with the calls it
/// is given (rule `side-effects` in the [rulebook](crate::rulebook)).
///
/// ```
/// use toolgraft::tool::{Annotations, Demand};
/// let read_only = Annotations { read_only: Some(true), ..Annotations::default() };
/// let deletes = Annotations { idempotent: Some(true), destructive: Some(true), ..Annotations::default() };
/// let puts = Annotations { idempotent: Some(true), destructive: Some(false), ..Annotations::default() };
/// let unsaid = Annotations { idempotent: Some(true), ..Annotations::default() };
/// assert!(read_only.allow(Demand::Repeatable) && read_only.allow(Demand::Skippable));
/// assert!(deletes.allow(Demand::Repeatable) && !deletes.allow(Demand::Skippable));
/// assert!(puts.allow(Demand::Skippable));
/// // MCP reads an unsaid `destructiveHint` as destructive.
/// assert!(unsaid.allow(Demand::Repeatable) && !unsaid.allow(Demand::Skippable));
/// assert!(!Annotations::default().allow(Demand::Repeatable));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Demand {
    /// It makes a call again with the same arguments (`retry`): the tool must be
    /// read-only or idempotent, so that two calls do no more than one.
    Repeatable,
    /// It answers some calls without making them (`cache`): the tool must be
    /// read-only, or idempotent and said not destructive (`destructiveHint:
    /// false`; MCP reads an unsaid one as destructive), so that a call not made
    /// loses nothing.
    Skippable,
}

impl Demand {
    /// What the demand promises in words, as errors say it.
    pub(crate) fn needs(self) -> &'static str {
        match self {
            Self::Repeatable => "read-only or idempotent",
            Self::Skippable => "read-only, or idempotent and not destructive",
        }
    }
}

impl Annotations {
    /// Whether these hints allow what `demand` does. Only hints said count: MCP's
    /// defaults for a tool that says nothing are "may change things, may destroy,
    /// not idempotent".
    pub fn allow(&self, demand: Demand) -> bool {
        // The hints as MCP reads them: the defaults are written once, there.
        let read = self.with_mcp_defaults();
        let [read_only, destructive, idempotent] =
            [read.read_only, read.destructive, read.idempotent].map(|hint| hint == Some(true));
        match demand {
            Demand::Repeatable => read_only || idempotent,
            Demand::Skippable => read_only || (idempotent && !destructive),
        }
    }

    /// These hints with each one `other` says replacing this one's: what a
    /// manifest's `"annotations"` do to a tool's own.
    ///
    /// ```
    /// use toolgraft::tool::Annotations;
    /// let own = Annotations { read_only: Some(false), open_world: Some(true), ..Annotations::default() };
    /// let said = Annotations { read_only: Some(true), ..Annotations::default() };
    /// let hints = own.overridden_by(&said);
    /// assert_eq!((hints.read_only, hints.open_world), (Some(true), Some(true)));
    /// ```
    pub fn overridden_by(&self, other: &Annotations) -> Self {
        Self {
            title: other.title.clone().or_else(|| self.title.clone()),
            read_only: other.read_only.or(self.read_only),
            destructive: other.destructive.or(self.destructive),
            idempotent: other.idempotent.or(self.idempotent),
            open_world: other.open_world.or(self.open_world),
        }
    }

    /// These hints with each one not said as MCP reads it: `readOnlyHint`
    /// false, `destructiveHint` true, `idempotentHint` false, `openWorldHint`
    /// true (the defaults of MCP's specification). What a manifest's `"match"`
    /// compares its conditions with.
    ///
    /// ```
    /// use toolgraft::tool::Annotations;
    /// let said = Annotations { read_only: Some(true), ..Annotations::default() };
    /// let read = said.with_mcp_defaults();
    /// assert_eq!(read.read_only, Some(true));
    /// assert_eq!((read.destructive, read.idempotent, read.open_world), (Some(true), Some(false), Some(true)));
    /// ```
    pub fn with_mcp_defaults(&self) -> Self {
        Self {
            title: self.title.clone(),
            read_only: Some(self.read_only.unwrap_or(false)),
            destructive: Some(self.destructive.unwrap_or(true)),
            idempotent: Some(self.idempotent.unwrap_or(false)),
            open_world: Some(self.open_world.unwrap_or(true)),
        }
    }

    /// The hints of a transformer's branch: a new tool, of which the base's hints
    /// about side effects say nothing (a `chain` also calls another tool, a
    /// `batch` calls many times). What is not about side effects is kept.
    pub(crate) fn of_new_tool(&self) -> Self {
        Self {
            title: self.title.clone(),
            open_world: self.open_world,
            read_only: None,
            destructive: None,
            idempotent: None,
        }
    }
}
