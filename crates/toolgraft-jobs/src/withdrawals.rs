//! The jobs callers withdrew, as a tier announces them to a worker process (the
//! Redis tier publishes each withdrawal): a running job stops when the
//! announcement arrives, not at its next look, and a job fetched after its
//! withdrawal was heard is skipped without asking the engine.
//!
//! What is heard is only as good as the listening: announcements made while
//! nobody listened (before the first subscription, across a reconnection) are
//! lost. So the registry knows since when it has heard every one
//! (`complete_since`), and a job sent before then plus [`CLOCK_MARGIN`] (by its
//! caller's clock), or sent by a caller whose clock is ahead by more than the
//! margin, or by a caller that does not say when (an older one, which does not
//! announce its withdrawals either), is looked up in the engine as before; so
//! are the running jobs at each (re)subscription. A running job still looks
//! every [`BACKSTOP`], in case a connection died without saying so. A tier that
//! announces nothing never listens, and its workers look up every job and poll
//! the running ones.
//!
//! An announcement still on its way when the job is fetched lets the body
//! start, then stops it when it arrives.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use crate::clock::now_us;

/// How far the callers' clocks may be ahead of this process's: a job sent less
/// than this after the listening began is looked up, not taken on trust.
pub(crate) const CLOCK_MARGIN: Duration = Duration::from_secs(2);

/// How often a running job looks whether it was withdrawn even where
/// withdrawals are announced: a subscription whose connection died silently
/// (a dropped NAT mapping) misses announcements until it is noticed.
pub(crate) const BACKSTOP: Duration = Duration::from_secs(5);

/// How many heard withdrawals are remembered at most; older ones are forgotten
/// (the jobs sent before them are looked up again).
pub(crate) const REMEMBERED: usize = 65_536;

/// How long a heard withdrawal is remembered.
pub(crate) const REMEMBERED_FOR: Duration = Duration::from_secs(600);

/// The longest job id an announcement may carry (a ULID is 26 characters): a
/// longer one is not a job of this crate's, and is not kept.
const MAX_JOB_ID: usize = 128;

/// The withdrawals a worker process has heard, and its running jobs' watches.
#[derive(Default)]
pub(crate) struct Withdrawals {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Whether the tier has ever listened: its running jobs wait for the
    /// announcement instead of polling.
    announced: bool,
    /// Since when (µs since the epoch, this process's clock) every announcement
    /// has been heard; `None` while nobody listens.
    complete_since: Option<u64>,
    heard: HashSet<String>,
    /// The heard ids, oldest first, with when they were heard.
    order: VecDeque<(u64, String)>,
    /// The running jobs' watches (a job redelivered while it still runs here
    /// has two).
    running: HashMap<String, Vec<Arc<Notify>>>,
}

/// What the announcements say of a job about to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Known {
    Withdrawn,
    NotWithdrawn,
    /// Sent while an announcement could have been missed: ask the engine.
    Unknown,
}

impl Withdrawals {
    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent at every await-free step: a panic while
        // holding it leaves nothing half done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tier's listener (re)subscribed: every announcement is heard from now.
    /// Returns the running jobs, whose withdrawal may have been announced while
    /// nobody listened: the listener looks them up.
    pub(crate) fn listening(&self) -> Vec<String> {
        let mut state = self.state();
        state.announced = true;
        state.complete_since = Some(now_us());
        state.running.keys().cloned().collect()
    }

    /// The listener lost its subscription: announcements may be missed.
    pub(crate) fn deaf(&self) {
        self.state().complete_since = None;
    }

    /// `job` was withdrawn: its watch, if it runs here, fires.
    pub(crate) fn heard(&self, job: &str) {
        if job.is_empty() || job.len() > MAX_JOB_ID {
            return;
        }
        let now = now_us();
        let mut state = self.state();
        state.forget_before(now);
        for watch in state.running.get(job).into_iter().flatten() {
            watch.notify_one();
        }
        if state.heard.insert(job.to_owned()) {
            state.order.push_back((now, job.to_owned()));
            while state.order.len() > REMEMBERED {
                state.forget_oldest();
            }
        }
    }

    /// Watches `job`, sent at `sent_at_us` by its caller's clock (0: unknown),
    /// from before it runs until the watch is dropped; says what the
    /// announcements know of it so far.
    pub(crate) fn watch(self: &Arc<Self>, job: &str, sent_at_us: u64) -> (Known, Watch) {
        let notify = Arc::new(Notify::new());
        let mut state = self.state();
        state
            .running
            .entry(job.to_owned())
            .or_default()
            .push(notify.clone());
        let known = if state.heard.contains(job) {
            Known::Withdrawn
        } else {
            let margin = u64::try_from(CLOCK_MARGIN.as_micros()).unwrap_or(u64::MAX);
            let ahead = sent_at_us > now_us().saturating_add(margin);
            match state.complete_since {
                Some(since)
                    if sent_at_us != 0 && !ahead && sent_at_us >= since.saturating_add(margin) =>
                {
                    Known::NotWithdrawn
                }
                _ => Known::Unknown,
            }
        };
        // A caller that does not say when it sent the job is older than the
        // announcements: its withdrawals are only stored, so its jobs are polled.
        let announced = state.announced && sent_at_us != 0;
        let watch = Watch {
            withdrawals: self.clone(),
            job: job.to_owned(),
            notify: announced.then(|| notify.clone()),
            mine: notify,
        };
        (known, watch)
    }
}

