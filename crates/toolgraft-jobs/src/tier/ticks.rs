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
/// which may have run before the job was enqueued; so each wake-up also arms
/// follow-up polls, [`FOLLOW_UPS`] apart, and a missed job waits at most their
/// sum, not a whole tick. There are several because a follow-up that fires
/// while a fetch is still in flight is spent the same way: on a loaded machine
/// a fetch takes longer than the first.
pub(crate) struct Ticks {
    period: Duration,
    interval: tokio::time::Interval,
    wake: Arc<Notify>,
    woken: Pin<Box<OwnedNotified>>,
    /// The next follow-up, and how many came before it since the last wake-up.
    follow_up: Option<(Pin<Box<tokio::time::Sleep>>, usize)>,
}

/// The waits between a wake-up and each follow-up fetch (see [`Ticks`]).
pub(crate) const FOLLOW_UPS: [Duration; 3] = [
    Duration::from_millis(3),
    Duration::from_millis(30),
    Duration::from_millis(300),
];

/// The follow-up `after` waits from now, registered with the polling task.
fn follow_up(
    cx: &mut std::task::Context<'_>,
    after: usize,
) -> Option<(Pin<Box<tokio::time::Sleep>>, usize)> {
    let wait = FOLLOW_UPS.get(after)?;
    let mut sleep = Box::pin(tokio::time::sleep(*wait));
    let _ = sleep.as_mut().poll(cx);
    Some((sleep, after))
}

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
        if let Some((sleep, after)) = &mut self.follow_up
            && sleep.as_mut().poll(cx).is_ready()
        {
            let next = *after + 1;
            self.follow_up = follow_up(cx, next);
            fired = true;
        }
        while self.woken.as_mut().poll(cx).is_ready() {
            self.woken = Box::pin(self.wake.clone().notified_owned());
            fired = true;
            // Each wake-up's job gets every follow-up.
            self.follow_up = follow_up(cx, 0);
        }
        if fired {
            std::task::Poll::Ready(Some(()))
        } else {
            std::task::Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apalis::prelude::{PollSnapshot, PollStrategy};

    async fn fires(ticks: &mut Ticks) -> bool {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(ticks.poll_drive(cx, &PollSnapshot::default()).is_ready())
        })
        .await
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_up_polls_at_once_and_after_each_follow_up() {
        let wake = Arc::new(Notify::new());
        let mut ticks = Ticks::every(Duration::from_secs(60), wake.clone());
        assert!(fires(&mut ticks).await, "the interval's first tick");
        assert!(!fires(&mut ticks).await);
        wake.notify_one();
        assert!(fires(&mut ticks).await, "the wake-up");
        let mut at = Duration::ZERO;
        for wait in FOLLOW_UPS {
            tokio::time::advance(wait - Duration::from_millis(1)).await;
            assert!(
                !fires(&mut ticks).await,
                "before the follow-up after {wait:?}"
            );
            tokio::time::advance(Duration::from_millis(1)).await;
            assert!(fires(&mut ticks).await, "the follow-up after {wait:?}");
            at += wait;
        }
        tokio::time::advance(Duration::from_secs(59) - at).await;
        assert!(!fires(&mut ticks).await, "nothing more until the next tick");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(fires(&mut ticks).await, "the next tick");
    }
}
