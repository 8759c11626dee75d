//! Fleet convergence: live combo changes reach every process of a queue.
//!
//! A [`Fleet`] keeps one process's toolset at the queue's **binding generation**:
//! the toolset's combos as a manifest, numbered, stored in the job engine (Redis,
//! or the SQLite file), and announced. A caller that joined broadcasts its own
//! changes (an edit, `apply_manifest`: anything the
//! toolset's [`changes`](Toolset::changes) report); every member (callers and
//! workers) rebinds the same combos by name with its own [`Registry`]: no code
//! travels ([relocation](toolgraft::rulebook#relocation)). A process started late
//! catches up when it joins.
//!
//! Jobs carry the generation their caller was at; a worker behind it waits for it
//! (up to [`Worker::with_fleet_wait`](crate::Worker::with_fleet_wait)) before running the
//! job, and refuses it with a [`ToolError::Relocation`](toolgraft::ToolError)
//! naming both generations if it cannot catch up.
//!
//! The whole toolset is the message, so two callers changing it at once end with
//! the last one's combos everywhere (last writer wins), never with a mix.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::clock::now_ms;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, watch};
use tokio::task::AbortHandle;

use super::queues;
use super::remote::Remote;
use super::tier::{Broker, Engine};
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::WeakToolset;
use toolgraft::{Registry, Toolset};

/// Which side of the queue a member is on.
///
/// ```
/// assert_eq!(serde_json::to_value(toolgraft_jobs::Role::Worker)?, "worker");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Sends jobs, and broadcasts its toolset's changes.
    Caller,
    /// Runs jobs; follows the fleet's changes, never broadcasts.
    Worker,
}

/// One process of a fleet, as its last report says (see [`Fleet::status`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetMember {
    /// The process's name (`<pid>-<ULID>`, or the worker's name).
    pub process: String,
    /// Caller or worker.
    pub role: Role,
    /// The binding generation its toolset is at (0: none applied yet).
    pub generation: u64,
    /// Tools of the fleet's manifest it could not rebind, each with the reason
    /// (a tool it does not bind, an extension its registry lacks).
    pub refused: Vec<String>,
    /// When it last reported, in milliseconds since the Unix epoch.
    pub seen_ms: u64,
    /// How long after its last report it is gone: its heartbeat times its
    /// missed beats (3 s unless its [`RemoteConfig`](crate::RemoteConfig) says).
    pub dead_after_ms: u64,
}

impl FleetMember {
    /// Whether the member reported within its last missed beats.
    ///
    /// ```
    /// # use toolgraft_jobs::{FleetMember, Role};
    /// let member = FleetMember { process: "w".into(), role: Role::Worker, generation: 3,
    ///     refused: vec![], seen_ms: 0, dead_after_ms: 3_000 };
    /// assert!(!member.is_alive());
    /// ```
    pub fn is_alive(&self) -> bool {
        now_ms().saturating_sub(self.seen_ms) < self.dead_after_ms
    }
}

/// Why a fleet could not be joined, changed or read.
///
/// ```
/// let err = toolgraft_jobs::FleetError::Engine("connection refused".into());
/// assert!(err.to_string().contains("connection refused"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// The job engine could not be reached or answered with an error.
    #[error("the fleet's job engine failed: {0}")]
    Engine(String),
    /// The toolset the fleet keeps is gone (dropped).
    #[error("the fleet's toolset is gone")]
    ToolsetGone,
}

