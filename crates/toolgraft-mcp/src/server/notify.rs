//! `notifications/tools/list_changed`, to the sessions whose listing changed:
//! with access policies, a change shows one caller more names and another the
//! same ones, and only the first is told.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::{Peer, RoleServer};
use tokio::sync::watch;

use super::ToolsetServer;
use super::listing::{Lister, Shown};

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

/// What a session was last shown, shared by its server (which sets it at
/// `initialize` and on each `tools/list`) and its notifier; `None` until then,
/// when any change is told.
pub(super) type Seen = Arc<Mutex<Option<Shown>>>;

impl<H> ToolsetServer<H> {
    /// Sends `notifications/tools/list_changed` to `peer` after each change of the
    /// bound names that `changes` sees and that changes what the session was
    /// shown, until the connection or the toolset ends.
    pub(super) fn spawn_notifier(&self, peer: Peer<RoleServer>, mut changes: watch::Receiver<u64>) {
        let mut connection = self.connection.subscribe();
        let (toolset, listings) = (self.toolset.clone(), self.listings.clone());
        let (seen, unknown_arguments) = (self.seen.clone(), self.unknown_arguments);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    // Only ever an error: the server was dropped with its connection.
                    _ = connection.changed() => return,
                }
                let lister = Lister {
                    toolset: &toolset,
                    listings: &listings,
                    changes: &changes,
                    unknown_arguments,
                };
                let told = seen
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_mut()
                    .is_none_or(|shown| shown.changed(&lister));
                // Changes that came in a burst are seen as one: a client re-lists
                // once per notification anyway.
                if told && peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// Keeps `shown` as what this session was shown last.
    pub(super) fn remember(&self, shown: Shown) {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = Some(shown);
    }
}
