//! How a call's caller can be asked something before the call goes on (a yes to
//! run a tool): the server in front says how in an [`Asker`] (toolgraft-mcp:
//! elicitation, or an input-required result), and an extension asks through it
//! without knowing the protocol. Only where the call arrived: an extension that
//! asks is [`CallerLocal`](crate::extension::CallerLocal).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Entry, InProcess, Unkeyed};
use crate::store::StoreFuture;

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
    fn ask_now(&self, question: Question) -> StoreFuture<'static, Answer>;

    /// The caller's response to the request `key` of an earlier
    /// [`InputRequired`], as it came (untrusted: check its shape), whatever the
    /// request was; `None` when this call brings none under that key.
    fn response(&self, key: &str) -> Option<Value> {
        let _ = key;
        None
    }

    /// The state this call brings back from an earlier [`InputRequired`], as
    /// the caller echoed it (untrusted: seal what must not be forged).
    fn state(&self) -> Option<String> {
        None
    }

    /// Whether the caller can answer `request` ([`InputRequired`]): it
    /// declared the capability it takes (MCP: elicitation, sampling, roots).
    fn can_answer(&self, request: &InputRequest) -> bool {
        let _ = request;
        false
    }
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
    pub fn ask_now(&self, question: Question) -> StoreFuture<'static, Answer> {
        self.0.ask_now(question)
    }

    /// See [`Ask::response`].
    pub fn response(&self, key: &str) -> Option<Value> {
        self.0.response(key)
    }

    /// See [`Ask::state`].
    pub fn state(&self) -> Option<String> {
        self.0.state()
    }

    /// See [`Ask::can_answer`].
    pub fn can_answer(&self, request: &InputRequest) -> bool {
        self.0.can_answer(request)
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

/// One thing a call asks its caller for before it goes on ([`InputRequired`]).
///
/// ```
/// use toolgraft::context::{InputRequest, Question};
/// let ask = InputRequest::Ask(Question::new("Your name?", serde_json::json!({"type": "object"})));
/// assert_eq!(ask.question().map(|q| q.message.as_str()), Some("Your name?"));
/// let roots = InputRequest::protocol("roots/list", serde_json::json!({}));
/// assert_eq!(roots.question(), None);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum InputRequest {
    /// A question for the caller's user (MCP: an elicitation).
    Ask(Question),
    /// A request in the words of the server in front's protocol, which it
    /// passes to the caller as it is (MCP: `sampling/createMessage`,
    /// `roots/list`, with their params).
    Protocol {
        /// The request's method.
        method: String,
        /// Its params.
        params: Value,
    },
}

impl InputRequest {
    /// A request of the protocol's own.
    pub fn protocol(method: impl Into<String>, params: Value) -> Self {
        Self::Protocol {
            method: method.into(),
            params,
        }
    }

    /// The question, when this asks the caller's user.
    pub fn question(&self) -> Option<&Question> {
        match self {
            Self::Ask(question) => Some(question),
            Self::Protocol { .. } => None,
        }
    }
}

/// The answer of a call that needs its caller first: what it asks, each under a
/// key the caller files its response under, and the `state` to send back with
/// the responses. A body or an extension returns it as its error
/// ([`ToolError::extension`](crate::ToolError::extension), or a body's `Err`);
/// the server in front answers the call with it (toolgraft-mcp: an
/// input-required result, or the task waiting for input), and any other caller
/// sees an error that says what is missing. The call comes again with the
/// responses ([`Asker::response`], [`Asker::answered`]) and the state
/// ([`Asker::state`]), both as the caller sent them.
///
/// ```
/// use toolgraft::context::{InputRequest, InputRequired, Question};
/// let needed = InputRequired::ask(
///     "approve",
///     Question::new("Run `delete`?", serde_json::json!({"type": "object"})),
///     "sealed",
/// );
/// assert_eq!(needed.to_string(), "the caller's user must answer first: Run `delete`?");
///
/// let roots = InputRequired::new([("roots".to_owned(), InputRequest::protocol("roots/list", serde_json::json!({})))], None);
/// assert_eq!(roots.to_string(), "the caller must answer first: `roots` (roots/list)");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct InputRequired {
    /// What the call asks, by the key each response is filed under.
    pub requests: BTreeMap<String, InputRequest>,
    /// The state to send back with the responses.
    pub state: Option<String>,
}

impl InputRequired {
    /// The call needs `requests` answered first, and `state` back with them.
    pub fn new(
        requests: impl IntoIterator<Item = (String, InputRequest)>,
        state: Option<String>,
    ) -> Self {
        Self {
            requests: requests.into_iter().collect(),
            state,
        }
    }

    /// The call needs the caller's user to answer `question` (under `key`) first.
    pub fn ask(key: impl Into<String>, question: Question, state: impl Into<String>) -> Self {
        Self::new(
            [(key.into(), InputRequest::Ask(question))],
            Some(state.into()),
        )
    }

    /// The question under `key`, when it asks the caller's user.
    pub fn question(&self, key: &str) -> Option<&Question> {
        self.requests.get(key)?.question()
    }
}

impl fmt::Display for InputRequired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut requests = self.requests.iter();
        if let (Some((_, InputRequest::Ask(question))), 1) = (requests.next(), self.requests.len())
        {
            return write!(
                f,
                "the caller's user must answer first: {}",
                question.message
            );
        }
        f.write_str("the caller must answer first: ")?;
        for (at, (key, request)) in self.requests.iter().enumerate() {
            if at > 0 {
                f.write_str(", ")?;
            }
            match request {
                InputRequest::Ask(question) => write!(f, "`{key}` ({})", question.message)?,
                InputRequest::Protocol { method, .. } => write!(f, "`{key}` ({method})")?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for InputRequired {}