/// A process's membership in its queue's fleet; leaving (dropping it) stops
/// following and broadcasting.
///
/// ```no_run
/// use toolgraft::{Registry, Toolset};
/// use toolgraft::ext::Trace;
/// use toolgraft::runtime::manifest::ElementSpec;
/// use toolgraft_jobs::{Fleet, Remote};
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let remote = Remote::new("redis://127.0.0.1:6379")?.with_queue("weather")?;
/// let toolset = Toolset::new(); // ... bound like the workers' ...
/// let mut registry = Registry::new();
/// registry.register(Trace)?.register(toolgraft::runtime::Configured::<Remote>::named("remote"))?;
/// let fleet = Fleet::join(&remote, &toolset, registry.clone()).await?;
/// toolset.edit().attach(&registry, "weather", &[ElementSpec::named("trace"), ElementSpec::configured(
///     "remote", serde_json::to_value(remote.settings())?)]).commit()?;
/// let generation = fleet.publish().await?; // (also done on its own, a moment later)
/// for member in fleet.status().await? {
///     println!("{} ({:?}) at generation {} of {generation}", member.process, member.role, member.generation);
/// }
/// # Ok(()) }
/// ```
pub struct Fleet {
    inner: Arc<Inner>,
    tasks: Vec<AbortHandle>,
}

struct Inner {
    process: String,
    role: Role,
    key: (String, String),
    /// The queue's tier, where the fleet's state lives.
    store: Broker,
    toolset: WeakToolset,
    registry: Registry,
    generation: watch::Sender<u64>,
    /// The toolset's change count right after the fleet's last rebinding here:
    /// changes up to it are the fleet's, not this process's own.
    applied_change: AtomicU64,
    refused: Mutex<Vec<String>>,
    engine: Engine,
    /// Wakes the follower (an announcement, a job from a newer generation).
    kick: Arc<Notify>,
    /// One catch-up or broadcast at a time.
    busy: tokio::sync::Mutex<()>,
}

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet")
            .field("process", &self.inner.process)
            .field("role", &self.inner.role)
            .field("queue", &self.inner.key.1)
            .field("generation", &*self.inner.generation.borrow())
            .finish_non_exhaustive()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Fleet {
    /// Joins `remote`'s queue as a caller: catches `toolset` up with the fleet's
    /// generation (rebinding with `registry`), then follows the fleet and
    /// broadcasts every change made to `toolset` here. Connecting, and catching
    /// up, each give up after `remote`'s timeout.
    pub async fn join(
        remote: &Remote,
        toolset: &Toolset,
        registry: Registry,
    ) -> Result<Self, FleetError> {
        let process = format!("{}-{}", std::process::id(), ulid::Ulid::generate());
        Self::start(remote, toolset, registry, Role::Caller, process).await
    }

    /// Joins as a worker named `process`: follows, never broadcasts.
    pub(crate) async fn follow(
        remote: &Remote,
        toolset: &Toolset,
        registry: Registry,
        process: String,
    ) -> Result<Self, FleetError> {
        Self::start(remote, toolset, registry, Role::Worker, process).await
    }

    async fn start(
        remote: &Remote,
        toolset: &Toolset,
        registry: Registry,
        role: Role,
        process: String,
    ) -> Result<Self, FleetError> {
        let queue = remote.queue_name().to_owned();
        let store = within(remote, async {
            Broker::connect(remote.tier(), &queue, remote.engine())
                .await
                .map_err(|error| FleetError::Engine(error.to_string()))
        })
        .await?;
        let (generation, receiver) = watch::channel(0);
        let key = (remote.settings().url.clone(), queue);
        let inner = Arc::new(Inner {
            process,
            role,
            key: key.clone(),
            store,
            toolset: toolset.downgrade(),
            registry,
            generation,
            applied_change: AtomicU64::new(*toolset.changes().borrow()),
            refused: Mutex::default(),
            engine: remote.engine(),
            kick: Arc::new(Notify::new()),
            busy: tokio::sync::Mutex::new(()),
        });
        within(remote, async {
            inner.catch_up().await?;
            inner.report().await
        })
        .await?;
        queues::join_fleet(&key.0, &key.1, receiver);
        // Kicks the follower at each announcement.
        let mut tasks = vec![
            inner
                .store
                .announcements(Arc::downgrade(&inner.kick))
                .abort_handle(),
        ];
        tasks.push(tokio::spawn(follow(Arc::downgrade(&inner))).abort_handle());
        if role == Role::Caller {
            tasks.push(
                tokio::spawn(broadcast(Arc::downgrade(&inner), toolset.changes())).abort_handle(),
            );
        }
        Ok(Self { inner, tasks })
    }

    /// This process's name in the fleet.
    pub fn process(&self) -> &str {
        &self.inner.process
    }

    /// The binding generation this process is at.
    pub fn generation(&self) -> u64 {
        *self.inner.generation.borrow()
    }

    /// Watches this process's generation.
    pub fn generations(&self) -> watch::Receiver<u64> {
        self.inner.generation.subscribe()
    }

    /// Broadcasts the toolset's combos now, as the next generation, and returns
    /// it (a caller's changes are broadcast on their own too, a moment after).
    pub async fn publish(&self) -> Result<u64, FleetError> {
        self.inner.publish().await
    }

    /// Waits up to `within` for this process to reach `generation`; whether it
    /// did.
    pub async fn wait_for(&self, generation: u64, within: Duration) -> bool {
        wait_for(self.inner.generation.subscribe(), generation, within).await
    }

    /// Every member's last report, live ones and those gone silent (see
    /// [`FleetMember::is_alive`]), by process name.
    pub async fn status(&self) -> Result<Vec<FleetMember>, FleetError> {
        let mut members: Vec<FleetMember> = (self.inner.store.members().await)
            .map_err(|error| FleetError::Engine(error.to_string()))?
            .iter()
            .filter_map(|text| serde_json::from_str(text).ok())
            .collect();
        members.sort_by(|a, b| a.process.cmp(&b.process));
        Ok(members)
    }

    /// Removes this process from the fleet's status (a clean stop).
    pub async fn leave(self) -> Result<(), FleetError> {
        (self.inner.store.leave(&self.inner.process).await)
            .map_err(|error| FleetError::Engine(error.to_string()))
    }

    /// Asks the follower to look for a newer generation now.
    pub(crate) fn kick(&self) {
        self.inner.kick.notify_one();
    }
}

