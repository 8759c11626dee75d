//! The caller's side: the `remote` backend and its branch, which enqueue a
//! call's job and wait for its reply (through `client.rs`'s reply router), or
//! submit it for a ticket; `store.rs` reads the jobs back.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Mutex as AsyncMutex;

use super::client::Client;
use super::clock::{now_ms, now_us};
use super::job::{Following, Job, JobState, JobTicket, Record, job_key, rfc3339};
use super::queues;
use super::tier::{Broker, Engine, TierError, TierUrl};
use toolgraft::context::{LogSink, ProgressSink};
use toolgraft::error::ArgsError;
use toolgraft::extension::{Anywhere, Args, ConfigError, Configurable, LayerInput};
use toolgraft::kind::Backend;
use toolgraft::relocation::Departure;
use toolgraft::relocation::{Deferral, Deferred};
use toolgraft::{Extension, Layer, Name, Stack, ToolError};

/// The queue jobs go to unless told otherwise.
const DEFAULT_QUEUE: &str = "toolgraft";
/// How long a caller waits for a reply unless told otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A backend that runs its layer input in a worker process, through the apalis
/// job engine (see the [module docs](super)).
///
/// Made from a URL (`redis://host:port`, `postgres://user@host/db` or
/// `sqlite://path/to/jobs.db`), a queue name and a timeout; it connects at its
/// first call, so building the same toolset in a worker, which never calls it,
/// needs no connection. Clones share the connection.
///
/// ```
/// use std::time::Duration;
/// use toolgraft::Extension;
/// use toolgraft_jobs::Remote;
///
/// let remote = Remote::new("sqlite:///var/lib/toolgraft/jobs.db")?
///     .with_queue("weather")?
///     .with_timeout(Duration::from_secs(5));
/// assert_eq!((remote.name(), remote.queue_name()), ("remote", "weather"));
/// assert!(Remote::new("http://example.com").is_err());
/// # Ok::<(), toolgraft::extension::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Remote {
    name: String,
    config: RemoteConfig,
    tier: TierUrl,
    /// Made at the first call; made again if its router's runtime is gone.
    client: Arc<AsyncMutex<Option<Arc<Client>>>>,
}

/// A [`Remote`]'s settings, as an operator writes them in a manifest:
/// `{"name": "remote", "config": {"url": "redis://127.0.0.1:6379", "queue": "weather", "timeout_ms": 5000}}`.
///
/// ```
/// use toolgraft_jobs::RemoteConfig;
/// let config: RemoteConfig = serde_json::from_value(serde_json::json!({"url": "sqlite://jobs.db"}))?;
/// assert_eq!((config.queue.as_str(), config.timeout_ms), ("toolgraft", 30_000));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteConfig {
    /// `redis://host:port[/db]`, `postgres://user@host:port/database` or
    /// `sqlite://path/to/jobs.db`.
    pub url: String,
    /// The queue: workers serve one queue, callers send to one.
    #[serde(default = "default_queue")]
    pub queue: String,
    /// How long a caller waits for the reply, in milliseconds (1 to
    /// [`MAX_TIMEOUT_MS`], a day).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// How often an idle worker looks for jobs when no wake-up came, in
    /// milliseconds (callers wake the queue's workers as they enqueue, so this is
    /// a safety net; 500 unless told, 1 to 60,000).
    #[serde(default = "default_poll_ms")]
    pub poll_ms: u64,
    /// The workers' liveness beat, in milliseconds (1,000 unless told; 100 to
    /// 60,000; times `missed_heartbeats`, at least 3 s). Fleet members report at
    /// this beat too.
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
    /// After how many missed beats a worker is dead and its jobs run again
    /// elsewhere (3 unless told; 2 to 100: both engines stamp beats in whole
    /// seconds, so fewer could take a late beat for a death).
    #[serde(default = "default_missed_heartbeats")]
    pub missed_heartbeats: u32,
    /// How long replies nobody collected (a caller that gave up) are kept, in
    /// seconds (600 unless told; 1 to a day).
    #[serde(default = "default_retention_s")]
    pub retention_s: u64,
}

fn default_poll_ms() -> u64 {
    500
}

fn default_heartbeat_ms() -> u64 {
    1_000
}

fn default_missed_heartbeats() -> u32 {
    3
}

fn default_retention_s() -> u64 {
    600
}

