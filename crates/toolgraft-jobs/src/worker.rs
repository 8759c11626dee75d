//! The worker's side: a process that runs jobs by name on its own toolset.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use toolgraft::context::{self, Context, LogLevel, LogSink, ProgressSink};
use toolgraft::ext::retry::Attempt;
use toolgraft::relocation::JobRun;
use toolgraft::{Name, ToolError};

use apalis::prelude::BoxDynError;

use super::fleet::Fleet;
use super::job::{Job, LogReport, Message, ProgressReport, Reply, is_job_key};
use super::remote::Remote;
use super::telemetry::JobSpan;
use super::tier::{Broker, RECONNECT_FIRST, RECONNECT_LAST, RunJob, Ticks, VACUUM_BATCH};
use super::wire::WireError;
use super::withdrawals::{BACKSTOP, Known, Watch, Withdrawals};
use toolgraft::{Registry, Toolset};

/// How many jobs a worker runs at once unless told otherwise.
const DEFAULT_CONCURRENCY: usize = 16;
/// How long a stopping worker waits for jobs in flight.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// How long a job from a newer binding generation waits for the worker.
const DEFAULT_FLEET_WAIT: Duration = Duration::from_secs(5);

/// A worker process's job loop: takes jobs from a [`Remote`]'s queue and runs each
/// by name on `toolset`, which the process binds with the same code as its
/// callers. Many jobs run at once; a job's failure (an error, a panic, an unknown
/// name) is replied to the caller and the worker goes on.
///
/// ```no_run
/// use toolgraft::Toolset;
/// use toolgraft_jobs::{Remote, Worker};
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let remote = Remote::new("sqlite:///tmp/jobs.db")?.with_queue("weather")?;
/// let toolset = Toolset::new(); // ... bound like the callers' ...
/// Worker::new(toolset, &remote).with_concurrency(32).run().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Worker {
    toolset: Toolset,
    remote: Remote,
    concurrency: usize,
    grace: Duration,
    name: String,
    /// Follows the queue's fleet with this registry (see [`Worker::with_fleet`]).
    fleet: Option<Registry>,
    fleet_wait: Duration,
}

/// Why a worker stopped other than by a shutdown signal.
///
/// ```
/// let err = toolgraft_jobs::WorkerError::Connect("no route".into());
/// assert!(err.to_string().contains("no route"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// The job engine could not be reached.
    #[error("the worker cannot reach its job engine: {0}")]
    Connect(String),
    /// The job engine stopped the worker.
    #[error("the job engine stopped the worker: {0}")]
    Engine(String),
    /// Jobs were still running when the grace period ended; they were dropped
    /// and the engine will run them again elsewhere.
    #[error("jobs were still running after the {0:?} grace period")]
    Grace(Duration),
    /// The shutdown signal could not be installed.
    #[error("cannot listen for shutdown signals: {0}")]
    Signal(#[from] std::io::Error),
}

struct State {
    toolset: Toolset,
    broker: Broker,
    queue: String,
    worker: String,
    fleet: Option<Fleet>,
    fleet_wait: Duration,
    /// The withdrawals the tier announced to this process.
    withdrawals: Arc<Withdrawals>,
}

impl Worker {
    /// A worker for `remote`'s queue, running jobs on `toolset`; named
    /// `toolgraft-<pid>-<ULID>`: names must differ between live workers, and a pid
    /// alone repeats across hosts and containers.
    ///
    /// ```
    /// # let remote = toolgraft_jobs::Remote::new("sqlite://jobs.db")?;
    /// let worker = toolgraft_jobs::Worker::new(toolgraft::Toolset::new(), &remote);
    /// assert!(worker.name().starts_with(&format!("toolgraft-{}-", std::process::id())));
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn new(toolset: Toolset, remote: &Remote) -> Self {
        Self {
            toolset,
            remote: remote.clone(),
            concurrency: DEFAULT_CONCURRENCY,
            grace: DEFAULT_GRACE,
            name: format!(
                "toolgraft-{}-{}",
                std::process::id(),
                ulid::Ulid::generate()
            ),
            fleet: None,
            fleet_wait: DEFAULT_FLEET_WAIT,
        }
    }