/// `step` within `remote`'s timeout; a failure names the engine's URL.
async fn within<T>(
    remote: &Remote,
    step: impl Future<Output = Result<T, FleetError>>,
) -> Result<T, FleetError> {
    let after = remote.timeout_after();
    let problem = match tokio::time::timeout(after, step).await {
        Ok(Err(FleetError::Engine(problem))) => problem,
        Ok(outcome) => return outcome,
        Err(_) => format!("did not answer within {after:?}"),
    };
    Err(FleetError::Engine(format!(
        "`{}`: {problem}",
        crate::address::server_of(&remote.settings().url)
    )))
}

pub(crate) async fn wait_for(
    mut generations: watch::Receiver<u64>,
    generation: u64,
    within: Duration,
) -> bool {
    matches!(
        tokio::time::timeout(within, generations.wait_for(|at| *at >= generation)).await,
        Ok(Ok(_))
    )
}

/// Follows announcements (and looks every heartbeat, in case one was lost), and
/// reports this process's state every heartbeat.
async fn follow(inner: std::sync::Weak<Inner>) {
    let heartbeat = match inner.upgrade() {
        Some(fleet) => fleet.engine.heartbeat,
        None => return,
    };
    let mut beat = tokio::time::interval(heartbeat);
    loop {
        let Some(fleet) = inner.upgrade() else { return };
        let kicked = fleet.kick.notified();
        tokio::select! {
            _ = beat.tick() => {
                if let Err(error) = fleet.catch_up().await {
                    tracing::warn!(%error, "fleet: cannot read the generation");
                }
                if let Err(error) = fleet.report().await {
                    tracing::warn!(%error, "fleet: cannot report");
                }
            }
            () = kicked => {
                if let Err(error) = fleet.catch_up().await {
                    tracing::warn!(%error, "fleet: cannot read the generation");
                }
            }
        }
    }
}