/// The longest a caller may be configured to wait for a reply: a day.
///
/// ```
/// use std::time::Duration;
/// use toolgraft_jobs::{MAX_TIMEOUT_MS, Remote};
/// let remote = Remote::new("sqlite://jobs.db")?.with_timeout(Duration::from_secs(u64::MAX));
/// assert_eq!(remote.timeout_after(), Duration::from_millis(MAX_TIMEOUT_MS));
/// # Ok::<(), toolgraft::extension::ConfigError>(())
/// ```
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

fn default_queue() -> String {
    DEFAULT_QUEUE.to_owned()
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT.as_millis() as u64
}

/// The URL without its credentials: a config is logged and shown in errors.
impl fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("url", &crate::address::server_of(&self.url))
            .field("queue", &self.queue)
            .field("timeout_ms", &self.timeout_ms)
            .field("poll_ms", &self.poll_ms)
            .field("heartbeat_ms", &self.heartbeat_ms)
            .field("missed_heartbeats", &self.missed_heartbeats)
            .field("retention_s", &self.retention_s)
            .finish()
    }
}

impl fmt::Debug for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Remote {
    /// A backend sending jobs to `url` (queue `toolgraft`, 30 s timeout). A URL of
    /// no known tier, or of a tier this build lacks, is an error.
    ///
    /// ```
    /// let err = toolgraft_jobs::Remote::new("amqp://broker").unwrap_err();
    /// assert!(err.to_string().contains("redis://"));
    /// ```
    pub fn new(url: impl Into<String>) -> Result<Self, ConfigError> {
        Self::from_config(RemoteConfig {
            url: url.into(),
            queue: default_queue(),
            timeout_ms: default_timeout_ms(),
            poll_ms: default_poll_ms(),
            heartbeat_ms: default_heartbeat_ms(),
            missed_heartbeats: default_missed_heartbeats(),
            retention_s: default_retention_s(),
        })
    }

    /// The same backend on another queue: a non-empty name without `:` (the
    /// engines' keys are made of it), as in a config.
    ///
    /// ```
    /// use toolgraft_jobs::Remote;
    /// let remote = Remote::new("sqlite://jobs.db")?.with_queue("gpu")?;
    /// assert_eq!(remote.queue_name(), "gpu");
    /// assert_eq!(Remote::new("sqlite://jobs.db")?.with_queue("a:b").unwrap_err().field, "queue");
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn with_queue(mut self, queue: impl Into<String>) -> Result<Self, ConfigError> {
        let queue = queue.into();
        check_queue(&queue)?;
        self.config.queue = queue;
        self.client = Arc::default();
        Ok(self)
    }

