//! One task's record in the table, and what it is at ([`Status`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{InputResponses, JsonObject};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use toolgraft::context::Principal;

use super::settled::{Resume, error_object};

#[derive(Default)]
pub(super) struct Records {
    pub(super) by_id: HashMap<String, Record>,
    /// Ids in the order they were made: every task lives as long, so the
    /// oldest expire first and expiring never looks past the first live one.
    pub(super) by_age: VecDeque<(Instant, String)>,
}

pub(super) struct Record {
    pub(super) created: Instant,
    pub(super) created_at: String,
    pub(super) updated_at: String,
    pub(super) principal: Option<Principal>,
    pub(super) status: Status,
    /// What the task's calls see as their request's cancellation: cancelled
    /// with the task (the request the call came in answered long ago).
    pub(super) cancel: CancellationToken,
    pub(super) running: Option<AbortHandle>,
    /// Whether the reserved place became a task.
    pub(super) begun: bool,
    /// Until the task ends.
    pub(super) resume: Option<Resume>,
    /// How many times the call asked for input: keys of later rounds are
    /// renamed, so an answer meant for an earlier round never answers a later one.
    pub(super) rounds: u32,
    /// The call's last report of its progress.
    pub(super) message: Option<String>,
}

pub(super) enum Status {
    Working,
    Waiting {
        /// By the key the client answers under: the call's key and its request.
        pending: BTreeMap<String, (String, rmcp::model::InputRequest)>,
        /// By the call's key.
        answered: InputResponses,
        state: Option<String>,
    },
    Completed(Arc<JsonObject>),
    Failed(Arc<JsonObject>),
    Cancelled,
}

impl Status {
    pub(super) fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed(_) | Self::Failed(_) | Self::Cancelled)
    }
}

pub(super) fn failed(message: &'static str) -> Status {
    Status::Failed(Arc::new(error_object(&ErrorData::internal_error(
        message, None,
    ))))
}
