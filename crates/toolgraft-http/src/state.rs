//! What every handler shares: the toolset, its registry, the manifest file and
//! the guard, behind one `Arc`.

use std::path::PathBuf;
use std::sync::Arc;

use toolgraft::{Registry, Toolset};
use toolgraft_guard::Guard;

/// What every handler shares.
pub(crate) struct State {
    pub toolset: Toolset,
    pub registry: Registry,
    pub manifest: Option<PathBuf>,
    pub guard: Guard,
    /// One change at a time, so the file is written in the order changes apply.
    pub changing: tokio::sync::Mutex<()>,
}

pub(crate) type Shared = Arc<State>;
