//! `approve`: the caller's user approves a call before the layers below run.
//!
//! It asks through the call's [`crate::context::Asker`] (the server in
//! front's way to the user; toolgraft-mcp's is MCP elicitation, or an
//! input-required result on protocol 2026-07-28), showing the tool and its
//! arguments, and goes on only on a yes. Where the caller cannot be asked, the
//! call is refused: it fails closed.
//!
//! An approval that comes back with the call (the input-required round trip) is
//! a seal ([`SealKey`]) over the tool, a digest of the arguments, the principal
//! and an expiry, with an id that a [`Ledger`] lets be used once: a tampered,
//! replayed, expired or mismatched one is refused with an [`ApprovalError`].
//! Every replica with the same key and ledger takes what any of them sealed.
//! The seal covers the arguments as the caller sent them where the server in
//! front says ([`Ask::arguments`](crate::context::Ask::arguments)), so a field
//! the input reads but does not write back is covered too. Only a yes spends an
//! approval. The question shows the arguments whole, with every character that
//! could fake a line escaped; arguments over [`MAX_SHOWN`] bytes are refused,
//! never shortened.
//!
//! A call whose layers inside ask their caller after the approval (an
//! [`InputRequired`] of their own) is not approved again: its next round
//! carries a continuation of the approval, sealed and spent once like one, and
//! the layers inside read only their own answers and state.
//!
//! Used once means once per ledger: a [`MemoryLedger`] forgets at a restart
//! (a fleet, or a key kept across restarts, wants a shared ledger such as
//! `toolgraft_jobs::RedisLedger`), and a backend that delivers at least once may
//! still run an approved body twice. Two `approve` layers on one call path file
//! their answers under one key and never both pass on protocol 2026-07-28:
//! bind one.
//!
//! `approve` needs the caller's session, so it is
//! [`crate::extension::CallerLocal`]: it sits outside every backend
//! (rule `caller-outside-relocation`), and the layers below read the approval's
//! id as [`Approval`]; it travels to worker processes with the call.
//!
//! ```
//! use toolgraft::ext::approve::{Approve, SealKey};
//! use toolgraft::ext::Pool;
//! use toolgraft::prelude::*;
//! # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Wipe { disk: String }
//! let wipe = Tool::builder().name("wipe").description("Wipe a disk.")
//!     .body(|wipe: Wipe| async move { Ok(format!("wiped {}", wipe.disk)) }).build()?;
//! let approve = Approve::new(SealKey::new(vec![7; 32])?);
//! let toolset = Toolset::new();
//! toolset.bind((wipe.combo().with(Pool::new(1)?).with(approve),))?;
//! # #[tokio::main(flavor = "current_thread")] async fn main() {}
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod ledger;
mod rounds;
mod seal;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use ledger::{Ledger, MemoryLedger};
use rounds::{Continued, Narrowed};
pub use seal::{KeyTooShort, SealKey};
use seal::{Sealed, Subject};

use crate::Name;
use crate::context::{
    self, Answer, Asker, CallName, Entry, InputRequired, Principal, Question, Reach, Serialized,
    Unkeyed,
};
use crate::error::ToolError;
use crate::extension::{CallerLocal, ConfigError, LayerInput, Next, Stack, Wrap};
use crate::store::StoreError;

/// What the answer to an approval is filed under.
pub const KEY: &str = "approve";

/// The most a question shows of the arguments, in bytes: longer ones are
/// refused, never shortened.
pub const MAX_SHOWN: usize = 8 * 1024;

