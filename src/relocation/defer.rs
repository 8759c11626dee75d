//! Calls the caller follows later, by id: a backend that leaves its job running
//! in a store every process of a fleet reads (toolgraft-jobs' `remote`) defers a
//! call when the server in front offers it ([`Deferral`]), answering at once
//! with [`Deferred`] instead of waiting; the server then follows the job
//! through the backend's [`Follow`] (toolgraft-mcp: an MCP task whose id any
//! replica answers for).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::context::{Entry, Keyed, Principal, Stays};
use crate::error::ToolError;
use crate::store::StoreFuture;

/// The server in front's offer to follow the current call later, by the job of
/// one of the backends it follows ([`Follow::follower`]), as a context entry:
/// taken by the first such backend that defers (once: a layer that calls the
/// one below twice waits for its second call as usual). A cache inside keys on
/// it: a call followed later never shares an answer with one waited for.
///
/// ```
/// use toolgraft::relocation::Deferral;
/// let offer = Deferral::offer(["remote:reports".to_owned()]);
/// assert!(!offer.take("remote:other"), "not a backend the server follows");
/// assert!(offer.take("remote:reports"));
/// assert!(!offer.take("remote:reports"), "taken once");
/// ```
#[derive(Clone, Debug)]
pub struct Deferral {
    followers: Arc<[String]>,
    open: Arc<AtomicBool>,
}

impl Deferral {
    /// An offer, not taken yet, to follow the jobs of `followers`.
    pub fn offer(followers: impl IntoIterator<Item = String>) -> Self {
        let mut followers: Vec<String> = followers.into_iter().collect();
        followers.sort();
        Self {
            followers: followers.into(),
            open: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Takes the offer for the backend `follower` follows: `true` the first
    /// time only, and only for a follower offered.
    pub fn take(&self, follower: &str) -> bool {
        self.followers.iter().any(|offered| offered == follower)
            && self.open.swap(false, Ordering::SeqCst)
    }
}

impl serde::Serialize for Deferral {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.followers.serialize(serializer)
    }
}

impl Entry for Deferral {
    const NAME: &'static str = "toolgraft.deferral";
    type Travel = Stays;
    type Key = Keyed;
}

/// Where a followed job is.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Phase {
    /// Not ended: waiting for its time, queued, or running.
    Waiting,
    /// Ended, with the call's outcome.
    Ended(Result<Value, ToolError>),
    /// Stopped before it ended (it never ran, or its body was stopped).
    Cancelled,
}

/// A followed job as its backend sees it.
#[derive(Clone, Debug)]
pub struct Followed {
    /// Where it is.
    pub phase: Phase,
    /// The principal the call was made for, as the job carries it.
    pub principal: Option<Principal>,
    /// When the job was made (or is to run, if later), RFC 3339.
    pub since: String,
    /// The name the caller called (a published name), which renders its
    /// result.
    pub called: String,
}

/// A backend's jobs, followed by id from any process that reaches the same
/// store.
pub trait Follow: Send + Sync + 'static {
    /// What the server finds this follower by: the same in every process of a
    /// fleet for the same jobs (toolgraft-jobs: the backend's name and queue).
    fn follower(&self) -> String;

    /// The name of the backend whose branches defer to this follower (the
    /// extension's name in a combo: `remote`).
    fn backend(&self) -> String;

    /// How long an ended job is kept, for its outcome to be read.
    fn kept_for(&self) -> Duration;

    /// The job `job`; `None` when there is none by that id.
    fn status(&self, job: &str) -> StoreFuture<'static, Option<Followed>>;

    /// Stops the job `job`: one queued never runs, one running has its body
    /// stopped. An ended job stays as it is.
    fn cancel(&self, job: &str) -> StoreFuture<'static, ()>;
}

/// A call a backend deferred: it goes on as the job `job`, which `follower`
/// follows. A backend answers with it as its error when it took the
/// [`Deferral`]; the server in front answers the call with the job to follow.
/// Every layer outside passes it up as it passes any error (a server offers
/// the deferral only where no layer outside changes the output).
///
/// ```
/// # use std::sync::Arc;
/// use toolgraft::relocation::{Deferred, Follow, Followed};
/// # struct Jobs;
/// # impl Follow for Jobs {
/// #     fn follower(&self) -> String { "remote:q".into() }
/// #     fn backend(&self) -> String { "remote".into() }
/// #     fn kept_for(&self) -> std::time::Duration { std::time::Duration::from_secs(60) }
/// #     fn status(&self, _: &str) -> toolgraft::store::StoreFuture<'static, Option<Followed>> { Box::pin(async { Ok(None) }) }
/// #     fn cancel(&self, _: &str) -> toolgraft::store::StoreFuture<'static, ()> { Box::pin(async { Ok(()) }) }
/// # }
/// let deferred = Deferred { job: "01JZ".into(), follower: Arc::new(Jobs) };
/// assert_eq!(deferred.to_string(), "the call goes on as job `01JZ` (remote:q), to follow by its id");
/// ```
#[derive(Clone, thiserror::Error)]
#[error("the call goes on as job `{job}` ({}), to follow by its id", follower.follower())]
pub struct Deferred {
    /// The job's id.
    pub job: String,
    /// Its backend's follower.
    pub follower: Arc<dyn Follow>,
}

impl fmt::Debug for Deferred {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deferred")
            .field("job", &self.job)
            .field("follower", &self.follower.follower())
            .finish()
    }
}
