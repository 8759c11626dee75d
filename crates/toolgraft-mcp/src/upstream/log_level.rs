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
        // Another call's ask is bounded by its own deadline, which may be
        // later than this one's.
        let Ok(_asking) = tokio::time::timeout_at(deadline, self.asking.lock()).await else {
            return;
        };
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use rmcp::model::{ErrorData, ServerCapabilities, ServerConfig};
    use rmcp::service::RequestContext;
    use rmcp::{RoleServer, ServerHandler, ServiceExt as _};

    use super::*;

    /// Logs, and never answers `logging/setLevel`.
    struct Unanswering;

    impl ServerHandler for Unanswering {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_logging().build())
        }

        async fn set_level(
            &self,
            _: SetLevelRequestParams,
            _: RequestContext<RoleServer>,
        ) -> Result<(), ErrorData> {
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn a_call_behind_anothers_ask_waits_no_longer_than_its_own_deadline() {
        let (server_io, client_io) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(Unanswering.serve(server_io));
        let client = ().serve(client_io).await.unwrap();
        let asked = Arc::new(AskedLevel::default());
        let long = tokio::spawn({
            let asked = asked.clone();
            let peer = client.peer().clone();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            async move { asked.include(&peer, LogLevel::Info, deadline).await }
        });
        // The first call is asking by now.
        tokio::time::sleep(Duration::from_millis(100)).await;

        let deadline = tokio::time::Instant::now() + Duration::from_millis(200);
        let behind = asked.include(client.peer(), LogLevel::Debug, deadline);
        tokio::time::timeout(Duration::from_secs(5), behind)
            .await
            .expect("waits until its own deadline, not the first call's");

        long.abort();
        let _ = client.cancel().await;
        server.abort();
    }
}