    /// Follows the queue's [fleet](crate::Fleet): the worker catches up with the
    /// fleet's binding generation when it starts, and rebinds its toolset by
    /// name with `registry` at each change a caller broadcasts.
    ///
    /// ```
    /// # let remote = toolgraft_jobs::Remote::new("sqlite://jobs.db")?;
    /// let mut registry = toolgraft::Registry::new();
    /// registry.register(toolgraft::ext::Trace)?;
    /// let worker = toolgraft_jobs::Worker::new(toolgraft::Toolset::new(), &remote).with_fleet(registry);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_fleet(mut self, registry: Registry) -> Self {
        self.fleet = Some(registry);
        self
    }

    /// How long a job sent at a newer binding generation than the worker's waits
    /// for the worker to catch up (5 s unless told); then it is refused with
    /// [`ToolError::Relocation`](toolgraft::ToolError) naming both generations.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let remote = toolgraft_jobs::Remote::new("sqlite://jobs.db")?;
    /// let worker = toolgraft_jobs::Worker::new(toolgraft::Toolset::new(), &remote)
    ///     .with_fleet_wait(Duration::from_secs(2));
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn with_fleet_wait(mut self, wait: Duration) -> Self {
        self.fleet_wait = wait;
        self
    }

    /// Another name in the job engine (and in replies); it must differ from every
    /// other live worker's.
    ///
    /// ```
    /// # let remote = toolgraft_jobs::Remote::new("sqlite://jobs.db")?;
    /// let worker = toolgraft_jobs::Worker::new(toolgraft::Toolset::new(), &remote).with_name("gpu-1");
    /// assert_eq!(worker.name(), "gpu-1");
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How many jobs run at once (1 to [`Worker::MAX_CONCURRENCY`]; 16 unless
    /// told).
    ///
    /// ```
    /// # let remote = toolgraft_jobs::Remote::new("sqlite://jobs.db")?;
    /// let worker = toolgraft_jobs::Worker::new(toolgraft::Toolset::new(), &remote).with_concurrency(0);
    /// assert_eq!(worker.concurrent_jobs(), 1);
    /// let worker = worker.with_concurrency(usize::MAX);
    /// assert_eq!(worker.concurrent_jobs(), toolgraft_jobs::Worker::MAX_CONCURRENCY);
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn with_concurrency(mut self, jobs: usize) -> Self {
        self.concurrency = jobs.clamp(1, Self::MAX_CONCURRENCY);
        self
    }

    /// The most jobs one worker runs at once (see [`Worker::with_concurrency`]).
    ///
    /// ```
    /// assert_eq!(toolgraft_jobs::Worker::MAX_CONCURRENCY, 4096);
    /// ```
    pub const MAX_CONCURRENCY: usize = 4096;

    /// How long a stopping worker waits for its jobs in flight (30 s unless told).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let remote = toolgraft_jobs::Remote::new("sqlite://jobs.db")?;
    /// let worker = toolgraft_jobs::Worker::new(toolgraft::Toolset::new(), &remote)
    ///     .with_grace(Duration::from_secs(5));
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The worker's name in the job engine (see [`Worker::new`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many jobs run at once (see [`Worker::with_concurrency`]).
    pub fn concurrent_jobs(&self) -> usize {
        self.concurrency
    }

    /// Runs jobs until SIGTERM or SIGINT (Ctrl-C elsewhere than on Unix), then
    /// finishes the jobs in flight and returns (see [`Worker`]).
    #[cfg(unix)]
    pub async fn run(self) -> Result<(), WorkerError> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        self.run_until(async move {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        })
        .await
    }

    /// Runs jobs until Ctrl-C (SIGTERM and SIGINT on Unix), then finishes the jobs
    /// in flight and returns (see [`Worker`]).
    #[cfg(not(unix))]
    pub async fn run(self) -> Result<(), WorkerError> {
        let interrupted = tokio::signal::ctrl_c();
        self.run_until(async move {
            // A handler that cannot be installed never fires: stop at once then.
            let _ = interrupted.await;
        })
        .await
    }

    /// Runs jobs until `shutdown` completes, then finishes the jobs in flight (up
    /// to the [grace](Worker::with_grace)) and returns.
    ///
    /// ```no_run
    /// # use toolgraft_jobs::{Remote, Worker};
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let remote = Remote::new("sqlite://jobs.db")?;
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let worker = tokio::spawn(Worker::new(toolgraft::Toolset::new(), &remote).run_until(async {
    ///     let _ = stopped.await;
    /// }));
    /// stop.send(()).ok();
    /// worker.await??;
    /// # Ok(()) }
    /// ```
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), WorkerError> {
        let queue = self.remote.queue_name().to_owned();
        let engine = self.remote.engine();
        let broker = Broker::connect(self.remote.tier(), &queue, engine)
            .await
            .map_err(|error| WorkerError::Connect(error.to_string()))?;
        let fleet = match self.fleet {
            Some(registry) => Some(
                Fleet::follow(&self.remote, &self.toolset, registry, self.name.clone())
                    .await
                    .map_err(|error| WorkerError::Connect(error.to_string()))?,
            ),
            None => None,
        };
        let state = Arc::new(State {
            toolset: self.toolset,
            broker: broker.clone(),
            queue: self.remote.queue_name().to_owned(),
            worker: self.name.clone(),
            fleet,
            fleet_wait: self.fleet_wait,
            withdrawals: Arc::default(),
        });
        // Callers' wake-ups, so that an idle worker need not poll often, and
        // their withdrawals, so that a running job need not poll at all.
        let wake = Arc::new(tokio::sync::Notify::new());
        let _listener = AbortOnDrop(broker.listen(wake.clone(), state.withdrawals.clone()));
        let _vacuum = AbortOnDrop(tokio::spawn(vacuum(broker.clone(), engine.heartbeat)));
        tracing::info!(worker = %self.name, %queue, "worker started");
        let concurrency = self.concurrency;
        // Each job, on this worker's state (a tier runs it; the tier knows no state).
        let runner: RunJob = {
            let state = state.clone();
            Arc::new(move |job| Box::pin(run_job(job, state.clone())))
        };
        tokio::pin!(shutdown);
        let mut backoff = RECONNECT_FIRST;
        // Not `run_with_signal`: with a grace period it reports success whatever
        // became of the worker, and without one it waits for the signal even after
        // the worker died. A worker the engine stops (a lost connection: a Redis
        // restart) starts again, with backoff, under the same name: registering
        // takes back the jobs it had in flight, so they run again (at least once).
        let (context, run) = loop {
            let ticks = Ticks::every(engine.poll, wake.clone());
            let monitor = broker.serve(&self.name, ticks, concurrency, runner.clone());
            let context = monitor.context();
            let started = std::time::Instant::now();
            let mut run = Box::pin(monitor.run());
            tokio::select! {
                result = &mut run => {
                    let reason = match result {
                        Err(error) => error.to_string(),
                        Ok(()) => "the worker stopped on its own".to_owned(),
                    };
                    if started.elapsed() > RECONNECT_LAST * 5 {
                        backoff = RECONNECT_FIRST;
                    }
                    tracing::warn!(
                        worker = %self.name, %reason, ?backoff,
                        "the job engine stopped the worker; starting it again"
                    );
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        () = &mut shutdown => {
                            tracing::info!(worker = %self.name, "worker stopped");
                            return Ok(());
                        }
                    }
                    backoff = (backoff * 2).min(RECONNECT_LAST);
                }
                () = &mut shutdown => break (context, run),
            }
        };
        tracing::info!(worker = %self.name, "stopping: finishing the jobs in flight");
        let _ = context.shutdown();
        let outcome = match tokio::time::timeout(self.grace, run).await {
            Ok(result) => result.map_err(|error| WorkerError::Engine(error.to_string())),
            Err(_) => Err(WorkerError::Grace(self.grace)),
        };
        tracing::info!(worker = %self.name, "worker stopped");
        outcome
    }
}

