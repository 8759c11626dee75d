//! A caller's connection to its queue: the broker, and the reply router that
//! hands each job's reply to the caller waiting for it, its progress reports to
//! the caller's progress sink, and its log messages to the caller's log sink.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::task::AbortHandle;

use toolgraft::context::{LogSink, ProgressSink};

use super::job::{Message, Reply};
use super::tier::Broker;

/// How long one wait for replies blocks before the router checks it is still needed.
const REPLY_WAIT: Duration = Duration::from_secs(1);

/// One connection's reply router: callers wait on one-shot channels keyed by job
/// id; one task collects replies from the caller's reply channel and routes them.
pub(crate) struct Client {
    pub(crate) broker: Broker,
    /// The caller's reply channel, named in its jobs.
    pub(crate) reply_to: String,
    pending: Mutex<HashMap<String, Waiter>>,
    /// Wakes the router when a first caller starts waiting (shared with the router,
    /// which must not keep the client alive while it sleeps).
    waiting: Arc<Notify>,
    router: Mutex<Option<AbortHandle>>,
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(router) = self
            .router
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            router.abort();
        }
    }
}

/// A caller waiting for one job: where its reply goes, and its progress.
struct Waiter {
    reply: oneshot::Sender<Reply>,
    progress: Option<ProgressSink>,
    /// The last progress handed on: a redelivered job reports again from its
    /// start, and progress only goes forward.
    reached: Option<f64>,
    /// Where its log messages go (all of them: a redelivered job's run logs
    /// again, and what it logs is news).
    log: Option<LogSink>,
}

/// Drops the waiting callers' senders when the router ends.
struct ReleaseWaiting(Weak<Client>);

impl Drop for ReleaseWaiting {
    fn drop(&mut self) {
        if let Some(client) = self.0.upgrade() {
            client.lock_pending().clear();
        }
    }
}

/// A caller's claim on one job's reply; dropping it unanswered (a caller that
/// gave up: cancelled, timed out) forgets the job, so a late reply is dropped
/// instead of kept, and withdraws it, so a worker skips or stops it.
pub(crate) struct Pending {
    reply: oneshot::Receiver<Reply>,
    id: String,
    client: Arc<Client>,
    answered: bool,
}

impl Pending {
    /// The reply, or `None` if the router is gone.
    pub(crate) async fn reply(mut self) -> Option<Reply> {
        let reply = (&mut self.reply).await.ok();
        self.answered = reply.is_some();
        reply
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.client.lock_pending().remove(&self.id);
        if self.answered {
            return;
        }
        // Dropped in a runtime (a call's future is): the withdrawal goes on
        // without the caller, which is gone.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (broker, id) = (self.client.broker.clone(), self.id.clone());
        runtime.spawn(async move {
            match broker.withdraw(&id).await {
                Ok(()) => tracing::info!(job = %id, "job withdrawn: its caller stopped waiting"),
                Err(error) => tracing::warn!(job = %id, %error, "cannot withdraw a job its caller stopped waiting for"),
            }
        });
    }
}

impl Client {
    pub(crate) fn start(broker: Broker) -> Arc<Self> {
        let client = Arc::new(Self {
            broker,
            reply_to: format!("toolgraft:replies:{}", ulid::Ulid::generate()),
            pending: Mutex::default(),
            waiting: Arc::new(Notify::new()),
            router: Mutex::default(),
        });
        // The router holds the client weakly: dropping the last `Remote` ends it.
        let weak = Arc::downgrade(&client);
        let notify = client.waiting.clone();
        let router = tokio::spawn(async move {
            // However the router ends (its runtime shut down), its waiting callers
            // hear of it at once instead of at their timeout.
            let _release = ReleaseWaiting(weak.clone());
            loop {
                let Some(client) = weak.upgrade() else { return };
                if client.lock_pending().is_empty() {
                    let waiting = notify.notified();
                    drop(client);
                    // Rechecked each second: the client may be gone meanwhile.
                    let _ = tokio::time::timeout(REPLY_WAIT, waiting).await;
                    continue;
                }
                match client
                    .broker
                    .take_replies(&client.reply_to, REPLY_WAIT)
                    .await
                {
                    Ok(replies) => {
                        for message in replies {
                            client.route(message);
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "collecting job replies failed; retrying");
                        drop(client);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        *client.router.lock().unwrap_or_else(PoisonError::into_inner) = Some(router.abort_handle());
        client
    }

    /// Whether the router still runs (it ends with the runtime that spawned it).
    pub(crate) fn is_routing(&self) -> bool {
        self.router
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|router| !router.is_finished())
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiter>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the reply to `id`, and hands its progress reports to `progress`
    /// and its log messages to `log`.
    pub(crate) fn expect(
        self: &Arc<Self>,
        id: &str,
        progress: Option<ProgressSink>,
        log: Option<LogSink>,
    ) -> Pending {
        let (sender, reply) = oneshot::channel();
        let waiter = Waiter {
            reply: sender,
            progress,
            reached: None,
            log,
        };
        self.lock_pending().insert(id.to_owned(), waiter);
        self.waiting.notify_one();
        Pending {
            reply,
            id: id.to_owned(),
            client: self.clone(),
            answered: false,
        }
    }

    fn route(&self, message: Message) {
        let reply = match message {
            Message::Reply(reply) => reply,
            Message::Progress(report) => {
                // Taken out first: the sink runs outside the lock.
                let sink = self.lock_pending().get_mut(&report.job).and_then(|waiter| {
                    let forward = waiter
                        .reached
                        .is_none_or(|reached| report.progress.progress > reached);
                    if forward {
                        waiter.reached = Some(report.progress.progress);
                    }
                    waiter.progress.clone().filter(|_| forward)
                });
                if let Some(sink) = sink {
                    sink.send(report.progress);
                }
                return;
            }
            Message::Log(report) => {
                // Taken out first: the sink runs outside the lock.
                let sink =
                    (self.lock_pending().get(&report.job)).and_then(|waiter| waiter.log.clone());
                if let Some(sink) = sink {
                    sink.send(report.log);
                }
                return;
            }
        };
        match self.lock_pending().remove(&reply.job) {
            Some(waiting) => {
                let _ = waiting.reply.send(reply);
            }
            // A caller that timed out, or a second run of a re-delivered job.
            None => {
                tracing::debug!(job = %reply.job, worker = %reply.worker, "dropped a reply nobody waits for")
            }
        }
    }
}
