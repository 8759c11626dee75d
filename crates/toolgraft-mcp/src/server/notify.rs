//! `notifications/tools/list_changed` on a session opened with `initialize`.

use rmcp::{Peer, RoleServer};
use tokio::sync::watch;

use super::ToolsetServer;

/// The list-changed notifier of a session opened with `initialize`.
pub(super) enum Notifier {
    /// No `initialize` yet.
    Idle,
    /// Watching since `initialize`, so a change before the client's first
    /// `tools/list` is not missed; waits for `notifications/initialized`.
    Armed(watch::Receiver<u64>),
    /// Notifying (a repeated `initialized` starts nothing).
    Running,
}

impl<H> ToolsetServer<H> {
    /// Sends `notifications/tools/list_changed` to `peer` after each change of the
    /// bound names that `changes` sees, until the connection or the toolset ends.
    pub(super) fn spawn_notifier(&self, peer: Peer<RoleServer>, mut changes: watch::Receiver<u64>) {
        let mut connection = self.connection.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    // Only ever an error: the server was dropped with its connection.
                    _ = connection.changed() => return,
                }
                // Changes that came in a burst are seen as one: a client re-lists
                // once per notification anyway.
                if peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }
}