/// One job: run the named tool, reply. The tool's failure is a reply, not a job
/// failure (it is not retried); only a reply that cannot be sent fails the job, and
/// the engine runs it again (at least once).
async fn run_job(mut job: Job, state: Arc<State>) -> Result<(), BoxDynError> {
    let picked_up = SystemTime::now();
    // The call context arrives first: the job's span continues the trace in it.
    let arrived = std::mem::take(&mut job.context);
    arrived.arrive(run_arrived(job, state, picked_up)).await
}

async fn run_arrived(
    mut job: Job,
    state: Arc<State>,
    picked_up: SystemTime,
) -> Result<(), BoxDynError> {
    let span = JobSpan::start(&job, &state.queue, &state.worker, picked_up);
    // A job is withdrawn by the caller that stopped waiting for it, or by a
    // cancel of one submitted (an MCP task's): either way it runs no more. The
    // engine is asked only when the announcements heard cannot tell.
    let (known, watch) = state.withdrawals.watch(&job.id, job.sent_at_us);
    let withdrawn = match known {
        Known::Withdrawn => true,
        Known::NotWithdrawn => false,
        Known::Unknown => state.broker.is_withdrawn(&job.id).await.unwrap_or(false),
    };
    if withdrawn {
        span.withdrawn(None);
        tracing::info!(job = %job.id, tool = %job.tool, worker = %state.worker, "job withdrawn before it ran: skipped");
        return cancelled(&job, &state).await;
    }
    span.clone().scope(async move {
        tracing::info!(job = %job.id, tool = %job.tool, worker = %state.worker, "job started");
        let started = Instant::now();
        let result = match behind(&job, &state).await {
            Some(refused) => {
                if let WireError::Other { message, .. } = &refused {
                    span.failed(refused.kind(), message);
                }
                Err(refused)
            }
            None => {
                let args = std::mem::take(&mut job.args);
                let (tool, toolset, broker) = (&job.tool, &state.toolset, &state.broker);
                // The same on every run of the job: what `once` inside keys it by.
                let run = JobRun::new(job.id.as_str());
                let call = async move {
                    if let Some(refused) = over_its_runs(tool, broker).await {
                        return Err(refused);
                    }
                    context::with(run, toolset.call(tool, args)).await
                };
                let call = span.continued(call);
                let call = forwarding(&job, &state.broker, &span, call);
                let outcome = until_withdrawn(&job.id, &watch, &state.broker, call).await;
                let Some(outcome) = outcome else {
                    let after_ms = started.elapsed().as_millis() as u64;
                    span.withdrawn(Some(after_ms));
                    tracing::info!(
                        job = %job.id, tool = %job.tool, worker = %state.worker, after_ms,
                        "job withdrawn (its caller stopped waiting, or it was cancelled): the body stopped, no reply"
                    );
                    return cancelled(&job, &state).await;
                };
                outcome.map_err(|error| {
                    let wire = WireError::from_tool_error(&error, &job.tool);
                    // The caller's kinds (`ToolError::code`): one failure, one
                    // `error.type`, whichever side of the queue records it.
                    span.failed(error.code(), &error);
                    wire
                })
            }
        };
        tracing::info!(
            job = %job.id, tool = %job.tool, worker = %state.worker, ok = result.is_ok(),
            "job finished"
        );
        let reply = Reply {
            job: job.id,
            worker: state.worker.clone(),
            result,
        };
        send_patiently(&state.broker, &job.reply_to, &reply).await
    })
    .await
}