    /// How long a caller waits for a reply before [`ToolError::TimedOut`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// let remote = toolgraft_jobs::Remote::new("sqlite://jobs.db")?.with_timeout(Duration::from_millis(250));
    /// assert_eq!(remote.timeout_after(), Duration::from_millis(250));
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        // Capped like a configured one: a day.
        self.config.timeout_ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_TIMEOUT_MS);
        self
    }

    /// The same backend under another extension name (branches end in `_<name>`).
    ///
    /// ```
    /// # use toolgraft::Extension;
    /// let gpu = toolgraft_jobs::Remote::new("sqlite://jobs.db")?.with_name("gpu");
    /// assert_eq!(gpu.name(), "gpu");
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The queue jobs go to (see [`Remote::with_queue`]).
    pub fn queue_name(&self) -> &str {
        &self.config.queue
    }

    /// The caller's timeout (see [`Remote::with_timeout`]).
    pub fn timeout_after(&self) -> Duration {
        Duration::from_millis(self.config.timeout_ms)
    }

    /// The settings (see [`RemoteConfig`]).
    ///
    /// ```
    /// let remote = toolgraft_jobs::Remote::new("sqlite://jobs.db")?;
    /// assert_eq!(remote.settings().url, "sqlite://jobs.db");
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn settings(&self) -> &RemoteConfig {
        &self.config
    }

    /// What a server follows this backend's jobs by: `<backend name>:<queue>`,
    /// the same in every process that binds the same backend.
    pub(crate) fn follow_key(&self) -> String {
        format!("{}:{}", self.name, self.config.queue)
    }

    pub(super) fn tier(&self) -> &TierUrl {
        &self.tier
    }

    /// The engine's host and port, never its credentials: what errors show.
    pub(crate) fn server(&self) -> String {
        crate::address::server_of(&self.config.url)
    }

    pub(crate) fn engine(&self) -> Engine {
        Engine {
            poll: Duration::from_millis(self.config.poll_ms),
            heartbeat: Duration::from_millis(self.config.heartbeat_ms),
            missed_heartbeats: self.config.missed_heartbeats,
            retention: Duration::from_secs(self.config.retention_s),
        }
    }

    async fn client(&self) -> Result<Arc<Client>, TierError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = &*slot
            && client.is_routing()
        {
            return Ok(client.clone());
        }
        // One connection per URL and queue in a process: backends made apart
        // (each element of a manifest's combos is one) share it.
        let (url, queue, engine) = (&self.config.url, &self.config.queue, self.engine());
        if let Some(client) = queues::client(url, queue, engine) {
            return Ok(slot.insert(client).clone());
        }
        let broker = Broker::connect(&self.tier, queue, engine).await?;
        let client = Client::start(broker);
        queues::share_client(url, queue, engine, &client);
        Ok(slot.insert(client).clone())
    }

    /// The connection's broker (connecting at the first use).
    pub(crate) async fn broker(&self) -> Result<Broker, TierError> {
        Ok(self.client().await?.broker.clone())
    }

    /// Enqueues the bound name `tool` with `args` as a submitted job, runnable
    /// from `run_at` (ms; `None`: now), and returns its ticket; the timeout
    /// covers connecting and enqueueing.
    async fn submit(
        &self,
        departure: &Departure,
        args: Value,
        run_at: Option<u64>,
        following: Option<Following>,
    ) -> Result<JobTicket, ToolError> {
        let tool = departure.below();
        let relocation = |reason: String| departure.failed(reason);
        let id = ulid::Ulid::generate().to_string();
        let now = now_ms();
        let ticket = JobTicket {
            job_id: id.clone(),
            queue: self.config.queue.clone(),
            tool: tool.to_string(),
            state: if run_at.is_some_and(|at| at > now) {
                JobState::Scheduled
            } else {
                JobState::Queued
            },
            run_at: rfc3339(run_at.unwrap_or(now)),
        };
        let after = self.timeout_after();
        let record = serde_json::to_string(&Record {
            ticket: ticket.clone(),
            backend: self.name.clone(),
            enqueue_by: now.saturating_add(after.as_millis() as u64 + ENQUEUE_SLACK_MS),
            principal: toolgraft::context::get::<toolgraft::context::Principal>()
                .map(|principal| principal.as_str().to_owned()),
            following,
        })
        .map_err(|error| relocation(error.to_string()))?;
        let sent_at_us = now_us();
        let job = Job {
            id: id.clone(),
            tool: tool.to_string(),
            args,
            reply_to: job_key(&self.config.queue, &id),
            context: departure.to_wire()?,
            generation: queues::generation_for(&self.config.url, &self.config.queue),
            // A submitted job answers no one waiting.
            progress: false,
            log: None,
            // A scheduled job waits in the queue from its time on.
            queued_at_us: run_at.map_or(sent_at_us, |at| sent_at_us.max(at.saturating_mul(1000))),
            sent_at_us,
        };
        // Whole seconds, rounded up: a job never runs before its time.
        let run_at_s = run_at.map(|ms| ms.div_ceil(1000));
        let send = async {
            let broker = self.broker().await?;
            broker.submit(job, &record, run_at_s).await
        };
        match tokio::time::timeout(after, send).await {
            Ok(Ok(())) => Ok(ticket),
            Ok(Err(error)) => Err(relocation(format!("cannot enqueue job `{id}`: {error}"))),
            Err(_) => {
                // The record may be written: let it expire, as an ended job's.
                let remote = self.clone();
                let job = id.clone();
                tokio::spawn(async move {
                    let abandon = async { remote.broker().await.map(|broker| (broker, job)) };
                    if let Ok(Ok((broker, job))) =
                        tokio::time::timeout(ABANDON_WITHIN, abandon).await
                    {
                        let _ = tokio::time::timeout(ABANDON_WITHIN, broker.abandon(&job)).await;
                    }
                });
                Err(relocation(format!(
                    "cannot enqueue job `{id}`: the job engine did not answer within {after:?} \
                     (it may still enqueue it: `job_status` says)"
                )))
            }
        }
    }

    /// Runs the bound name `tool` in a worker with `args` and waits for its reply;
    /// the timeout covers connecting and enqueueing too.
    async fn run(&self, departure: &Departure, args: Value) -> Result<Value, ToolError> {
        let id = ulid::Ulid::generate().to_string();
        let after = self.timeout_after();
        match tokio::time::timeout(after, self.send_and_wait(departure, &id, args)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ToolError::TimedOut {
                tool: departure.below().clone(),
                extension: departure.backend().clone(),
                job: Some(id),
                after,
            }),
        }
    }

    async fn send_and_wait(
        &self,
        departure: &Departure,
        id: &str,
        args: Value,
    ) -> Result<Value, ToolError> {
        let (tool, backend) = (departure.below(), departure.backend());
        let relocation = |reason: String| departure.failed(reason);
        // The caller's sinks stay here; the worker sends the body's reports and
        // log messages back.
        let progress = toolgraft::context::get::<ProgressSink>();
        let log = toolgraft::context::get::<LogSink>();
        let client = self
            .client()
            .await
            .map_err(|error| relocation(error.to_string()))?;
        let sent_at_us = now_us();
        let job = Job {
            id: id.to_owned(),
            tool: tool.to_string(),
            args,
            reply_to: client.reply_to.clone(),
            context: departure.to_wire()?,
            generation: queues::generation_for(&self.config.url, &self.config.queue),
            progress: progress.is_some(),
            log: log.as_ref().map(LogSink::level),
            queued_at_us: sent_at_us,
            sent_at_us,
        };
        // Waiting before sending: a fast worker cannot answer before anyone listens.
        let pending = client.expect(id, progress, log);
        client
            .broker
            .push(job)
            .await
            .map_err(|error| relocation(format!("cannot enqueue job `{id}`: {error}")))?;
        match pending.reply().await {
            Some(reply) => reply
                .result
                .map_err(|error| error.into_tool_error(tool, backend, &reply.worker)),
            None => Err(relocation(format!(
                "the reply router stopped before job `{id}` was answered"
            ))),
        }
    }
}

