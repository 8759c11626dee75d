//! How a call's caller can be asked something before the call goes on (a yes to
//! run a tool): the server in front says how in an [`Asker`] (toolgraft-mcp:
//! elicitation, or an input-required result), and an extension asks through it
//! without knowing the protocol. Only where the call arrived: an extension that
//! asks is [`CallerLocal`](crate::extension::CallerLocal).

use std::fmt;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};

use super::{Entry, InProcess, Unkeyed};

/// What to ask the caller's user: a message for people and the schema of the
/// answer (an object of primitive properties, what MCP elicitation takes).
///
/// ```
/// use toolgraft::context::Question;
/// let question = Question::new("Delete 3 files?", serde_json::json!({"type": "object"}));
/// assert_eq!(question.message, "Delete 3 files?");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Question {
    /// What the user reads.
    pub message: String,
    /// The JSON Schema of the answer.
    pub schema: Value,
}

impl Question {
    /// A question with its answer's schema.
    pub fn new(message: impl Into<String>, schema: Value) -> Self {
        Self {
            message: message.into(),
            schema,
        }
    }
}

/// What the caller's user answered.
///
/// ```
/// use toolgraft::context::Answer;
/// let answer = Answer::Accept(serde_json::from_value(serde_json::json!({"approve": true}))?);
/// assert_eq!(answer.field("approve"), Some(&serde_json::json!(true)));
/// assert_eq!(Answer::Decline.field("approve"), None);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The user answered, with these fields.
    Accept(Map<String, Value>),
    /// The user said no.
    Decline,
    /// The user dismissed the question.
    Cancel,
}

impl Answer {
    /// A field of an accepted answer.
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Self::Accept(fields) => fields.get(name),
            Self::Decline | Self::Cancel => None,
        }
    }
}

/// An answer that came with the call itself: the caller was asked by an
/// earlier answer of this call ([`InputRequired`]) and called again with the
/// user's answer and the state that answer carried, as it was sent (untrusted).
#[derive(Clone, Debug, PartialEq)]
pub struct Answered {
    /// The user's answer.
    pub answer: Answer,
    /// The state the earlier answer carried, echoed by the caller.
    pub state: Option<String>,
}

/// How the caller of the current call can be asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Within the call: the server asks and waits (MCP elicitation).
    Now,
    /// By answering the call with the question ([`InputRequired`]); the caller
    /// asks its user and calls again with the answer (MCP input-required results).
    Later,
    /// Not at all: the caller cannot ask its user.
    Not,
}

/// The server in front's way to the caller's user, for one call: what an
/// [`Asker`] holds (toolgraft-mcp's asks by MCP elicitation, or by an
/// input-required result).
pub trait Ask: Send + Sync + 'static {
    /// The answer to the question `key` this call brings, when it is the call
    /// again after an [`InputRequired`].
    fn answered(&self, key: &str) -> Option<Answered>;

    /// How the caller can be asked.
    fn reach(&self) -> Reach;

    /// The arguments of the call as the caller sent them (what an approval must
    /// cover, rather than what a decoded input writes back); `None` when the
    /// server in front has none to give.
    fn arguments(&self) -> Option<&serde_json::Value> {
        None
    }

    /// Asks now and waits for the answer ([`Reach::Now`]); an error says why
    /// no answer came.
    fn ask_now(&self, question: Question) -> BoxFuture<'static, Result<Answer, String>>;
}

/// The current call's [`Ask`], as a context entry: set by the server in front,
/// read by an extension that asks. It reaches worker threads and stays behind at
/// a process boundary (the extensions that use it sit outside every backend).
///
/// ```
/// use toolgraft::context::{self, Asker, Reach};
/// assert!(context::get::<Asker>().is_none(), "outside a call, nobody can be asked");
/// ```
#[derive(Clone)]
pub struct Asker(Arc<dyn Ask>);

impl Asker {
    /// The entry for `ask`.
    pub fn new(ask: impl Ask) -> Self {
        Self(Arc::new(ask))
    }

    /// See [`Ask::answered`].
    pub fn answered(&self, key: &str) -> Option<Answered> {
        self.0.answered(key)
    }

    /// See [`Ask::reach`].
    pub fn reach(&self) -> Reach {
        self.0.reach()
    }

    /// See [`Ask::arguments`].
    pub fn arguments(&self) -> Option<&serde_json::Value> {
        self.0.arguments()
    }

    /// See [`Ask::ask_now`].
    pub fn ask_now(&self, question: Question) -> BoxFuture<'static, Result<Answer, String>> {
        self.0.ask_now(question)
    }
}

impl fmt::Debug for Asker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Asker").field(&self.0.reach()).finish()
    }
}

impl Entry for Asker {
    const NAME: &'static str = "toolgraft.asker";
    type Travel = InProcess;
    type Key = Unkeyed;
}

/// The answer of a call that needs its caller's user first: the question, under
/// `key`, and the `state` to send back with the answer. An extension returns it
/// as its error ([`ToolError::extension`](crate::ToolError::extension)); the
/// server in front answers the call with it (toolgraft-mcp: an input-required
/// result), and any other caller sees an error that says what is missing.
///
/// ```
/// use toolgraft::context::{InputRequired, Question};
/// let needed = InputRequired {
///     key: "approve".into(),
///     question: Question::new("Run `delete`?", serde_json::json!({"type": "object"})),
///     state: "sealed".into(),
/// };
/// assert_eq!(needed.to_string(), "the caller's user must answer first: Run `delete`?");
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("the caller's user must answer first: {}", question.message)]
pub struct InputRequired {
    /// What the answer is filed under when the caller sends it.
    pub key: String,
    /// The question.
    pub question: Question,
    /// The state to send back with the answer.
    pub state: String,
}