/// The arguments as the user reads them: compact JSON, with every character
/// that could start a line or turn text around escaped.
fn shown(arguments: &Value) -> String {
    let json = arguments.to_string();
    let mut shown = String::with_capacity(json.len());
    for c in json.chars() {
        let fakes_a_line = matches!(c, '\u{0085}' | '\u{2028}' | '\u{2029}');
        let turns_text = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if fakes_a_line || turns_text || c.is_control() {
            shown.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    shown
}

/// Which tools need an approval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Which {
    /// Every tool it is bound on.
    #[default]
    All,
    /// Tools that may be destructive, as MCP reads their annotations: not
    /// read-only, and not annotated `destructive: false` (MCP's default is
    /// destructive).
    Destructive,
}

/// Whether `approve` notes in its branch's description that it asks (see
/// [`Approve`]).
///
/// ```
/// use toolgraft::ext::approve::{ApproveConfig, Description};
/// let config: ApproveConfig = serde_json::from_str(r#"{"description": "unchanged"}"#)?;
/// assert_eq!(config.description, Description::Unchanged);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Description {
    /// With `tools: all`, the description ends with " (asks the user to approve
    /// each call)", on its last line.
    #[default]
    Noted,
    /// The description is the layer's, as it is.
    Unchanged,
}

/// The operator's config: `{"tools": "all" | "destructive", "message": "..",
/// "expiry_secs": 300, "description": "noted" | "unchanged"}`, every field
/// optional.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveConfig {
    /// Which tools need an approval (default: all).
    #[serde(default)]
    pub tools: Which,
    /// What the user reads before the tool and its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How long an approval asked for by an input-required result stays good,
    /// in seconds: 1 to a day (default 300).
    #[serde(default = "default_expiry_secs")]
    pub expiry_secs: u64,
    /// Whether the branch's description says that it asks (default: noted).
    #[serde(default, skip_serializing_if = "is_noted")]
    pub description: Description,
}

fn is_noted(description: &Description) -> bool {
    *description == Description::Noted
}

fn default_expiry_secs() -> u64 {
    300
}

impl Default for ApproveConfig {
    fn default() -> Self {
        Self {
            tools: Which::All,
            message: None,
            expiry_secs: default_expiry_secs(),
            description: Description::Noted,
        }
    }
}

/// Why an approval did not let a call go on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The user said no, or dismissed the question.
    #[error("the caller's user did not approve the call")]
    Declined,
    /// The caller cannot be asked: no way to reach its user.
    #[error(
        "the call needs the caller's user to approve it, and this caller cannot ask its user (no elicitation, no input-required results)"
    )]
    CannotAsk,
    /// Asking failed on the way.
    #[error("asking the caller's user failed: {0}")]
    AskFailed(#[source] StoreError),
    /// The approval sent back is not one this server sealed as it is.
    #[error("the approval was tampered with: {0}")]
    Tampered(String),
    /// The approval was used already.
    #[error("the approval was used already: each approval is good for one call")]
    Replayed,
    /// The approval expired.
    #[error("the approval expired {ago} s ago: call again to be asked again")]
    Expired {
        /// Seconds since it expired.
        ago: u64,
    },
    /// The approval is for another call.
    #[error("the approval is for {0}")]
    Mismatched(String),
    /// The ledger could not say whether the approval was used.
    #[error("the approval ledger failed: {0}")]
    Ledger(#[source] StoreError),
    /// The arguments are too long to show the user whole.
    #[error(
        "the arguments are {len} bytes as shown, over the {MAX_SHOWN} a question shows whole; an approval covers only what the user can read"
    )]
    TooLongToShow {
        /// Their length, as shown.
        len: usize,
    },
    /// The arguments cannot be written out to be shown and sealed.
    #[error("the arguments cannot be shown: {0}")]
    Unshowable(String),
}

/// The approval a call went on with, for the layers below: its id (one per
/// approval, random). It travels to worker processes with the call.
///
/// ```
/// use toolgraft::context;
/// use toolgraft::ext::approve::Approval;
/// assert!(context::get::<Approval>().is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The approval's id.
    pub id: String,
}

impl Entry for Approval {
    const NAME: &'static str = "toolgraft.approval";
    type Travel = Serialized;
    type Key = Unkeyed;
}