/// A caller's broadcaster: each change of its own becomes a generation.
async fn broadcast(inner: std::sync::Weak<Inner>, mut changes: watch::Receiver<u64>) {
    loop {
        // A change made before this task first ran counts too: compared with
        // the count at joining, not marked seen unread.
        changes.borrow_and_update();
        let Some(fleet) = inner.upgrade() else { return };
        if let Err(error) = fleet.publish_own_change().await {
            tracing::warn!(%error, "fleet: cannot broadcast a change");
        }
        drop(fleet);
        if changes.changed().await.is_err() {
            return;
        }
    }
}

impl Inner {
    fn toolset(&self) -> Result<Toolset, FleetError> {
        self.toolset.upgrade().ok_or(FleetError::ToolsetGone)
    }

    async fn publish(&self) -> Result<u64, FleetError> {
        let busy = self.busy.lock().await;
        self.publish_holding(busy).await
    }

    /// Publishes the toolset's change unless it came from the fleet. Decided
    /// under `busy`: applying a fleet generation bumps the toolset's change
    /// count before it marks the change as applied, and a broadcaster reading
    /// in between would echo the fleet's own generation as a new one.
    async fn publish_own_change(&self) -> Result<(), FleetError> {
        let busy = self.busy.lock().await;
        let change = *self.toolset()?.changes().borrow();
        if change > self.applied_change.load(Ordering::SeqCst) {
            self.publish_holding(busy).await?;
        }
        Ok(())
    }

    async fn publish_holding(
        &self,
        busy: tokio::sync::MutexGuard<'_, ()>,
    ) -> Result<u64, FleetError> {
        let toolset = self.toolset()?;
        let change = *toolset.changes().borrow();
        let manifest = manifest_of(&toolset);
        let generation = (self.store.publish(&manifest.to_string()).await)
            .map_err(|error| FleetError::Engine(error.to_string()))?;
        self.applied_change.fetch_max(change, Ordering::SeqCst);
        self.generation.send_if_modified(|at| {
            let newer = generation > *at;
            *at = (*at).max(generation);
            newer
        });
        tracing::info!(process = %self.process, generation, "fleet: broadcast a change");
        drop(busy);
        self.report().await?;
        Ok(generation)
    }

    /// Rebinds to the fleet's generation if it is newer than this process's.
    async fn catch_up(&self) -> Result<(), FleetError> {
        let _busy = self.busy.lock().await;
        let Some((generation, text)) = self
            .store
            .current()
            .await
            .map_err(|error| FleetError::Engine(error.to_string()))?
        else {
            return Ok(());
        };
        if generation <= *self.generation.borrow() {
            return Ok(());
        }
        let toolset = self.toolset()?;
        let refused = match Manifest::from_json(&text) {
            Ok(manifest) => toolset
                .apply_manifest(&self.registry, &manifest)
                .into_iter()
                .filter_map(|(tool, outcome)| {
                    outcome
                        .err()
                        .map(|error| format!("{}: {error}", toolgraft::error::shorten(&tool)))
                })
                .collect(),
            Err(error) => vec![format!("the fleet's manifest: {error}")],
        };
        self.applied_change
            .fetch_max(*toolset.changes().borrow(), Ordering::SeqCst);
        tracing::info!(
            process = %self.process, role = ?self.role, generation, refused = ?refused,
            "fleet: applied generation {generation}"
        );
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = refused;
        self.generation.send_replace(generation);
        drop(_busy);
        self.report().await
    }

    async fn report(&self) -> Result<(), FleetError> {
        let member = FleetMember {
            process: self.process.clone(),
            role: self.role,
            generation: *self.generation.borrow(),
            refused: self
                .refused
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            seen_ms: now_ms(),
            dead_after_ms: u64::try_from(self.engine.dead_after().as_millis()).unwrap_or(u64::MAX),
        };
        let text = serde_json::to_string(&member)
            .map_err(|error| FleetError::Engine(error.to_string()))?;
        (self.store.report(&member.process, &text).await)
            .map_err(|error| FleetError::Engine(error.to_string()))
    }
}

