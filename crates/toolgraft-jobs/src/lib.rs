//! Backends for [toolgraft] that run the body in **other processes**, on
//! the apalis job engine (features `redis`, `postgres` and `sqlite`, the default).
//!
//! [`Remote`] is a backend: its branch enqueues a job carrying the NAME of its
//! layer input and the JSON arguments, and waits for the reply. A [`Worker`] is a
//! process that binds the same tools and combos (the same binding code) and runs
//! jobs by name. No code travels ([relocation](toolgraft::rulebook#relocation)).
//!
//! Three tiers, picked by the URL:
//!
//! * `postgres://user@host:port/database`: a PostgreSQL server (13 or later)
//!   carries jobs and replies (feature `postgres`): durable, a restart of the
//!   database loses no job;
//! * `redis://host:port`: a Redis server carries jobs and replies (feature `redis`);
//! * `sqlite://path/to/jobs.db`: an SQLite file the processes share, no server
//!   (feature `sqlite`, on by default), for one machine.
//!
//! What is guaranteed:
//!
//! * **At least once.** A worker that dies mid-job (SIGKILL, power) stops beating
//!   (one beat a second unless configured); three missed beats later, at the next beat of a live
//!   worker, its jobs go back into the queue and run again: about 3 to 4 s after
//!   the death. The caller gets exactly one result (the first reply; later ones are
//!   dropped), but a body can run more than once: make relocated bodies
//!   idempotent, or put `once` inside `remote` with its outcomes in the engine
//!   (`[once, remote]`: [`toolgraft::ext::OncePerKey`] with
//!   [`Remote::outcomes`]), so that a job run again answers its first run's
//!   outcome (a worker killed after the body's effect and before its reply
//!   included). A worker that cannot send its reply (trying for 5 s) fails the
//!   job, which runs again too.
//! * **Retries and redeliveries share one count.** Under a `retry`
//!   ([`toolgraft::ext::Retry`]) around `remote`, each run of a job (an attempt's,
//!   or a redelivery's) is counted in the job engine, atomically across workers;
//!   a run past the retry's attempts is refused (`ToolError::Refused` from
//!   `retry`), so the body runs at most that many times for one call.
//! * A tool's own failure (a body error, a panic, a refused call) is a result: it
//!   comes back as the same [`ToolError`] variant and is not retried.
//! * Arguments are decoded (and checked) in the caller before anything is
//!   enqueued; bad ones never reach a queue.
//! * A caller that waits longer than the backend's timeout (connecting, enqueueing
//!   and waiting for the reply) gets [`ToolError::TimedOut`] naming the job.
//! * A worker whose engine stops it (a lost connection: a Redis restart) starts
//!   again, with backoff (50 ms doubling to 1 s); on Redis under the same name,
//!   whose registering takes back the jobs it had in flight; on PostgreSQL under
//!   a new one (below). A caller's call in flight gets its
//!   result or [`ToolError::TimedOut`]; the next calls succeed once the server is
//!   back (about 2 s after, measured). Only a worker that cannot connect when it
//!   starts returns an error.
//! * **On PostgreSQL, a restart of the database loses no call.** Jobs, replies,
//!   withdrawals and records are rows, each written in one statement with its
//!   notification: what was committed survives, and a reply is deleted only
//!   once its caller has it. Each start of a worker takes a name of its own for
//!   the engine (apalis-postgres takes back a dead worker's jobs, not a live
//!   one's), so the jobs a lost instance held run again as a dead worker's once
//!   `dead_after` passes; a caller's reply listener reconnects and looks again.
//!   A withdrawal announced on the channel counts only with its row (anyone who
//!   may connect may `NOTIFY`). The database must be UTF8, reached through
//!   session pooling (the tier listens), by a role that may create the
//!   `apalis` and `toolgraft` schemas at the first start (apalis's migrations
//!   create the `hstore` and `pgcrypto` extensions): a database of its own is
//!   best. Measured (`tests/jobs/postgres_faults.rs`, 16 callers, the server stopped
//!   for a second): every call sent before or during the stop answered, the
//!   longest in about 3.3 s; a call whose job could not be enqueued while the
//!   server was down fails with a transient error (`retry` acts on it) within
//!   2 s, the pool's connection wait.
//! * Idle workers do not poll often: a caller wakes its queue's workers when it
//!   enqueues (Redis pub/sub; on SQLite, Unix datagram "doorbells" beside the
//!   file, which also wake a caller at its reply). The poll (`poll_ms`, 500 ms) is
//!   a safety net. The engine settings (poll, heartbeat, missed beats, retention
//!   of uncollected replies) are [`RemoteConfig`] fields.
//! * A [`Fleet`] keeps every process of a queue at the same combos: changes a
//!   caller makes at run time reach the other callers and the workers.
//! * **Progress comes back.** A body on a worker reports through the call
//!   context (`toolgraft::context::report_progress`) as in process; when the
//!   caller listens (its call has a progress sink: an MCP request with a progress
//!   token), the reports come back on its reply channel, in order, at most one
//!   every 50 ms (faster ones fold into the newest), the last before the reply.
//! * **A caller that stops waiting withdraws its job** (an MCP cancellation,
//!   its timeout: the call's future is dropped; in a 2025-11-25 session a
//!   dropped POST stream is not one: the client may resume it, so the call runs
//!   on). A worker skips a withdrawn job it has not started, and stops one it
//!   runs: the body's future is dropped, no reply is sent. On Redis and
//!   PostgreSQL the withdrawal is announced to the workers (pub/sub, `NOTIFY`),
//!   so the body stops within a round trip while the worker's subscription is up
//!   (and looks every 5 s besides); on SQLite the worker looks every 100 ms. A cancelled
//!   submitted job answers what its body did: `cancelled` only when the worker
//!   stopped it.
//! * The call context crosses as each entry says: the principal, the MCP
//!   request's `_meta` and entries of one's own arrive serialized; the MCP peer
//!   does not, and the rules keep what needs it outside `remote` (rule
//!   `caller-outside-relocation`). `RedisLedger` (feature `redis`) spends an
//!   `approve` approval on every replica of a fleet (whichever tier carries
//!   the jobs: the ledger and the limits below are Redis stores of their own,
//!   a PostgreSQL one is not built yet).
//! * **Limits hold for the fleet.** `RedisLimits` (feature `redis`) is the
//!   store of `rate_limit` and `concurrency` that every replica shares: N
//!   replicas together admit the limit, not N times it (a Lua script on the
//!   server per answer; a server that cannot be reached refuses the call).
//!   A limit's refusal (`ToolError::Overloaded`) crosses back from a worker with
//!   its `retry_after`.
//!
//! # Submit and schedule
//!
//! [`Submit`] sits right outside a `remote` element: `[remote, submit]` on `tool`
//! binds `tool_remote_submit`, which enqueues the job `tool_remote` would send
//! (the same queue, binding generation and at-least-once delivery) and answers at
//! once with a [`JobTicket`] `{job_id, queue, tool, state, run_at}`. Its
//! arguments are the tool's plus, optionally, `delay_ms` or `at` (an RFC 3339 time),
//! which schedule the job. The backend runs calls; its queue's jobs are read
//! through a handle of their own, [`Remote::jobs`]: [`Jobs::status`],
//! [`Jobs::result`] and [`Jobs::cancel`] follow a job from Rust; [`Jobs::tools`]
//! are the same as tools (`job_status`, `job_result`, `job_cancel`, taking
//! `{job_id}`) for an agent; [`Jobs::tools_named`] names them after a prefix of
//! your own, one set per queue.
//! Results, and the [`ToolError`] a job failed with, are kept for the retention
//! (`retention_s`). A scheduled or queued job that is cancelled never runs; one a
//! worker runs is withdrawn: the worker stops the body (within a round trip on
//! Redis, its 100 ms look on SQLite) and the job reads cancelled; one whose body
//! ran to its end first stays as it ended ([`JobError::NotCancellable`]): the
//! worker, not the cancel, says which (a worker that says nothing within a
//! second, dead or cut off, has the cancel for its end).
//!
//! # What a call costs the engine
//!
//! On Redis (7 or later; a Redis Cluster node is refused at connect: the scripts
//! move several keys of a queue at once, apalis-redis's among them, which a
//! cluster keeps in different slots), a relocated call costs about 8.6 round
//! trips, caller and worker together, as the server counts them (MONITOR, in
//! `crates/toolgraft-jobs/tests/jobs/traffic.rs`): the push (apalis-redis's
//! script) and the wake-up (its push publishes no event for a job that passes
//! through its schedule, which every job does); the fetch that takes the job,
//! the one apalis makes at once after a job and, for most calls, a third; the
//! lease and the acknowledgement (apalis-redis's scripts); the reply (one
//! transaction); and the caller's one read of every message waiting
//! (`BLMPOP`). Withdrawals are announced (pub/sub), not looked up per job and
//! polled per running job: a worker looks a job up only when it was sent less
//! than 2 s (the clocks' margin) after the worker last began listening, and
//! each running job once when it (re)subscribes. It was 11.1 round trips.
//!
//! On PostgreSQL a call costs more statements, each a round trip (BEGIN and
//! COMMIT among them; `pg_stat_statements` counts them in
//! `benches/relocated.rs`): apalis-postgres's push and its fetch and
//! acknowledgement each run in a transaction of their own (a worker fetches up
//! to 8 jobs at once, never more than it runs); the caller's read of its
//! replies is one statement after the notification, which takes the new ones
//! and deletes the ones it delivered before: about 19 statements per call. The
//! workers wake on apalis's own insert notification (no wake-up of
//! toolgraft's), and apalis's lock step (`lock_tasks`) is off: its fetch's
//! `Queued` already says a worker took the job.
//!
//! # Traces
//!
//! With feature `otel`, a worker continues the trace each job carries (the
//! caller's W3C trace context, which with the core's `otel` is the `remote`
//! layer's span): the job's run is a consumer span `process <queue>`, by the
//! OpenTelemetry messaging conventions (`messaging.destination.name`,
//! `messaging.message.id`, `messaging.client.id` the worker's name), and the
//! spans of the layers the worker runs and of the body are its children. Beside
//! it, with the same parent, the job's queue wait is a span `wait <queue>`, from
//! when the job became runnable (enqueued, or the time it was scheduled for) to
//! when a worker picked it up. The progress reports sent back to the caller and
//! a withdrawal are events on the job's span (`toolgraft.job.progress`,
//! `toolgraft.job.withdrawn`); a job that failed has `error.type` (the error's
//! kind: `body`, `refused`, `timed_out`...) and an error status.
//!
//! The wait begins by the caller's clock and ends by the worker's: a skew
//! between the machines' clocks lengthens or shortens it by as much (a wait
//! that would end before it begins is shown as none, with the difference in
//! `toolgraft.job.clock_skew_us`). The application installs the tracer
//! provider as with any OpenTelemetry library, in its `tracing-opentelemetry`
//! layer and as the global provider, which the queue wait is made with (a
//! `tracing` span cannot start before the worker saw the job). The examples
//! `traced` and `otlp_receiver` show one trace from an MCP client to a worker
//! over OTLP (`OTEL_EXPORTER_OTLP_ENDPOINT`).
//!
//! # MCP tasks
//!
//! A [`Remote`] is a [`Follow`](toolgraft::relocation::Follow): its jobs are read by
//! id from its store, in any process. A server that offers to follow a call
//! ([`Deferral`](toolgraft::relocation::Deferral); toolgraft-mcp's
//! `Tasks::with_follower(remote)`) gets the call enqueued, not waited for, and the
//! job's id back ([`Deferred`](toolgraft::relocation::Deferred)): an MCP task that
//! every caller process of the fleet answers for. The job records the principal
//! it was made for.
//!
//! **Why `submit` is a transformer, not a backend.** A backend preserves output
//! shape: its branch returns what the layer below returns, and inherits its output
//! schema (rule [`output-schema`](toolgraft::rulebook#output-schema)). A branch that
//! answers with a ticket instead of the tool's result does not, so `submit` is a
//! transformer: it declares its own input schema (the layer's, plus `delay_ms` and
//! `at`) and its own output schema (the ticket), and leaves the relocation to the
//! `remote` backend right inside it. Over anything else a typed combo does not
//! compile (`Submit` layers over [`Remoted`] only), and a manifest is refused when
//! bound ([`BindError::ExtensionFailed`](toolgraft::BindError::ExtensionFailed),
//! naming the tool and the fix; register it with [`Submit::dynamic`]).
//!
//! ```no_run
//! use serde_json::json;
//! use toolgraft_jobs::{Remote, Worker};
//! use toolgraft::prelude::*;
//!
//! #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
//! struct Shout { text: String }
//!
//! /// The same in the caller and in the worker.
//! fn toolset(remote: &Remote) -> Result<Toolset, Box<dyn std::error::Error>> {
//!     let shout = Tool::builder().name("shout").description("Return the text, loud.")
//!         .body(|i: Shout| async move { Ok(i.text.to_uppercase()) }).build()?;
//!     let toolset = Toolset::new();
//!     toolset.bind((shout.combo().with(remote.clone()),))?;
//!     Ok(toolset)
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let remote = Remote::new("redis://127.0.0.1:6379")?.with_queue("shouts")?;
//! if std::env::args().any(|arg| arg == "--worker") {
//!     // Runs jobs until SIGTERM, then finishes the ones in flight.
//!     Worker::new(toolset(&remote)?, &remote).run().await?;
//! } else {
//!     let answer = toolset(&remote)?.call("shout_remote", json!({"text": "hi"})).await?;
//!     assert_eq!(answer, json!("HI"));
//! }
//! # Ok(()) }
//! ```
//!
//! The [guide] takes it step by step: a worker and its caller, what is
//! guaranteed, submitting and scheduling, MCP tasks that are jobs, fleets.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
// Without a tier (toolgraft's UI tests only), what serves the tiers is unused.
#![cfg_attr(
    not(any(feature = "redis", feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_imports, unused_macros, unused_variables)
)]