/// How long a worker tries to send a reply (a connection cut, a server
/// restarting) before it fails the job, which then runs again.
const SEND_REPLY_WITHIN: Duration = Duration::from_secs(5);

/// Sends `reply`, trying again (50 ms, doubling to 1 s) for up to
/// [`SEND_REPLY_WITHIN`]: a reply that waits out a blip is the body's one run,
/// where a failed job is a second run, and, if the engine could not record
/// the failure either, a caller left waiting.
async fn send_patiently(broker: &Broker, reply_to: &str, reply: &Reply) -> Result<(), BoxDynError> {
    let deadline = tokio::time::Instant::now() + SEND_REPLY_WITHIN;
    let mut backoff = Duration::from_millis(50);
    loop {
        match broker.send_reply(reply_to, reply).await {
            Ok(()) => return Ok(()),
            Err(error) if tokio::time::Instant::now() + backoff < deadline => {
                tracing::warn!(job = %reply.job, %error, ?backoff, "cannot send the reply; trying again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// The end of a withdrawn job: none for a caller that stopped waiting; for a
/// submitted job, which its record keeps, `Cancelled`, written by the worker
/// that stopped it, so that a cancel learns the body did not run to its end
/// (the first reply stays: a body that answered first keeps its answer).
async fn cancelled(job: &Job, state: &State) -> Result<(), BoxDynError> {
    if !is_job_key(&job.reply_to) {
        return Ok(());
    }
    let reply = Reply::cancelled(&job.id, state.worker.clone(), job.tool.clone());
    state.broker.send_reply(&job.reply_to, &reply).await?;
    Ok(())
}

/// Where the job is one run of a call a `retry` makes (its context has an
/// [`Attempt`]), counts the run against the retry's `of`: a run past it, an
/// attempt or a redelivery of a job whose worker died, is refused, so the body
/// runs at most `of` times for one call. `None`: run it.
async fn over_its_runs(tool: &str, broker: &Broker) -> Option<ToolError> {
    let attempt = context::get::<Attempt>()?;
    let refused = |reason: String| ToolError::Refused {
        tool: Name::lossy(tool),
        extension: Name::lossy("retry"),
        reason,
    };
    let call = &attempt.call;
    if call.is_empty()
        || call.len() > Attempt::MAX_CALL_LEN
        || !call.bytes().all(|byte| byte.is_ascii_alphanumeric())
    {
        return Some(refused(format!(
            "the job names its call `{}`, not a call name (1 to {} letters and digits)",
            toolgraft::error::shorten(call),
            Attempt::MAX_CALL_LEN
        )));
    }
    let runs = match broker.count_run(call).await {
        Ok(runs) => runs,
        // Uncounted, a run could be one too many: the engine is asked again
        // at the next attempt.
        Err(error) => {
            return Some(ToolError::Relocation {
                tool: Name::lossy(tool),
                backend: Name::lossy("remote"),
                reason: format!("cannot count the runs of call `{call}`: {error}"),
            });
        }
    };
    tracing::info!(tool = %tool, call = %call, attempt = attempt.number, run = runs, of = attempt.of, "a retried call's run");
    (runs > u64::from(attempt.of)).then(|| {
        refused(format!(
            "its call has run {} times already, attempts and redeliveries together, all that `retry` allows ({})",
            runs - 1,
            attempt.of
        ))
    })
}

/// How often a running job looks whether its caller withdrew it, where the tier
/// does not announce withdrawals.
const WITHDRAWN_POLL: Duration = Duration::from_millis(100);

/// Runs `call` until it ends, or until the caller withdraws `job`: then the
/// call's future is dropped (the body stops at its next `.await`) and `None`
/// is the outcome. The withdrawal is the tier's announcement (`watch`, with a
/// look every [`BACKSTOP`]), or, where the tier makes none, a look every
/// [`WITHDRAWN_POLL`] (a look that fails is tried again at the next).
async fn until_withdrawn<F: Future>(
    job: &str,
    watch: &Watch,
    broker: &Broker,
    call: F,
) -> Option<F::Output> {
    // Resolves at the first look, one `every` apart, that finds `job` withdrawn.
    let looking = |every: Duration| async move {
        loop {
            tokio::time::sleep(every).await;
            if broker.is_withdrawn(job).await.unwrap_or(false) {
                return;
            }
        }
    };
    let withdrawn = async {
        let Some(announced) = watch.announced() else {
            return looking(WITHDRAWN_POLL).await;
        };
        // Announced; and a look every `BACKSTOP`, for an announcement a
        // silently dead connection lost.
        tokio::select! {
            () = announced => {}
            () = looking(BACKSTOP) => {}
        }
    };
    tokio::select! {
        biased;
        output = call => Some(output),
        () = withdrawn => None,
    }
}

/// Runs `call` with a progress sink and a log sink whose reports and messages
/// go back on the job's reply channel, in order, all before the reply: progress
/// at most every [`PROGRESS_EVERY`] (the newest of the reports made meanwhile,
/// the last one always), log messages at the caller's level and above, at most
/// [`LOG_BACKLOG`](toolgraft::context::LOG_BACKLOG) waiting (the oldest dropped
/// past them, and counted); each only when the caller listens for it.
async fn forwarding<F: Future>(job: &Job, broker: &Broker, span: &JobSpan, call: F) -> F::Output {
    // A submitted job answers no one waiting.
    let answered = !is_job_key(&job.reply_to);
    let wants_progress = job.progress && answered;
    let wants_log = job.log.filter(|_| answered);
    if !wants_progress && wants_log.is_none() {
        return call.await;
    }
    // A fold or a queue whose sink is not set yields nothing: the loop below
    // waits on both either way.
    let (progress_sink, mut fold) = ProgressSink::folded();
    let (log_sink, logs) = LogSink::queue(wants_log.unwrap_or(LogLevel::Emergency));
    let mut context = Context::current();
    if wants_progress {
        context = context.with(progress_sink);
    }
    if wants_log.is_some() {
        context = context.with(log_sink);
    }
    // Sent by a task of its own, in order: a slow send never holds the body up
    // (the newest report waits in the fold, log messages in their bounded queue).
    let (done, mut finished) = tokio::sync::oneshot::channel::<()>();
    let sender = tokio::spawn({
        let (broker, job, reply_to) = (broker.clone(), job.id.clone(), job.reply_to.clone());
        let span = span.clone();
        async move {
            let mut seq = 0u64;
            let progress = |progress| {
                Message::Progress(ProgressReport {
                    job: job.clone(),
                    progress,
                })
            };
            let log = |log| {
                Message::Log(LogReport {
                    job: job.clone(),
                    log,
                })
            };
            loop {
                let report = tokio::select! {
                    biased;
                    // The body is done: what it reported and logged last goes
                    // after the rest, before the reply.
                    _ = &mut finished => break,
                    reported = fold.next() => {
                        span.progress(&reported);
                        progress(reported)
                    }
                    logged = logs.next() => log(logged),
                };
                send(&broker, &reply_to, &mut seq, &report).await;
            }
            if let Some(last) = fold.try_next() {
                span.progress(&last);
                send(&broker, &reply_to, &mut seq, &progress(last)).await;
            }
            while let Some(logged) = logs.try_next() {
                send(&broker, &reply_to, &mut seq, &log(logged)).await;
            }
        }
    });
    let output = context.scope(call).await;
    drop(done);
    let _ = sender.await;
    output
}

/// Sends `report`, the `seq`-th of its job, and counts it; one that cannot be
/// sent is lost, not the job.
async fn send(broker: &Broker, reply_to: &str, seq: &mut u64, report: &Message) {
    if let Err(error) = broker.send_report(reply_to, *seq, report).await {
        tracing::warn!(job = %report.job(), %error, "cannot send a progress report or log message");
    }
    *seq += 1;
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Waits (up to the worker's fleet wait) for the worker to reach the job's
/// binding generation; the refusal if it does not.
async fn behind(job: &Job, state: &State) -> Option<WireError> {
    let fleet = state.fleet.as_ref()?;
    if job.generation <= fleet.generation() {
        return None;
    }
    fleet.kick();
    if super::fleet::wait_for(fleet.generations(), job.generation, state.fleet_wait).await {
        return None;
    }
    Some(WireError::Other {
        tool: job.tool.clone(),
        message: format!(
            "the worker is at binding generation {} and the job was sent at generation {}; \
             it did not catch up within {:?}",
            fleet.generation(),
            job.generation,
            state.fleet_wait
        ),
    })
}

/// Removes the queue's old finished jobs every beat (retention): each worker
/// does, the removal is idempotent.
async fn vacuum(broker: Broker, every: Duration) {
    let mut beat = tokio::time::interval(every);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        beat.tick().await;
        // A backlog goes a batch at a time, a few batches a beat.
        for _ in 0..10 {
            match broker.vacuum().await {
                Ok(removed) if removed >= VACUUM_BATCH => continue,
                Ok(removed) => {
                    if removed > 0 {
                        tracing::debug!(removed, "vacuumed finished jobs");
                    }
                }
                Err(error) => tracing::debug!(%error, "vacuum failed; trying again next beat"),
            }
            break;
        }
    }
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::scratch::NewFile;

    fn job_at(generation: u64) -> Job {
        Job {
            id: ulid::Ulid::generate().to_string(),
            tool: "weather".into(),
            args: json!({}),
            reply_to: "nobody".into(),
            context: Default::default(),
            generation,
            progress: false,
            log: None,
            queued_at_us: 0,
            sent_at_us: 0,
        }
    }

    /// A worker that follows the fleet and one that cannot reach a job's
    /// generation: it waits its fleet wait, no longer, then refuses the job with
    /// both generations named (the job is replied to, not run on a stale binding).
    #[tokio::test]
    async fn a_worker_behind_a_job_catches_up_or_refuses_it_after_its_wait() {
        let file = NewFile::new("behind");
        let remote = Remote::new(&file.0).unwrap();
        let engine = remote.engine();
        let worker_toolset = Toolset::new();
        let fleet = Fleet::follow(&remote, &worker_toolset, Registry::new(), "w".into())
            .await
            .unwrap();
        let state = State {
            toolset: worker_toolset,
            broker: Broker::connect(remote.tier(), remote.queue_name(), engine)
                .await
                .unwrap(),
            queue: remote.queue_name().to_owned(),
            worker: "w".into(),
            fleet: Some(fleet),
            fleet_wait: Duration::from_millis(300),
            withdrawals: Arc::default(),
        };
        assert_eq!(state.fleet.as_ref().unwrap().generation(), 0);

        // A caller publishes generation 1: a job sent at it wakes the worker's
        // follower, which catches up well within the wait.
        let caller_toolset = Toolset::new();
        let caller = Fleet::join(&remote, &caller_toolset, Registry::new())
            .await
            .unwrap();
        let published = caller.publish().await.unwrap();
        assert_eq!(published, 1);
        let started = Instant::now();
        assert!(behind(&job_at(published), &state).await.is_none());
        let caught_up = started.elapsed();
        assert!(caught_up < state.fleet_wait, "{caught_up:?}");
        assert_eq!(state.fleet.as_ref().unwrap().generation(), 1);

        // A generation nobody published (a caller ahead of the store the worker
        // reads): refused once the wait is over.
        let started = Instant::now();
        let refused = behind(&job_at(published + 1), &state).await;
        let waited = started.elapsed();
        assert!(waited >= state.fleet_wait, "{waited:?}");
        assert!(waited < state.fleet_wait * 4, "bounded: {waited:?}");
        match refused {
            Some(WireError::Other { tool, message }) => {
                assert_eq!(tool, "weather");
                assert_eq!(
                    message,
                    "the worker is at binding generation 1 and the job was sent at \
                     generation 2; it did not catch up within 300ms"
                );
            }
            other => panic!("not refused as behind: {other:?}"),
        }

        // A job from the worker's own generation or an older one runs at once.
        let started = Instant::now();
        assert!(behind(&job_at(0), &state).await.is_none());
        assert!(behind(&job_at(1), &state).await.is_none());
        assert!(started.elapsed() < Duration::from_millis(50));
    }
}
