//! The process's per-queue state, by (URL, queue): the binding generations of
//! the fleets it joined (what a `Remote` stamps on its jobs) and the callers'
//! connections, which backends made apart share. Its one owner, below its
//! readers (`remote`, `fleet`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use tokio::sync::watch;

use super::client::Client;
use super::tier::Engine;

/// One queue's state in this process.
#[derive(Default)]
struct Queue {
    /// The generations of this process's fleets on the queue. A process may join
    /// one queue's fleet more than once; a fleet that left drops out (its sender
    /// is gone).
    fleets: Vec<watch::Receiver<u64>>,
    /// The callers' connections, by engine settings; a connection no backend
    /// holds any more drops out.
    clients: HashMap<Engine, Weak<Client>>,
}

impl Queue {
    fn is_empty(&self) -> bool {
        self.fleets.is_empty() && self.clients.is_empty()
    }
}

fn queues() -> MutexGuard<'static, HashMap<(String, String), Queue>> {
    static QUEUES: OnceLock<Mutex<HashMap<(String, String), Queue>>> = OnceLock::new();
    QUEUES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The newest binding generation of this process's fleets on `url` and `queue`
/// (0 if it joined none).
pub(crate) fn generation_for(url: &str, queue: &str) -> u64 {
    let mut queues = queues();
    let key = (url.to_owned(), queue.to_owned());
    let Some(state) = queues.get_mut(&key) else {
        return 0;
    };
    state.fleets.retain(|fleet| fleet.has_changed().is_ok());
    let newest = state.fleets.iter().map(|fleet| *fleet.borrow()).max();
    if state.is_empty() {
        queues.remove(&key);
    }
    newest.unwrap_or(0)
}

/// Counts a fleet that joined `url` and `queue`, at the generation `fleet` watches.
pub(crate) fn join_fleet(url: &str, queue: &str, fleet: watch::Receiver<u64>) {
    queues()
        .entry((url.to_owned(), queue.to_owned()))
        .or_default()
        .fleets
        .push(fleet);
}

/// The connection a backend on `url`, `queue` and `engine` shares, if one is
/// still routing replies.
pub(crate) fn client(url: &str, queue: &str, engine: Engine) -> Option<Arc<Client>> {
    queues()
        .get(&(url.to_owned(), queue.to_owned()))?
        .clients
        .get(&engine)
        .and_then(Weak::upgrade)
        .filter(|client| client.is_routing())
}

/// Shares `client` with the backends made later on `url`, `queue` and `engine`.
pub(crate) fn share_client(url: &str, queue: &str, engine: Engine, client: &Arc<Client>) {
    let mut queues = queues();
    for state in queues.values_mut() {
        state.clients.retain(|_, client| client.strong_count() > 0);
    }
    queues.retain(|_, state| !state.is_empty());
    queues
        .entry((url.to_owned(), queue.to_owned()))
        .or_default()
        .clients
        .insert(engine, Arc::downgrade(client));
}