#[cfg(not(any(
    feature = "redis",
    feature = "sqlite",
    feature = "postgres",
    feature = "__ui-tests"
)))]
compile_error!(
    "toolgraft-jobs needs a tier: enable its feature `sqlite` (the default), `redis` or `postgres` (any of them)"
);

// The modules, bottom to top: a module imports only from the ones above it in
// this list (`scripts/module-graph` checks it), and none from this file (the
// crate root is the top floor). The shared clock and addresses, the job
// vocabulary, then the tiers that carry it, the process's per-queue state, and
// the three sides on top: the caller's (`remote`, the job store it reads
// back, `submit`), the fleet, the worker.
#[cfg(all(test, feature = "sqlite"))]
mod scratch;
mod clock;
mod address;
mod wire;
mod job;
mod telemetry;
// Only a tier that announces withdrawals (Redis, PostgreSQL) feeds the registry.
#[cfg_attr(not(any(feature = "redis", feature = "postgres")), allow(dead_code))]
mod withdrawals;
#[cfg(feature = "redis")]
mod store_connection;
mod tier;
#[cfg(feature = "redis")]
mod ledger;
#[cfg(feature = "redis")]
mod limits;
mod client;
mod queues;
mod remote;
mod outcomes;
mod store;
mod follow;
mod tools;
mod submit;
mod fleet;
mod worker;
pub mod guide;

pub use fleet::{Fleet, FleetError, FleetMember, Role};
pub use job::{JobError, JobResult, JobState, JobTicket};
#[cfg(feature = "redis")]
pub use ledger::RedisLedger;
#[cfg(feature = "redis")]
pub use limits::RedisLimits;
pub use outcomes::JobOutcomes;
pub use remote::{MAX_TIMEOUT_MS, Remote, RemoteConfig, Remoted};
pub use store::Jobs;
pub use submit::{MAX_SCHEDULING_HORIZON, PAST_SLACK, RemoteBranch, Submission, Submit, Submitted};
pub use wire::RemoteFailure;
pub use worker::{Worker, WorkerError};

#[cfg(doc)]
use toolgraft::ToolError;