impl Extension for Remote {
    type Kind = Backend;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        &self.name
    }

    fn config(&self) -> Option<Value> {
        serde_json::to_value(&self.config).ok()
    }
}

/// A queue name's rule, for a config and for [`Remote::with_queue`] alike.
fn check_queue(queue: &str) -> Result<(), ConfigError> {
    if queue.is_empty() || queue.contains(':') {
        return Err(ConfigError::new(
            "queue",
            format!(
                "`{}` is not a queue name; use a non-empty name without `:`",
                toolgraft::error::shorten(queue)
            ),
        ));
    }
    Ok(())
}

impl Configurable for Remote {
    type Config = RemoteConfig;

    fn from_config(config: RemoteConfig) -> Result<Self, ConfigError> {
        let tier =
            TierUrl::parse(&config.url).map_err(|problem| ConfigError::new("url", problem))?;
        check_queue(&config.queue)?;
        if config.timeout_ms == 0 {
            return Err(ConfigError::new(
                "timeout_ms",
                "a timeout of 0 ms never waits",
            ));
        }
        if config.timeout_ms > MAX_TIMEOUT_MS {
            return Err(ConfigError::new(
                "timeout_ms",
                format!(
                    "{} ms is over the limit of {MAX_TIMEOUT_MS} (a day)",
                    config.timeout_ms
                ),
            ));
        }
        let ranges: [(&str, u64, u64, u64); 4] = [
            ("poll_ms", config.poll_ms, 1, 60_000),
            ("heartbeat_ms", config.heartbeat_ms, 100, 60_000),
            (
                "missed_heartbeats",
                u64::from(config.missed_heartbeats),
                2,
                100,
            ),
            ("retention_s", config.retention_s, 1, 24 * 60 * 60),
        ];
        for (field, value, low, high) in ranges {
            if !(low..=high).contains(&value) {
                return Err(ConfigError::new(
                    field,
                    format!("{value} is out of range: use {low} to {high}"),
                ));
            }
        }
        if config.heartbeat_ms * u64::from(config.missed_heartbeats) < 3_000 {
            return Err(ConfigError::new(
                "missed_heartbeats",
                format!(
                    "{} beats of {} ms is under 3 s: both engines stamp beats in whole \
                     seconds, so a live worker could be taken for dead",
                    config.missed_heartbeats, config.heartbeat_ms
                ),
            ));
        }
        Ok(Self {
            name: "remote".to_owned(),
            config,
            tier,
            client: Arc::default(),
        })
    }
}

impl<S> Layer<S> for Remote
where
    S: Stack,
    S::Input: Serialize,
    S::Output: DeserializeOwned,
{
    type Branch = Remoted<S>;

    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Remoted<S> {
        Remoted {
            inner: Arc::new(inner),
            below: below.name.clone(),
            branch: below.branch.clone(),
            remote: self,
        }
    }
}

