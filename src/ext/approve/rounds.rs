//! Calls that ask their caller again after `approve` let them through: the
//! layers inside asked for input of their own ([`InputRequired`]), so the call
//! comes back, and the user must not be asked to approve it a second time, nor
//! may a copy of that round run it twice.
//!
//! `approve` answers such a round with the inner requests and a state of two
//! parts: a continuation seal (the approval given, for this tool, these
//! arguments, this principal, until the expiry; spent once, like an approval)
//! and the inner layers' own state. The next round opens the continuation and
//! passes the inner state on; the layers inside see only their own state and
//! answers ([`Narrowed`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::{Answer, Answered, Ask, Asker, InputRequest, InputRequired, Question, Reach};

use super::KEY;

/// The state of a round after an approval: what `approve` keeps, and what the
/// layers inside do.
#[derive(Serialize, Deserialize)]
pub(super) struct Continued {
    /// The continuation seal.
    #[serde(rename = "toolgraft.approve")]
    pub approved: String,
    /// The inner layers' state.
    #[serde(default)]
    pub inner: Option<String>,
}

impl Continued {
    /// The continuation a state is, if it is one.
    pub(super) fn parse(state: &str) -> Option<Self> {
        serde_json::from_str(state).ok()
    }

    /// The state to send: always an object with a seal, never a plain seal.
    pub(super) fn to_state(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The caller as the layers inside an approval see it: their own state (not
/// `approve`'s), and no answer to `approve`'s question once it was spent.
pub(super) struct Narrowed {
    pub outer: Asker,
    pub state: Option<String>,
}

impl Ask for Narrowed {
    fn answered(&self, key: &str) -> Option<Answered> {
        if key == KEY {
            return None;
        }
        let mut answered = self.outer.answered(key)?;
        answered.state.clone_from(&self.state);
        Some(answered)
    }

    fn reach(&self) -> Reach {
        self.outer.reach()
    }

    fn arguments(&self) -> Option<&Value> {
        None
    }

    fn ask_now(&self, question: Question) -> crate::store::StoreFuture<'static, Answer> {
        self.outer.ask_now(question)
    }

    fn response(&self, key: &str) -> Option<Value> {
        (key != KEY).then(|| self.outer.response(key)).flatten()
    }

    fn state(&self) -> Option<String> {
        self.state.clone()
    }

    fn can_answer(&self, request: &InputRequest) -> bool {
        self.outer.can_answer(request)
    }
}

/// The request for input the layers inside answered with, if that is what they
/// answered with.
pub(super) fn asked_inside(error: &crate::ToolError) -> Option<InputRequired> {
    error.downcast_ref::<InputRequired>().cloned()
}