/// The `approve` wrapper (see the [module docs](self)).
///
/// It rewrites its branch's description: with `tools: all` (the default),
/// `approve` appends " (asks the user to approve each call)" to the running
/// description, on its last line (trailing whitespace and line breaks dropped
/// first, so the note never makes a line of its own), because a model reads the
/// description before it calls and may tell its user what is coming. With
/// `tools: destructive` it says nothing there, since whether a tool asks
/// depends on its hints. [`with_description_unchanged`](Approve::with_description_unchanged)
/// (config `"description": "unchanged"`) keeps the description as it is.
///
/// ```
/// use toolgraft::ext::approve::{Approve, SealKey};
/// use toolgraft::prelude::*;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Wipe { disk: String }
/// let wipe = Tool::builder().name("wipe").description("Wipe a disk.")
///     .body(|wipe: Wipe| async move { Ok(wipe.disk) }).build()?;
/// let key = SealKey::new(vec![7; 32])?;
/// let toolset = Toolset::new();
/// toolset.bind((wipe.combo().with(Approve::new(key.clone())),))?;
/// assert_eq!(toolset.info("wipe_approve").unwrap().description,
///     "Wipe a disk. (asks the user to approve each call)");
/// let quiet = Toolset::new();
/// quiet.bind((wipe.combo().with(Approve::new(key).with_description_unchanged()),))?;
/// assert_eq!(quiet.info("wipe_approve").unwrap().description, "Wipe a disk.");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Approve {
    key: SealKey,
    ledger: Arc<dyn Ledger>,
    config: ApproveConfig,
    /// Set per branch: the tool an approval is for, and whether it needs one.
    tool: Option<Name>,
    needed: bool,
}

impl std::fmt::Debug for Approve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approve")
            .field("config", &self.config)
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}

