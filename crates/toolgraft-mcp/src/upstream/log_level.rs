//! The log level asked of an upstream connection of protocol 2025-11-25.
//!
//! There a request cannot name the level its caller takes (2026-07-28's
//! `_meta` key is not read), and an upstream sends what its session's level,
//! set with `logging/setLevel`, lets through, or what it chooses before one
//! is set (a toolgraft server sends none). One connection carries the calls of
//! callers who each chose their own level, so it is asked for the least severe
//! any of them chose since it was made, and each call's messages are filtered
//! to its own caller's level where they arrive (its `LogSink`).

// Logging is deprecated by SEP-2577, and still what upstreams of 2025-11-25 send.
#![expect(deprecated)]

use std::sync::{Mutex, PoisonError};

use rmcp::model::SetLevelRequestParams;
use rmcp::{Peer, RoleClient};
use toolgraft::context::LogLevel;

use crate::call::mcp_level;

/// What one connection was asked; a new connection starts with nothing asked.
#[derive(Default)]
pub(super) struct AskedLevel {
    /// The least severe level asked so far.
    asked: Mutex<Option<LogLevel>>,
    /// Held while one call asks, so that the calls after it wait for the
    /// answer rather than each asking again.
    asking: tokio::sync::Mutex<()>,
}

impl AskedLevel {
    /// Has `peer` send log messages at `wanted` and above before a call that
    /// takes them goes, unless it already does or has no logging to set (a
    /// connection of 2026-07-28 is not asked: each call names its level). Waits at most
    /// until `deadline`, after which the level counts as asked: an upstream
    /// that does not answer `logging/setLevel` is not asked on every call, and
    /// its calls meet their own deadline anyway.
    pub(super) async fn include(
        &self,
        peer: &Peer<RoleClient>,
        wanted: LogLevel,
        deadline: tokio::time::Instant,
    ) {
        if self.covers(wanted)
            || peer
                .peer_info()
                .is_none_or(|info| info.capabilities.logging.is_none())
        {
            return;
        }
        let _asking = self.asking.lock().await;
        if self.covers(wanted) {
            return;
        }
        let set = peer.set_level(SetLevelRequestParams::new(mcp_level(wanted)));
        match tokio::time::timeout_at(deadline, set).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::debug!(%error, level = ?wanted, "the upstream refused `logging/setLevel`");
            }
            Err(_) => {
                tracing::debug!(level = ?wanted, "the upstream did not answer `logging/setLevel` in the call's time");
            }
        }
        *self.asked.lock().unwrap_or_else(PoisonError::into_inner) = Some(wanted);
    }

    fn covers(&self, wanted: LogLevel) -> bool {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|asked| asked <= wanted)
    }
}
