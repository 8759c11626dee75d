//! When a call that may become a task becomes one: the moment it must wait,
//! unless a part of it holds that moment, because another server decides it.
//!
//! A call forwarded to an upstream server that makes tasks of its own is a task
//! here exactly when it is one there: what the upstream answers without making
//! a task (a result, or a first round's request for input, which a tool that
//! requires a task still answers synchronously) is this call's answer too, and
//! the upstream's task is what makes this call one. The forwarder holds the
//! moment from its first poll until the upstream has answered either way, for
//! at most [`HOLD_AT_MOST`]: an upstream that neither answers nor makes a task
//! by then leaves the choice to this server, whose caller asked for a task.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use std::time::Duration;

use tokio::sync::watch;
use toolgraft::context::{Entry, Stays, Unkeyed};

/// The longest a call is held from becoming a task (see the module docs).
pub(crate) const HOLD_AT_MOST: Duration = Duration::from_secs(5);

/// The moment a call becomes a task, in the call's context (see the module
/// docs): at its first wait, or later while a [`Hold`] on it lives.
#[derive(Clone, Debug)]
pub(crate) struct TaskMoment {
    /// How many holds live.
    holds: Arc<watch::Sender<usize>>,
}

impl Entry for TaskMoment {
    const NAME: &'static str = "toolgraft_mcp.task_moment";
    // A relocated call is a task from the start: no one there decides.
    type Travel = Stays;
    type Key = Unkeyed;
}

/// A hold on a [`TaskMoment`]: the call does not become a task for waiting
/// while it lives.
#[derive(Debug)]
// Taken by a forwarded call only (`upstream`).
#[cfg_attr(not(feature = "upstream"), allow(dead_code))]
pub(crate) struct Hold {
    holds: Arc<watch::Sender<usize>>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.holds.send_modify(|holds| *holds -= 1);
    }
}

impl TaskMoment {
    pub(crate) fn new() -> Self {
        Self {
            holds: Arc::new(watch::channel(0).0),
        }
    }

    /// Holds the moment until the [`Hold`] is dropped.
    #[cfg_attr(not(feature = "upstream"), allow(dead_code))]
    pub(crate) fn hold(&self) -> Hold {
        self.holds.send_modify(|holds| *holds += 1);
        Hold {
            holds: self.holds.clone(),
        }
    }

    /// `call`'s output, if it has it without waiting, or before the last hold
    /// taken on this moment is let go (within [`HOLD_AT_MOST`]); `None` when
    /// it must wait unheld (the call is then a task).
    pub(crate) async fn settled<F: Future + Unpin>(&self, call: &mut F) -> Option<F::Output> {
        let mut holds = self.holds.subscribe();
        let held_too_long = tokio::time::sleep(HOLD_AT_MOST);
        tokio::pin!(held_too_long);
        loop {
            if let Poll::Ready(output) =
                std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *call).poll(cx))).await
            {
                return Some(output);
            }
            // Read after the poll: a hold let go and another taken within it
            // (one forwarded call ending, the next beginning) reads as held.
            if *holds.borrow_and_update() == 0 {
                return None;
            }
            tokio::select! {
                biased;
                output = &mut *call => return Some(output),
                // The sender is this moment's own: it outlives the wait.
                _ = holds.changed() => {}
                () = &mut held_too_long => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn an_unheld_call_that_must_wait_is_not_settled() {
        let moment = TaskMoment::new();
        let mut call = Box::pin(tokio::time::sleep(Duration::from_secs(3600)));
        assert!(moment.settled(&mut call).await.is_none());
    }

    #[tokio::test]
    async fn a_held_call_is_waited_for_until_its_hold_is_let_go() {
        let moment = TaskMoment::new();
        let (let_go, go) = tokio::sync::oneshot::channel::<()>();
        let held = moment.clone();
        // Answers once let go: held meanwhile, so its answer is waited for.
        let mut answers = Box::pin(async move {
            let _hold = held.hold();
            go.await.ok();
            tokio::task::yield_now().await;
            "answered"
        });
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let_go.send(()).ok();
        });
        assert_eq!(moment.settled(&mut answers).await, Some("answered"));

        // Let go before it ends: then it is not waited for.
        let (let_go, go) = tokio::sync::oneshot::channel::<()>();
        let held = moment.clone();
        let mut becomes_a_task = Box::pin(async move {
            let hold = held.hold();
            go.await.ok();
            drop(hold);
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let_go.send(()).ok();
        });
        assert!(moment.settled(&mut becomes_a_task).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_is_not_kept_longer_than_hold_at_most() {
        let moment = TaskMoment::new();
        let held = moment.clone();
        let started = tokio::time::Instant::now();
        let mut never_answers = Box::pin(async move {
            let _hold = held.hold();
            std::future::pending::<()>().await;
        });
        assert!(moment.settled(&mut never_answers).await.is_none());
        assert_eq!(started.elapsed(), HOLD_AT_MOST);
    }

    #[tokio::test]
    async fn a_hold_handed_on_within_one_poll_stays_held() {
        let moment = TaskMoment::new();
        let held = moment.clone();
        let (let_go, go) = tokio::sync::oneshot::channel::<()>();
        let mut chain = Box::pin(async move {
            let first = held.hold();
            tokio::task::yield_now().await;
            let second = held.hold();
            drop(first);
            go.await.ok();
            drop(second);
            "second answered"
        });
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let_go.send(()).ok();
        });
        assert_eq!(moment.settled(&mut chain).await, Some("second answered"));
    }
}