impl Approve {
    /// The most an expiry may be: a day.
    pub const MAX_EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);

    /// Approvals sealed with `key`, used once by this process's memory
    /// ([`MemoryLedger`]), for every tool, expiring after five minutes.
    pub fn new(key: SealKey) -> Self {
        Self {
            key,
            ledger: Arc::new(MemoryLedger::default()),
            config: ApproveConfig::default(),
            tool: None,
            needed: true,
        }
    }

    /// The same, keeping the branch's description as the layer's: no note
    /// that it asks (see [`Approve`]).
    ///
    /// ```
    /// use toolgraft::ext::approve::{Approve, SealKey};
    /// let approve = Approve::new(SealKey::new(vec![7; 32])?).with_description_unchanged();
    /// # let _ = approve;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_description_unchanged(mut self) -> Self {
        self.config.description = Description::Unchanged;
        self
    }

    /// The same, writing used approvals down in `ledger` (one a fleet shares).
    pub fn with_ledger(mut self, ledger: impl Ledger) -> Self {
        self.ledger = Arc::new(ledger);
        self
    }

    /// The same key and ledger with the operator's `config`: what a manifest's
    /// `{"name": "approve", "config": {..}}` gives
    /// (`registry.register(Refined::new(approve, Approve::configured))`).
    ///
    /// ```
    /// use toolgraft::ext::approve::{Approve, ApproveConfig, SealKey, Which};
    /// let approve = Approve::new(SealKey::new(vec![7; 32])?);
    /// let config = ApproveConfig { tools: Which::Destructive, ..ApproveConfig::default() };
    /// assert!(approve.configured(config).is_ok());
    /// let never = ApproveConfig { expiry_secs: 0, ..ApproveConfig::default() };
    /// assert_eq!(approve.configured(never).unwrap_err().field, "expiry_secs");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn configured(&self, config: ApproveConfig) -> Result<Self, ConfigError> {
        let approve = Self {
            config,
            ..self.clone()
        };
        crate::Extension::check_config(&approve)?;
        Ok(approve)
    }

    fn question(&self, tool: &str, arguments: &Value) -> Result<Question, ApprovalError> {
        // Whole, never shortened: the user approves what they read. Characters
        // that could fake a line of the question are escaped.
        let shown = shown(arguments);
        if shown.len() > MAX_SHOWN {
            return Err(ApprovalError::TooLongToShow { len: shown.len() });
        }
        let lead = self
            .config
            .message
            .as_deref()
            .unwrap_or("Approve this call?");
        Ok(Question::new(
            format!("{lead}\n\nTool: {tool}\nArguments: {shown}"),
            json!({
                "type": "object",
                "properties": {
                    "approve": {"type": "boolean", "title": "Approve", "description": format!("Run `{tool}` with these arguments")}
                },
                "required": ["approve"]
            }),
        ))
    }

    /// Decides whether the call may go on: with an approval, after the caller
    /// asks its user, or not (why).
    /// `written` is the input written out, where `asker` does not give the
    /// arguments as sent.
    async fn decide(
        &self,
        asker: Option<Asker>,
        written: Option<Result<Value, String>>,
    ) -> Result<Decision, ApprovalError> {
        let tool = self.tool.as_ref().map_or("", Name::as_str);
        let principal = context::get::<Principal>();
        let asker = asker.ok_or(ApprovalError::CannotAsk)?;
        // What the caller sent, where the server in front has it: a field the
        // input reads but does not write back is covered too.
        let written = written.transpose().map_err(ApprovalError::Unshowable)?;
        let arguments = match (asker.arguments(), &written) {
            (Some(sent), _) => sent,
            (None, Some(written)) => written,
            (None, None) => return Err(ApprovalError::Unshowable("no arguments".to_owned())),
        };
        let subject = Subject::new(tool, arguments, principal.as_ref().map(Principal::as_str));
        // A round after the approval: the layers inside asked their caller.
        if let Some(continued) = asker.state().as_deref().and_then(Continued::parse) {
            let now = seal::now();
            let sealed = self.key.open(&continued.approved, &subject, now)?;
            let granted = sealed.granted.clone().ok_or_else(|| {
                ApprovalError::Tampered("the state is not a continuation".to_owned())
            })?;
            if !self
                .ledger
                .redeem(&sealed.id, sealed.expires, now)
                .await
                .map_err(ApprovalError::Ledger)?
            {
                return Err(ApprovalError::Replayed);
            }
            return Ok(Decision::Go {
                approval: Approval { id: granted },
                subject,
                inner: Some(continued.inner),
            });
        }
        if let Some(answered) = asker.answered(KEY) {
            let state = answered.state.ok_or_else(|| {
                ApprovalError::Tampered("the answer came without its state".to_owned())
            })?;
            let now = seal::now();
            let sealed = self.key.open(&state, &subject, now)?;
            if sealed.granted.is_some() {
                return Err(ApprovalError::Tampered(
                    "a continuation is not an approval to answer".to_owned(),
                ));
            }
            // Only a yes spends the approval: a no runs nothing, and spending it
            // would let declined round trips fill the ledger.
            let approval = approved(&answered.answer, sealed.id.clone())?;
            let first = self
                .ledger
                .redeem(&sealed.id, sealed.expires, now)
                .await
                .map_err(ApprovalError::Ledger)?;
            if !first {
                return Err(ApprovalError::Replayed);
            }
            // The state was approve's: the layers inside have none of theirs.
            return Ok(Decision::Go {
                approval,
                subject,
                inner: Some(None),
            });
        }
        // The user reads the name the caller called (a published one, say).
        let called = context::get::<CallName>().map(|name| name.0);
        let question = self.question(called.as_ref().map_or(tool, Name::as_str), arguments)?;
        match asker.reach() {
            Reach::Now => {
                let answer = asker
                    .ask_now(question)
                    .await
                    .map_err(ApprovalError::AskFailed)?;
                let approval = approved(&answer, seal::new_id()?)?;
                Ok(Decision::Go {
                    approval,
                    subject,
                    inner: None,
                })
            }
            Reach::Later => {
                let sealed = Sealed {
                    id: seal::new_id()?,
                    subject,
                    expires: seal::now().saturating_add(self.config.expiry_secs),
                    granted: None,
                };
                Ok(Decision::Ask(InputRequired::ask(
                    KEY,
                    question,
                    self.key.seal(&sealed),
                )))
            }
            Reach::Not => Err(ApprovalError::CannotAsk),
        }
    }
}