/// The branch [`Remote`] mints: a call becomes a job naming the layer below.
pub struct Remoted<S> {
    /// Kept to decode (and check) arguments before they are enqueued; never called.
    inner: Arc<S>,
    below: Name,
    /// This branch's name: what its backend span says it is.
    branch: Name,
    remote: Remote,
}

impl<S> fmt::Debug for Remoted<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remoted")
            .field("below", &self.below)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl<S> Clone for Remoted<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            below: self.below.clone(),
            branch: self.branch.clone(),
            remote: self.remote.clone(),
        }
    }
}

// A backend runs its layer elsewhere, the same calls: what a typed `retry` outside
// reads.
impl<S> toolgraft::tool::Hinted for Remoted<S>
where
    S: toolgraft::tool::Hinted,
    S::Input: Serialize,
    S::Output: DeserializeOwned,
{
    type Hints = S::Hints;
}

impl<S> Stack for Remoted<S>
where
    S: Stack,
    S::Input: Serialize,
    S::Output: DeserializeOwned,
{
    type Input = S::Input;
    type Output = S::Output;

    async fn call(&self, input: S::Input) -> Result<S::Output, ToolError> {
        // Refused from inside a body-local layer's call (a tool body calling this
        // branch under a proxy): relocating would leave that layer behind.
        let departure = Departure::new(&self.remote.name, &self.below)?.with_branch(&self.branch);
        let outcome = self.departed(&departure, input).await;
        match &outcome {
            // Followed by its id, not failed: the backend span has no error.
            Err(error) if error.downcast_ref::<Deferred>().is_some() => outcome,
            // The outcome is the backend span's too (`error.type`, the rule).
            _ => departure.settle(outcome),
        }
    }

    fn decode(&self, args: Args) -> Result<S::Input, ArgsError> {
        self.inner.decode(args)
    }
}

impl<S> Remoted<S>
where
    S: Stack,
    S::Input: Serialize,
    S::Output: DeserializeOwned,
{
    /// A call, once its departure is made: a job, waited for or followed.
    async fn departed(
        &self,
        departure: &Departure,
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let args = serde_json::to_value(&input).map_err(|error| {
            departure.failed(format!("the arguments do not serialize: {error}"))
        })?;
        // The caller follows the job by its id (an MCP task): enqueued, not waited for.
        let follower = self.remote.follow_key();
        if toolgraft::context::get::<Deferral>().is_some_and(|offer| offer.take(&follower)) {
            let following = Following::new(
                toolgraft::context::get::<toolgraft::context::CallName>().map_or_else(
                    || departure.below().to_string(),
                    |called| called.0.to_string(),
                ),
            );
            let token = following.token.clone();
            let ticket = self
                .remote
                .submit(departure, args, None, Some(following))
                .await?;
            let deferred = Deferred {
                job: format!("{}.{token}", ticket.job_id),
                follower: Arc::new(self.remote.clone()),
            };
            return Err(ToolError::extension(
                departure.below().clone(),
                Name::lossy(&self.remote.name),
                deferred,
            ));
        }
        let output = self.remote.run(departure, args).await?;
        serde_json::from_value(output).map_err(|error| {
            departure.failed(format!(
                "the worker's result does not fit the output type: {error}"
            ))
        })
    }
}

/// How long past its timeout a submit's enqueueing may still land.
const ENQUEUE_SLACK_MS: u64 = 2_000;

/// How long the marking of an abandoned submit's record may take.
const ABANDON_WITHIN: Duration = Duration::from_secs(30);

impl<S> Remoted<S>
where
    S: Stack,
    S::Input: Serialize,
    S::Output: DeserializeOwned,
{
    /// Enqueues the job this branch would send, runnable from `run_at` (ms;
    /// `None`: now), and returns its ticket: what `submit` answers with.
    pub(crate) async fn submit(
        &self,
        input: S::Input,
        run_at: Option<u64>,
    ) -> Result<JobTicket, ToolError> {
        let departure = Departure::new(&self.remote.name, &self.below)?.with_branch(&self.branch);
        let args = serde_json::to_value(&input).map_err(|error| {
            departure.failed(format!("the arguments do not serialize: {error}"))
        })?;
        departure.settle(self.remote.submit(&departure, args, run_at, None).await)
    }
}