/// The toolset's combos as a manifest: every base tool, with the longest chains
/// of its branches (a shorter chain is a prefix combo, whose names the longer one
/// mints too). Configs travel as they were applied.
fn manifest_of(toolset: &Toolset) -> Value {
    let mut order: Vec<String> = Vec::new();
    let mut chains: HashMap<String, Vec<Vec<Value>>> = HashMap::new();
    for info in toolset.tools() {
        let base = info.base.to_string();
        if !chains.contains_key(&base) {
            order.push(base.clone());
        }
        let combos = chains.entry(base).or_default();
        if info.chain.is_empty() {
            continue;
        }
        let chain: Vec<Value> = info
            .chain
            .iter()
            .map(|link| match &link.config {
                Some(config) => json!({"name": link.extension.to_string(), "config": config}),
                None => json!(link.extension.to_string()),
            })
            .collect();
        combos.push(chain);
    }
    let mut tools = Map::new();
    for base in order {
        let all = chains.remove(&base).unwrap_or_default();
        let longest: Vec<Value> = all
            .iter()
            .filter(|chain| {
                !all.iter()
                    .any(|other| other.len() > chain.len() && other.starts_with(chain))
            })
            .map(|chain| Value::Array(chain.clone()))
            .collect();
        tools.insert(base, Value::Array(longest));
    }
    json!({ "tools": tools })
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use crate::queues::generation_for;
    use crate::scratch::NewFile;

    /// A fleet that cannot reach its engine says which one.
    #[tokio::test]
    async fn a_fleet_that_cannot_join_names_the_url() {
        let remote = Remote::new("sqlite:///proc/toolgraft-nowhere/jobs.db").unwrap();
        let toolset = Toolset::new();
        let error = Fleet::join(&remote, &toolset, Registry::new())
            .await
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`sqlite:///proc/toolgraft-nowhere/jobs.db`: "),
            "{error}"
        );
    }

    /// An engine that never answers costs the backend's timeout, not more.
    #[cfg(feature = "redis")]
    #[tokio::test]
    async fn a_fleet_on_a_silent_engine_gives_up_at_the_timeout() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://{}", silent.local_addr().unwrap());
        let remote = Remote::new(&url)
            .unwrap()
            .with_timeout(Duration::from_millis(300));
        let toolset = Toolset::new();
        let started = std::time::Instant::now();
        let error = Fleet::join(&remote, &toolset, Registry::new())
            .await
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            error.to_string(),
            format!("the fleet's job engine failed: `{url}`: did not answer within 300ms")
        );
    }

    /// A process that joins a queue's fleet twice stamps its jobs with the newer
    /// of the two generations, and a fleet that left stops counting.
    #[tokio::test]
    async fn jobs_carry_the_newest_generation_of_the_fleets_still_joined() {
        let file = NewFile::new("fleets");
        let url = file.0.clone();
        let remote = Remote::new(&url).unwrap();
        let queue = remote.queue_name().to_owned();
        let (first_toolset, second_toolset) = (Toolset::new(), Toolset::new());
        let first = Fleet::join(&remote, &first_toolset, Registry::new())
            .await
            .unwrap();
        let second = Fleet::join(&remote, &second_toolset, Registry::new())
            .await
            .unwrap();
        assert_eq!(generation_for(&url, &queue), 0);
        let published = second.publish().await.unwrap();
        assert_eq!(generation_for(&url, &queue), published);
        drop(second);
        let newer = first.publish().await.unwrap();
        assert!(newer > published);
        assert_eq!(generation_for(&url, &queue), newer);
        drop(first);
        // Its tasks end at their next poll, and the fleet with them.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while generation_for(&url, &queue) != 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "a fleet that left still counts"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