/// What [`Approve::decide`] decided.
enum Decision {
    /// Go on with this approval, for the call `subject`; the layers inside see
    /// `inner` as their state where it is set (the caller's state was
    /// `approve`'s), the caller's own otherwise.
    Go {
        approval: Approval,
        subject: Subject,
        inner: Option<Option<String>>,
    },
    /// Answer the call with this question first.
    Ask(InputRequired),
}

fn approved(answer: &Answer, id: String) -> Result<Approval, ApprovalError> {
    match answer.field("approve") {
        Some(Value::Bool(true)) => Ok(Approval { id }),
        _ => Err(ApprovalError::Declined),
    }
}

impl crate::Extension for Approve {
    type Kind = crate::kind::Wrapper;
    type Locality = CallerLocal;

    fn name(&self) -> &str {
        KEY
    }

    fn describe(&self, running: &str) -> Option<String> {
        // Said only where it holds for every tool: the description is read before
        // the branch (and its annotations) is. On the description's last line:
        // MCP clients show a description as it is, and a note on a line of its
        // own reads as part of something else.
        (self.config.tools == Which::All && self.config.description == Description::Noted).then(
            || {
                format!(
                    "{} (asks the user to approve each call)",
                    running.trim_end()
                )
            },
        )
    }

    fn config(&self) -> Option<Value> {
        serde_json::to_value(&self.config).ok()
    }

    fn check_config(&self) -> Result<(), ConfigError> {
        let secs = self.config.expiry_secs;
        if secs == 0 || secs > Self::MAX_EXPIRY.as_secs() {
            return Err(ConfigError::new(
                "expiry_secs",
                format!(
                    "{secs} is out of range: use 1 to {} seconds",
                    Self::MAX_EXPIRY.as_secs()
                ),
            ));
        }
        Ok(())
    }
}

impl<S: Stack<Input: Serialize>> Wrap<S> for Approve {
    type Params = ();

    fn for_branch(mut self, below: &LayerInput<'_, Self>) -> Self {
        let annotations = &below.presentation.annotations;
        self.needed = match self.config.tools {
            Which::All => true,
            Which::Destructive => {
                annotations.read_only != Some(true) && annotations.destructive != Some(false)
            }
        };
        self.tool = Some(below.branch.clone());
        self
    }

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        if !self.needed {
            return next.call(input).await;
        }
        // Written out only where the server in front does not give the
        // arguments as sent.
        let asker = context::get::<Asker>();
        let written = asker
            .as_ref()
            .is_some_and(|asker| asker.arguments().is_none())
            .then(|| serde_json::to_value(&input).map_err(|error| error.to_string()));
        let extension = Name::lossy(KEY);
        let name = next.name().clone();
        match self.decide(asker.clone(), written).await {
            Ok(Decision::Go {
                approval,
                subject,
                inner,
            }) => {
                let granted = approval.id.clone();
                let call = context::with(approval, next.call(input));
                let outcome = match (inner, asker) {
                    (Some(state), Some(outer)) => {
                        context::with(Asker::new(Narrowed { outer, state }), call).await
                    }
                    _ => call.await,
                };
                let Err(error) = outcome else {
                    return outcome;
                };
                // The layers inside ask their caller: the next round goes on
                // without asking the user again, once.
                let Some(needed) = rounds::asked_inside(&error) else {
                    return Err(error);
                };
                let continuation = Sealed {
                    id: seal::new_id().map_err(|error| {
                        ToolError::extension(name.clone(), extension.clone(), error)
                    })?,
                    subject,
                    expires: seal::now().saturating_add(self.config.expiry_secs),
                    granted: Some(granted),
                };
                let state = Continued {
                    approved: self.key.seal(&continuation),
                    inner: needed.state,
                };
                let asked = InputRequired::new(needed.requests, Some(state.to_state()));
                Err(ToolError::extension(name, extension, asked))
            }
            Ok(Decision::Ask(needed)) => Err(ToolError::extension(name, extension, needed)),
            Err(error) => Err(ToolError::extension(name, extension, error)),
        }
    }
}
