//! The workers' poll: a tick every poll period, and at once at a caller's wake-up.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;

/// Polls on a `tokio` interval, and at once when a caller's wake-up arrives
/// (`wake`, fed by the tier's listener): an idle worker costs next to nothing and
/// still picks a job up within a round trip of its enqueueing.
///
/// apalis-core 1.0.0's `IntervalStrategy` can leave no timer armed after a fetch
/// that completes in the same wake-up, so an idle worker would wait for its next
/// heartbeat; this one drains the interval until it is pending, which always
/// leaves the next tick registered.
///
/// A wake-up that arrives while a fetch is in flight can be spent on that fetch,
/// which may have run before the job was enqueued; so each wake-up also arms a
/// follow-up poll [`FOLLOW_UP`] later, and a missed job waits that long, not a
/// whole tick.
pub(crate) struct Ticks {
    period: Duration,
    interval: tokio::time::Interval,
    wake: Arc<Notify>,
    woken: Pin<Box<OwnedNotified>>,
    follow_up: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// How long after a wake-up a worker fetches once more (see [`Ticks`]).
pub(crate) const FOLLOW_UP: Duration = Duration::from_millis(3);

impl Ticks {
    pub(crate) fn every(period: Duration, wake: Arc<Notify>) -> Self {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            period,
            interval,
            woken: Box::pin(wake.clone().notified_owned()),
            wake,
            follow_up: None,
        }
    }
}

impl Clone for Ticks {
    fn clone(&self) -> Self {
        Self::every(self.period, self.wake.clone())
    }
}

impl apalis::prelude::PollStrategy for Ticks {
    fn poll_drive(
        &mut self,
        cx: &mut std::task::Context<'_>,
        _: &apalis::prelude::PollSnapshot,
    ) -> std::task::Poll<Option<()>> {
        let mut fired = false;
        while self.interval.poll_tick(cx).is_ready() {
            fired = true;
        }
        if let Some(follow_up) = &mut self.follow_up
            && follow_up.as_mut().poll(cx).is_ready()
        {
            self.follow_up = None;
            fired = true;
        }
        while self.woken.as_mut().poll(cx).is_ready() {
            self.woken = Box::pin(self.wake.clone().notified_owned());
            fired = true;
            if self.follow_up.is_none() {
                let mut follow_up = Box::pin(tokio::time::sleep(FOLLOW_UP));
                // Registers the timer with this task.
                let _ = follow_up.as_mut().poll(cx);
                self.follow_up = Some(follow_up);
            }
        }
        if fired {
            std::task::Poll::Ready(Some(()))
        } else {
            std::task::Poll::Pending
        }
    }
}