impl State {
    fn forget_before(&mut self, now: u64) {
        let oldest = now.saturating_sub(u64::try_from(REMEMBERED_FOR.as_micros()).unwrap_or(0));
        while self.order.front().is_some_and(|(at, _)| *at < oldest) {
            self.forget_oldest();
        }
    }

    /// Forgets the oldest heard withdrawal: a job sent before it was heard can
    /// no longer be trusted to be known.
    fn forget_oldest(&mut self) {
        if let Some((at, job)) = self.order.pop_front() {
            self.heard.remove(&job);
            if let Some(since) = &mut self.complete_since {
                *since = (*since).max(at);
            }
        }
    }
}

/// A job's watch while it runs (see [`Withdrawals::watch`]).
pub(crate) struct Watch {
    withdrawals: Arc<Withdrawals>,
    job: String,
    /// `None`: the tier does not announce withdrawals (or has not yet): poll.
    notify: Option<Arc<Notify>>,
    /// This watch's entry among the job's.
    mine: Arc<Notify>,
}

impl Watch {
    /// Resolves when the job's withdrawal is heard; `None` if the tier
    /// announces none (or not for this job's caller), and the job must be
    /// polled. Even announced, it is worth a look every [`BACKSTOP`].
    pub(crate) fn announced(&self) -> Option<impl Future<Output = ()> + '_> {
        self.notify.as_deref().map(Notify::notified)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut state = self.withdrawals.state();
        if let Some(watches) = state.running.get_mut(&self.job) {
            watches.retain(|watch| !Arc::ptr_eq(watch, &self.mine));
            if watches.is_empty() {
                state.running.remove(&self.job);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_sent_after_the_listening_began_is_known() {
        let withdrawals = Arc::new(Withdrawals::default());
        let now = now_us();
        // Nobody listens yet: every job is looked up, and polled.
        let (known, watch) = withdrawals.watch("a", now);
        assert_eq!(known, Known::Unknown);
        assert!(watch.announced().is_none());
        drop(watch);

        assert!(withdrawals.listening().is_empty());
        // As if listening for 10 s: a job sent now is known not withdrawn.
        withdrawals.state().complete_since = Some(now - 10_000_000);
        let (known, watch) = withdrawals.watch("a", now);
        assert_eq!(known, Known::NotWithdrawn);
        assert!(watch.announced().is_some());
        // Sent before the listening began plus the margin: looked up.
        assert_eq!(withdrawals.watch("b", now - 9_000_000).0, Known::Unknown);
        // An older caller's job (no time): looked up, and polled while it runs.
        let (known, watch) = withdrawals.watch("b", 0);
        assert_eq!(known, Known::Unknown);
        assert!(watch.announced().is_none());
        // A caller whose clock is ahead by more than the margin: looked up.
        assert_eq!(
            withdrawals.watch("e", now_us() + 60_000_000).0,
            Known::Unknown
        );
        withdrawals.heard("c");
        assert_eq!(withdrawals.watch("c", now).0, Known::Withdrawn);
        // Deaf: nothing is known to be missing any more.
        withdrawals.deaf();
        assert_eq!(withdrawals.watch("d", now).0, Known::Unknown);
    }

    #[tokio::test]
    async fn a_running_job_hears_its_withdrawal() {
        let withdrawals = Arc::new(Withdrawals::default());
        withdrawals.listening();
        let (_, watch) = withdrawals.watch("a", now_us());
        assert_eq!(withdrawals.listening(), vec!["a".to_owned()]);
        withdrawals.heard("a");
        // The permit waits for the watcher that was not waiting yet.
        tokio::time::timeout(Duration::from_secs(5), watch.announced().unwrap())
            .await
            .unwrap();
        // Run twice here (redelivered while it ran): both hear it, and each
        // watch leaves only itself.
        let (_, again) = withdrawals.watch("a", now_us());
        withdrawals.heard("a");
        tokio::time::timeout(Duration::from_secs(5), again.announced().unwrap())
            .await
            .unwrap();
        drop(watch);
        assert_eq!(withdrawals.listening(), vec!["a".to_owned()]);
        drop(again);
        assert!(withdrawals.listening().is_empty());
    }

    #[test]
    fn what_is_forgotten_is_looked_up_again() {
        let withdrawals = Arc::new(Withdrawals::default());
        withdrawals.listening();
        // Listening since long ago; the jobs were sent before their withdrawals.
        withdrawals.state().complete_since = Some(1);
        let sent = now_us();
        for job in 0..=REMEMBERED {
            withdrawals.heard(&job.to_string());
        }
        // The first was forgotten: looked up; the last is remembered.
        assert_eq!(withdrawals.watch("0", sent).0, Known::Unknown);
        assert_eq!(
            withdrawals.watch(&REMEMBERED.to_string(), sent).0,
            Known::Withdrawn
        );
        // An id no job of this crate's has is not kept.
        let long = "x".repeat(MAX_JOB_ID + 1);
        withdrawals.heard(&long);
        assert!(!withdrawals.state().heard.contains(&long));
    }
}
