//! Relocation to worker processes on apalis: every test runs against each tier
//! built in (Redis, SQLite), with workers that are real processes: this test
//! binary started again as `worker_process`, binding the same toolset with the
//! same code (`toolset`), as the rulebook's `relocation` asks.
//!
//! Redis: `TOOLGRAFT_REDIS_URL` names a running server (`scripts/test` starts one);
//! without it each test starts its own `redis-server` on a free loopback port.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgraft::context::{self, ChainDepth, Entry, InProcess, Keyed, Serialized, Unkeyed};
use toolgraft::error::BoxError;
use toolgraft::ext::{Batch, Cache, Proxy, Trace, proxy};
use toolgraft::extension::Configurable;
use toolgraft::prelude::*;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::{ElementSpec, Manifest};
use toolgraft::toolset::BaseTools;
use toolgraft::{BindError, Combo, Registry, ToolError};
use toolgraft_jobs::{
    Fleet, JobError, JobResult, JobState, JobTicket, Remote, RemoteFailure, Submit, Worker,
};

// ---------------------------------------------------------------- the toolset

#[derive(Deserialize, Serialize, JsonSchema)]
struct City {
    city: String,
}

/// Where the body ran, and what it saw.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
struct Report {
    city: String,
    pid: u32,
    route: Option<String>,
    /// The caller's own context entries, where they reached.
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    in_process: Option<u32>,
    #[serde(default)]
    depth: usize,
}

/// A user's own context entry that travels to worker processes.
#[derive(Clone, Debug, Deserialize, Serialize)]
struct Tenant(String);

impl Entry for Tenant {
    const NAME: &'static str = "jobs_test.tenant";
    type Travel = Serialized;
    type Key = Keyed;
}

/// One that reaches worker threads only.
#[derive(Clone, Debug)]
struct ThreadsOnly(u32);

impl Entry for ThreadsOnly {
    const NAME: &'static str = "jobs_test.threads_only";
    type Travel = InProcess;
    type Key = Unkeyed;
}

#[derive(Clone, Deserialize, Serialize, JsonSchema)]
struct Sleep {
    ms: u64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Nothing {}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Steps {
    steps: u32,
    /// Between two steps.
    ms: u64,
}

/// Reports each step's progress, `steps` of them, `ms` apart; answers with the
/// process it ran in and the principal it ran for.
async fn steps(input: Steps) -> Result<Value, BoxError> {
    for step in 1..=input.steps {
        tokio::time::sleep(Duration::from_millis(input.ms)).await;
        let progress = context::Progress::new(step.into())
            .of(input.steps.into())
            .with_message(format!("step {step} in pid {}", std::process::id()));
        context::report_progress(progress);
    }
    let principal = context::get::<context::Principal>().map(|principal| principal.to_string());
    Ok(json!({"pid": std::process::id(), "principal": principal}))
}

async fn whereami(input: City) -> Result<Report, BoxError> {
    Ok(Report {
        city: input.city,
        pid: std::process::id(),
        route: proxy::current_route(),
        tenant: context::get::<Tenant>().map(|tenant| tenant.0),
        in_process: context::get::<ThreadsOnly>().map(|entry| entry.0),
        depth: ChainDepth::current(),
    })
}

async fn slow(input: Sleep) -> Result<u32, BoxError> {
    tokio::time::sleep(Duration::from_millis(input.ms)).await;
    Ok(std::process::id())
}

async fn fail(_: Nothing) -> Result<u32, BoxError> {
    Err("the body failed on purpose".into())
}

async fn boom(_: Nothing) -> Result<u32, BoxError> {
    panic!("boom on purpose")
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Path {
    path: String,
}

/// A side effect the tests can see: creates the file `path`.
async fn mark(input: Path) -> Result<u32, BoxError> {
    std::fs::write(&input.path, std::process::id().to_string())?;
    Ok(std::process::id())
}

fn whereami_tool() -> impl BaseTool<Input = City, Output = Report> {
    Tool::builder()
        .name("whereami")
        .description("Report the process and route the body runs with.")
        .read_only()
        .body(whereami)
        .build()
        .unwrap()
}

/// The one binding code of callers and workers.
fn toolset(remote: &Remote) -> Toolset {
    let whereami = whereami_tool();
    let slow = Tool::builder()
        .name("slow")
        .description("Sleep, then report the process.")
        .read_only()
        .body(slow)
        .build()
        .unwrap();
    let fail = Tool::builder()
        .name("fail")
        .description("Always fails.")
        .read_only()
        .body(fail)
        .build()
        .unwrap();
    let boom = Tool::builder()
        .name("boom")
        .description("Always panics.")
        .read_only()
        .body(boom)
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((
            Combo::on(&whereami)
                .with(Proxy::allow(["egress-eu", "egress-us"]))
                .with(remote.clone()),
            Combo::on(&whereami)
                .with(remote.clone())
                .with(Cache::default()),
            Combo::on(&whereami)
                .with(Batch::default())
                .with(remote.clone()),
            Combo::on(&whereami)
                .with(remote.clone())
                .with(Batch::default()),
        ))
        .unwrap();
    let mark = Tool::builder()
        .name("mark")
        .description("Create a file.")
        .body(mark)
        .build()
        .unwrap();
    // `[remote, submit]` binds `slow_remote` too: one combo for both.
    toolset
        .bind((slow.combo().with(remote.clone()).with(Submit::new()),))
        .unwrap();
    toolset
        .bind((fail.combo().with(remote.clone()).with(Submit::new()),))
        .unwrap();
    toolset
        .bind((mark.combo().with(remote.clone()).with(Submit::new()),))
        .unwrap();
    toolset.bind((boom.combo().with(remote.clone()),)).unwrap();
    let steps = Tool::builder()
        .name("steps")
        .description("Report progress in steps.")
        .read_only()
        .body(steps)
        .build()
        .unwrap();
    toolset.bind((steps.combo().with(remote.clone()),)).unwrap();
    toolset
}

/// A tool only callers bind: workers do not know it.
fn with_unknown_tool(toolset: &Toolset, remote: &Remote) {
    let extra = Tool::builder()
        .name("extra")
        .description("Branch in callers only.")
        .read_only()
        .body(whereami)
        .build()
        .unwrap();
    toolset.bind((extra.combo().with(remote.clone()),)).unwrap();
}

// ---------------------------------------------------------------- worker processes

const WORKER_URL: &str = "TOOLGRAFT_TEST_WORKER_URL";
const WORKER_QUEUE: &str = "TOOLGRAFT_TEST_WORKER_QUEUE";
/// A JSON object of `RemoteConfig` fields the worker's remote takes over.
const WORKER_ENGINE: &str = "TOOLGRAFT_TEST_WORKER_ENGINE";
/// Set: the worker follows the queue's fleet with `registry()`.
const WORKER_FLEET: &str = "TOOLGRAFT_TEST_WORKER_FLEET";
/// The branch a caller process waits for, then calls.
const CALLER_BRANCH: &str = "TOOLGRAFT_TEST_CALLER_BRANCH";

/// The extensions every process of a fleet can rebind by name.
fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register(Configured::new(Proxy::allow(["egress-eu", "egress-us"])))
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(Configured::new(Batch::default()))
        .unwrap()
        .register(Configured::<Remote>::named("remote"))
        .unwrap()
        .register(Submit::new().dynamic())
        .unwrap();
    registry
}

/// The worker process the tests start: this binary, run as
/// `jobs --exact worker_process --ignored` with the two variables above.
#[test]
#[ignore = "a worker process: the other tests start it"]
fn worker_process() {
    let (Ok(url), Ok(queue)) = (std::env::var(WORKER_URL), std::env::var(WORKER_QUEUE)) else {
        return;
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let mut remote = Remote::new(url).unwrap().queue(queue).unwrap();
    if let Ok(engine) = std::env::var(WORKER_ENGINE) {
        let mut config = serde_json::to_value(remote.settings()).unwrap();
        let engine: serde_json::Map<String, Value> = serde_json::from_str(&engine).unwrap();
        config.as_object_mut().unwrap().extend(engine);
        remote = Remote::from_config(serde_json::from_value(config).unwrap()).unwrap();
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut worker = Worker::new(toolset(&remote), &remote).grace(Duration::from_secs(10));
    if std::env::var_os(WORKER_FLEET).is_some() {
        worker = worker.fleet(registry());
    }
    runtime.block_on(worker.run()).unwrap();
    eprintln!("worker {} exited cleanly", std::process::id());
}

/// A caller process of a fleet: joins it, waits until its toolset binds
/// `CALLER_BRANCH` (a change another caller made), calls it, and prints what
/// answered.
#[test]
#[ignore = "a caller process: the fleet test starts it"]
fn fleet_caller_process() {
    let (Ok(url), Ok(queue), Ok(branch)) = (
        std::env::var(WORKER_URL),
        std::env::var(WORKER_QUEUE),
        std::env::var(CALLER_BRANCH),
    ) else {
        return;
    };
    let remote = Remote::new(url).unwrap().queue(queue).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let toolset = toolset(&remote);
        let fleet = Fleet::join(&remote, &toolset, registry()).await.unwrap();
        eprintln!(
            "caller {} joined at generation {}",
            std::process::id(),
            fleet.generation()
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while !toolset.contains(&branch) {
            assert!(Instant::now() < deadline, "`{branch}` never came");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        eprintln!(
            "caller {} binds `{branch}` at generation {}",
            std::process::id(),
            fleet.generation()
        );
        let mut pids = BTreeSet::new();
        for at in 0..10 {
            let answer = toolset
                .call(&branch, json!({"city": format!("b{at}")}))
                .await
                .unwrap_or_else(|error| panic!("`{branch}` failed: {error}"));
            pids.insert(report(answer).pid);
        }
        eprintln!(
            "caller {} answered 10 calls of `{branch}`, by worker pids {pids:?}",
            std::process::id()
        );
    });
}

/// A running worker process and what it logged; killed when dropped.
struct WorkerProcess {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl WorkerProcess {
    fn start(env: &Env) -> Self {
        Self::spawn(env, "worker_process", &[])
    }

    /// A worker that follows the queue's fleet.
    fn start_in_fleet(env: &Env) -> Self {
        Self::spawn(env, "worker_process", &[(WORKER_FLEET, "1")])
    }

    /// This binary run as the ignored test `test`, with the env's URL and queue.
    fn spawn(env: &Env, test: &str, vars: &[(&str, &str)]) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--ignored", "--nocapture"])
            .envs(vars.iter().copied())
            .env(WORKER_URL, &env.url)
            .env(WORKER_QUEUE, &env.queue)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the test binary starts as a worker");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        Self { child, log }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Log lines of jobs started for `tool`.
    fn jobs_started(&self, tool: &str) -> usize {
        let needle = format!("tool={tool} ");
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|line| line.contains("job started") && line.contains(&needle))
            .count()
    }

    /// Jobs started for `tool` once the log has at least `at_least` of them (or
    /// five seconds passed), and a moment more for any extra one to show: the log
    /// is read by another thread, a little after the job's reply.
    async fn settled_jobs(&self, tool: &str, at_least: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.jobs_started(tool) < at_least && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.jobs_started(tool)
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits until the log has a line containing all of `needles`.
    async fn wait_for_line(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let found = self
                .log
                .lock()
                .unwrap()
                .iter()
                .find(|line| needles.iter().all(|needle| line.contains(needle)))
                .cloned();
            if let Some(line) = found {
                return line;
            }
            assert!(
                Instant::now() < deadline,
                "no log line with {needles:?}:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    async fn exit_status(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the worker did not exit");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------- tiers

/// One test's job engine: a URL, a queue of its own, and whatever must live as
/// long as the test (a Redis server, a database file).
struct Env {
    url: String,
    queue: String,
    _guard: Guard,
}

enum Guard {
    None,
    Server(Child),
    File(std::path::PathBuf),
}

impl Drop for Guard {
    fn drop(&mut self) {
        match self {
            Guard::None => {}
            Guard::Server(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Guard::File(path) => {
                for suffix in [
                    "",
                    "-wal",
                    "-shm",
                    ".lock",
                    ".replies",
                    ".replies-wal",
                    ".replies-shm",
                ] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
        }
    }
}

fn unique(test: &str) -> String {
    format!("{test}-{}", ulid::Ulid::generate()).to_lowercase()
}

impl Env {
    #[cfg(feature = "redis")]
    async fn redis(test: &str) -> Self {
        let queue = unique(test);
        if let Ok(url) = std::env::var("TOOLGRAFT_REDIS_URL") {
            return Self {
                url,
                queue,
                _guard: Guard::None,
            };
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect(
                "the Redis tests need a Redis: run them with scripts/test, set TOOLGRAFT_REDIS_URL, or install redis-server",
            );
        let url = format!("redis://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut server = server;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Another process could have taken the port between the probe and the start.
        assert!(
            server.try_wait().unwrap().is_none(),
            "redis-server exited: port {port} was taken"
        );
        Self {
            url,
            queue,
            _guard: Guard::Server(server),
        }
    }

    #[cfg(feature = "sqlite")]
    async fn sqlite(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!("{}.db", unique(test)));
        Self {
            url: format!("sqlite://{}", path.display()),
            queue: "toolgraft".to_owned(),
            _guard: Guard::File(path),
        }
    }

    fn remote(&self) -> Remote {
        Remote::new(&self.url)
            .unwrap()
            .queue(&self.queue)
            .unwrap()
            .timeout(Duration::from_secs(30))
    }
}

macro_rules! on_every_tier {
    ($($test:ident),* $(,)?) => {
        #[cfg(feature = "redis")]
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Env::redis(stringify!($test)).await).await
                }
            )*
        }
        #[cfg(feature = "sqlite")]
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Env::sqlite(stringify!($test)).await).await
                }
            )*
        }
    };
}

on_every_tier!(
    proxy_inside_remote_runs_the_body_in_the_worker_with_the_route,
    a_cache_outside_remote_stays_in_the_caller,
    batch_inside_remote_is_one_job_and_outside_one_per_item,
    failures_come_back_typed_and_the_worker_survives,
    an_unknown_name_on_the_worker_is_an_error_not_a_hang,
    bad_arguments_are_refused_before_anything_is_enqueued,
    a_caller_timeout_names_the_job,
    sigterm_finishes_the_jobs_in_flight,
    a_job_of_a_killed_worker_runs_again_on_another,
    attempts_and_redeliveries_are_counted_together,
    two_workers_serve_many_concurrent_calls,
    a_manifest_relocates_with_the_same_workers,
    progress_from_the_worker_reaches_the_caller_in_order_before_the_reply,
    a_caller_that_stops_waiting_stops_the_body_on_the_worker,
    a_job_withdrawn_while_queued_never_runs,
    a_change_on_one_caller_reaches_every_worker_and_caller,
    finished_jobs_go_after_the_retention,
    an_idle_worker_is_woken_by_each_job,
    submit_then_result,
    schedule_then_cancel,
    a_submitted_failure_comes_back_typed_and_unknown_ids_are_errors,
    a_running_job_is_cancelled_and_its_body_stopped,
    mcp_tasks_are_jobs_any_replica_follows,
    a_manifest_submits_only_right_outside_remote,
    the_callers_context_reaches_the_worker_as_each_entry_says,
    two_queues_have_job_tools_under_names_of_their_own,
    concurrent_cancels_of_a_queued_job_all_cancel_it,
);

fn report(value: Value) -> Report {
    serde_json::from_value(value).unwrap()
}

// ---------------------------------------------------------------- the tests

async fn a_caller_that_stops_waiting_stops_the_body_on_the_worker(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    // A call of ten seconds, dropped once it runs (what an MCP cancellation or a
    // closed HTTP stream does to the call's future).
    let mut call = Box::pin(toolset.call("slow_remote", json!({"ms": 10_000})));
    let started = worker.log_text().matches("job started").count();
    let running = async {
        while worker.log_text().matches("job started").count() == started {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::select! {
        outcome = &mut call => panic!("the call ended before it was cancelled: {outcome:?}"),
        () = running => {}
    }
    drop(call);
    let cancelled = Instant::now();
    let line = worker
        .wait_for_line(&[
            "job withdrawn (its caller stopped waiting, or it was cancelled)",
            "tool=slow ",
        ])
        .await;
    let stopped = cancelled.elapsed();
    eprintln!(
        "cancel to body stopped: {:.1} ms (seen in the log); the worker: {line}",
        stopped.as_secs_f64() * 1e3
    );
    assert!(line.contains("the body stopped, no reply"), "{line}");
    // Stopped, not finished: no reply was made, and the worker serves on.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let finished = |log: String| {
        log.lines()
            .filter(|line| line.contains("job finished") && line.contains("tool=slow "))
            .count()
    };
    assert_eq!(
        finished(worker.log_text()),
        0,
        "the body ran to its end:\n{}",
        worker.log_text()
    );
    let again = toolset.call("slow_remote", json!({"ms": 1})).await.unwrap();
    assert_eq!(again, json!(worker.pid()));
}

async fn a_job_withdrawn_while_queued_never_runs(env: Env) {
    // No worker yet: the job waits in the queue, and its caller gives up.
    let impatient = toolset(&env.remote().timeout(Duration::from_millis(300)));
    let path = std::env::temp_dir().join(format!("{}.mark", unique("withdrawn")));
    let args = json!({"path": path.display().to_string()});
    let error = impatient.call("mark_remote", args).await.unwrap_err();
    assert!(matches!(error, ToolError::TimedOut { .. }), "{error}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let worker = WorkerProcess::start(&env);
    let line = worker
        .wait_for_line(&["job withdrawn before it ran", "tool=mark "])
        .await;
    eprintln!("{line}");
    // The worker serves the next job, and the withdrawn one never ran.
    let served = toolset(&env.remote())
        .call("slow_remote", json!({"ms": 1}))
        .await
        .unwrap();
    assert_eq!(served, json!(worker.pid()));
    assert!(!path.exists(), "the withdrawn job ran");
    assert_eq!(worker.jobs_started("mark"), 0, "{}", worker.log_text());
}

async fn progress_from_the_worker_reaches_the_caller_in_order_before_the_reply(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let started = Instant::now();
    let seen: Arc<Mutex<Vec<(Duration, context::Progress)>>> = Arc::default();
    let sink = context::ProgressSink::new({
        let seen = seen.clone();
        move |progress| seen.lock().unwrap().push((started.elapsed(), progress))
    });
    let call = toolset.call("steps_remote", json!({"steps": 5, "ms": 80}));
    let call = context::with(context::Principal::new("alice"), call);
    let answer = context::with(sink, call).await.unwrap();
    let answered = started.elapsed();
    let seen = seen.lock().unwrap().clone();
    for (at, progress) in &seen {
        eprintln!(
            "+{:>6.1} ms  {}/{:?}  {:?}",
            at.as_secs_f64() * 1e3,
            progress.progress,
            progress.total,
            progress.message
        );
    }
    eprintln!("+{:>6.1} ms  reply {answer}", answered.as_secs_f64() * 1e3);
    // The body ran in the worker, for the caller's principal.
    assert_eq!(answer["pid"], worker.pid());
    assert_eq!(answer["principal"], "alice");
    // Every report 80 ms apart is sent (the bound folds only faster ones), in
    // order, with the worker's message; the last one before the reply.
    let steps: Vec<f64> = seen.iter().map(|(_, progress)| progress.progress).collect();
    assert_eq!(steps, [1.0, 2.0, 3.0, 4.0, 5.0], "{seen:?}");
    assert!(seen.iter().all(|(_, progress)| progress.total == Some(5.0)));
    let last = &seen.last().unwrap().1;
    assert_eq!(
        last.message.as_deref(),
        Some(format!("step 5 in pid {}", worker.pid()).as_str())
    );

    // A body reporting faster than the bound: folded, in order, the newest kept.
    let seen: Arc<Mutex<Vec<f64>>> = Arc::default();
    let sink = context::ProgressSink::new({
        let seen = seen.clone();
        move |progress: context::Progress| seen.lock().unwrap().push(progress.progress)
    });
    let call = toolset.call("steps_remote", json!({"steps": 200, "ms": 1}));
    context::with(sink, call).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.windows(2).all(|pair| pair[0] < pair[1]),
        "in order: {seen:?}"
    );
    assert_eq!(
        seen.last(),
        Some(&200.0),
        "the last report is never folded away"
    );
    assert!(
        seen.len() < 200,
        "reports are folded at the bound: {} of 200 sent",
        seen.len()
    );

    // A caller that does not listen gets no reports sent.
    let quiet = toolset
        .call("steps_remote", json!({"steps": 3, "ms": 1}))
        .await
        .unwrap();
    assert_eq!(quiet["pid"], worker.pid());
}

async fn proxy_inside_remote_runs_the_body_in_the_worker_with_the_route(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let answer = toolset
        .call(
            "whereami_proxy_remote",
            json!({"city": "Lisbon", "proxies": ["egress-us"]}),
        )
        .await
        .unwrap();
    let answer = report(answer);
    eprintln!(
        "caller pid {}, body ran in pid {} with route {:?}",
        std::process::id(),
        answer.pid,
        answer.route
    );
    assert_eq!(answer.pid, worker.pid(), "the body ran in the worker");
    assert_ne!(answer.pid, std::process::id());
    assert_eq!(answer.route.as_deref(), Some("egress-us"));
    assert_eq!(worker.settled_jobs("whereami_proxy", 1).await, 1);
}

async fn the_callers_context_reaches_the_worker_as_each_entry_says(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let call = toolset.call(
        "whereami_proxy_remote",
        json!({"city": "Porto", "proxies": ["egress-eu"]}),
    );
    let call = context::with(Tenant("acme".into()), call);
    let call = context::with(ThreadsOnly(7), call);
    let answer = report(context::with(ChainDepth(3), call).await.unwrap());
    assert_eq!(answer.pid, worker.pid(), "the body ran in the worker");
    assert_eq!(
        answer.tenant.as_deref(),
        Some("acme"),
        "serialized: it arrives"
    );
    assert_eq!(answer.in_process, None, "in-process only: it stays behind");
    assert_eq!(answer.depth, 3, "the chain depth arrives");
    assert_eq!(answer.route.as_deref(), Some("egress-eu"));
}

async fn a_cache_outside_remote_stays_in_the_caller(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let args = json!({"city": "Oslo", "exp": 60});
    let first = toolset
        .call("whereami_remote_cache", args.clone())
        .await
        .unwrap();
    let second = toolset.call("whereami_remote_cache", args).await.unwrap();
    assert_eq!(first, second);
    assert_eq!(report(first).pid, worker.pid());
    // Another key does reach the worker: the log shows it, so one job above is
    // really one job.
    toolset
        .call("whereami_remote_cache", json!({"city": "Rome", "exp": 60}))
        .await
        .unwrap();
    let jobs = worker.settled_jobs("whereami", 2).await;
    assert_eq!(jobs, 2, "{}", worker.log_text());
}

async fn batch_inside_remote_is_one_job_and_outside_one_per_item(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let items = json!({"items": [{"city": "Quito"}, {"city": "Hanoi"}, {"city": "Lima"}]});

    let inside = toolset
        .call("whereami_batch_remote", items.clone())
        .await
        .unwrap();
    assert_eq!(inside.as_array().unwrap().len(), 3);
    assert_eq!(
        worker.settled_jobs("whereami_batch", 1).await,
        1,
        "one job for the batch"
    );
    assert_eq!(worker.jobs_started("whereami"), 0);

    let outside = toolset.call("whereami_remote_batch", items).await.unwrap();
    let cities: Vec<_> = outside
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["city"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(cities, ["Quito", "Hanoi", "Lima"]);
    assert_eq!(
        worker.settled_jobs("whereami", 3).await,
        3,
        "one job per item"
    );
    assert_eq!(worker.jobs_started("whereami_batch"), 1);
}

/// `error` is `fail`'s body error, come back typed from `worker`.
fn assert_failed_on_purpose(error: &ToolError, worker: &WorkerProcess) {
    match error {
        ToolError::Body { tool, source } => {
            assert_eq!(tool.as_str(), "fail");
            let remote = source
                .downcast_ref::<RemoteFailure>()
                .expect("a remote failure");
            assert_eq!(remote.message, "the body failed on purpose");
            let prefix = format!("toolgraft-{}-", worker.pid());
            assert!(remote.worker.starts_with(&prefix), "{}", remote.worker);
        }
        other => panic!("expected a body error, got {other:?}"),
    }
}

async fn failures_come_back_typed_and_the_worker_survives(env: Env) {
    let mut worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());

    let failed = toolset.call("fail_remote", json!({})).await.unwrap_err();
    assert_failed_on_purpose(&failed, &worker);
    match toolset.call("boom_remote", json!({})).await.unwrap_err() {
        ToolError::Panicked { tool, message } => {
            assert_eq!(
                (tool.as_str(), message.as_str()),
                ("boom", "boom on purpose")
            );
        }
        other => panic!("expected a panic, got {other:?}"),
    }
    // The same worker answers the next call.
    let after = toolset
        .call("whereami_proxy_remote", json!({"city": "Bern"}))
        .await
        .unwrap();
    assert_eq!(report(after).pid, worker.pid());
    assert!(
        worker.child.try_wait().unwrap().is_none(),
        "the worker runs on"
    );
    // A tool's failure is a result: neither job ran twice.
    assert_eq!(worker.settled_jobs("fail", 1).await, 1);
    assert_eq!(worker.settled_jobs("boom", 1).await, 1);
}

async fn an_unknown_name_on_the_worker_is_an_error_not_a_hang(env: Env) {
    let _worker = WorkerProcess::start(&env);
    let remote = env.remote().timeout(Duration::from_secs(20));
    let toolset = toolset(&remote);
    with_unknown_tool(&toolset, &remote);
    let started = Instant::now();
    match toolset
        .call("extra_remote", json!({"city": "Nowhere"}))
        .await
        .unwrap_err()
    {
        ToolError::Relocation { tool, reason, .. } => {
            assert_eq!(tool.as_str(), "extra");
            assert!(reason.contains("has no tool `extra` bound"), "{reason}");
        }
        other => panic!("expected a relocation error, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "answered, not timed out"
    );
}

async fn bad_arguments_are_refused_before_anything_is_enqueued(env: Env) {
    let toolset = toolset(&env.remote());
    // No worker yet: a job enqueued now would run once one starts.
    for (name, args) in [
        ("whereami_proxy_remote", json!({"town": "Lisbon"})),
        (
            "whereami_proxy_remote",
            json!({"city": "Lisbon", "proxies": "egress-us"}),
        ),
        ("whereami_batch_remote", json!({"items": [{"city": 3}]})),
    ] {
        match toolset.call(name, args).await.unwrap_err() {
            ToolError::InvalidArguments { tool, .. } => assert_eq!(tool.as_str(), name),
            other => panic!("expected invalid arguments, got {other:?}"),
        }
    }
    let worker = WorkerProcess::start(&env);
    toolset
        .call("whereami_proxy_remote", json!({"city": "Lisbon"}))
        .await
        .unwrap();
    assert_eq!(
        worker.settled_jobs("whereami_proxy", 1).await,
        1,
        "{}",
        worker.log_text()
    );
    assert_eq!(worker.jobs_started("whereami_batch"), 0);
}

async fn a_caller_timeout_names_the_job(env: Env) {
    // No worker serves this queue.
    let remote = env.remote().timeout(Duration::from_millis(300));
    let toolset = toolset(&remote);
    let started = Instant::now();
    match toolset
        .call("slow_remote", json!({"ms": 1}))
        .await
        .unwrap_err()
    {
        error @ ToolError::TimedOut { .. } => {
            let ToolError::TimedOut {
                tool, job, after, ..
            } = &error
            else {
                unreachable!()
            };
            assert_eq!(tool.as_str(), "slow");
            let job = job.as_deref().unwrap_or_default();
            assert!(ulid::Ulid::from_string(job).is_ok(), "{job}");
            assert_eq!(*after, Duration::from_millis(300));
            assert!(error.to_string().contains(job), "{error}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}

async fn sigterm_finishes_the_jobs_in_flight(env: Env) {
    let mut worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let mut call = tokio::spawn({
        let toolset = toolset.clone();
        async move { toolset.call("slow_remote", json!({"ms": 1500})).await }
    });
    // The job starts (the worker logs it), or the call ends first: then it never
    // reached the worker (it could not be enqueued, say), and waiting for the
    // line until the deadline would only hide why.
    tokio::select! {
        _ = worker.wait_for_line(&["job started", "tool=slow "]) => {}
        ended = &mut call => panic!(
            "the call ended before its job started: {:?}\n{}",
            ended.unwrap(),
            worker.log_text()
        ),
    }
    worker.signal("-TERM");
    let answer = call.await.unwrap();
    let answer = answer.unwrap_or_else(|error| {
        panic!(
            "the job in flight did not answer: {error}\n{}",
            worker.log_text()
        )
    });
    assert_eq!(answer, json!(worker.pid()));
    let status = worker.exit_status(Duration::from_secs(15)).await;
    assert!(status.success(), "{status:?}\n{}", worker.log_text());
    assert!(worker.log_text().contains("exited cleanly"));
}

async fn a_job_of_a_killed_worker_runs_again_on_another(env: Env) {
    let start = Instant::now();
    let at = || format!("{:>6.2} s", start.elapsed().as_secs_f64());
    let mut first = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let call = tokio::spawn({
        let toolset = toolset.clone();
        async move { toolset.call("slow_remote", json!({"ms": 1500})).await }
    });
    let line = first.wait_for_line(&["job started", "tool=slow "]).await;
    let job = line
        .split("job=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    eprintln!("{} job {job} started on worker pid {}", at(), first.pid());
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    eprintln!(
        "{} worker pid {} killed (SIGKILL) mid-job",
        at(),
        first.pid()
    );

    let second = WorkerProcess::start(&env);
    eprintln!("{} worker pid {} started", at(), second.pid());
    second
        .wait_for_line(&["job started", &format!("job={job}")])
        .await;
    eprintln!(
        "{} job {job} started again on worker pid {}",
        at(),
        second.pid()
    );
    let answer = call.await.unwrap().expect("the re-delivered job answers");
    eprintln!("{} the caller got one result: {answer}", at());
    assert_eq!(answer, json!(second.pid()), "the second worker answered");
    assert!(
        !first.log_text().contains("job finished"),
        "the first never finished"
    );
    assert_eq!(second.settled_jobs("slow", 1).await, 1);
}

/// `[remote, retry]`: the job engine's redeliveries count against the retry's
/// attempts. With 2 attempts, the job of a killed worker runs again on a second
/// (run 2 of 2); that one killed too, a third refuses the run, and the caller
/// gets the refusal, not a third run of the body.
async fn attempts_and_redeliveries_are_counted_together(env: Env) {
    use toolgraft::ext::Retry;
    let start = Instant::now();
    let at = || format!("{:>6.2} s", start.elapsed().as_secs_f64());
    let slow = Tool::builder()
        .name("slow")
        .description("Sleep, then report the process.")
        .read_only()
        .body(slow)
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((slow.combo().with(env.remote()).with(Retry::attempts(2)),))
        .unwrap();
    let mut worker = WorkerProcess::start(&env);
    let call = tokio::spawn({
        let toolset = toolset.clone();
        async move { toolset.call("slow_remote_retry", json!({"ms": 3000})).await }
    });
    for run in 1..=2 {
        let line = worker
            .wait_for_line(&["a retried call's run", &format!("run={run} ")])
            .await;
        eprintln!("{} worker pid {}: {line}", at(), worker.pid());
        assert!(
            line.contains("attempt=1 "),
            "one attempt, run again: {line}"
        );
        worker.child.kill().unwrap();
        worker.child.wait().unwrap();
        eprintln!(
            "{} worker pid {} killed (SIGKILL) mid-job",
            at(),
            worker.pid()
        );
        worker = WorkerProcess::start(&env);
    }
    let line = worker
        .wait_for_line(&["a retried call's run", "run=3 "])
        .await;
    eprintln!("{} worker pid {}: {line}", at(), worker.pid());
    let refused = call.await.unwrap().expect_err("a third run is refused");
    eprintln!("{} the caller: {refused}", at());
    match &refused {
        ToolError::Refused {
            extension, reason, ..
        } => {
            assert_eq!(extension.as_str(), "retry");
            assert!(reason.contains("has run 2 times already"), "{reason}");
        }
        other => panic!("expected the retry's refusal, got {other:?}"),
    }
    assert!(!refused.is_transient());
    let log = worker.log_text();
    assert!(
        !log.lines()
            .any(|line| line.contains("job finished") && line.contains("ok=true")),
        "the third worker did not run the body: {log}"
    );
}

async fn two_workers_serve_many_concurrent_calls(env: Env) {
    let workers = [WorkerProcess::start(&env), WorkerProcess::start(&env)];
    let toolset = toolset(&env.remote());
    // Warm: both workers connected, the caller's connection open.
    toolset
        .call("whereami_proxy_remote", json!({"city": "warm"}))
        .await
        .unwrap();

    let mut latencies = Vec::new();
    for at in 0..20 {
        let started = Instant::now();
        toolset
            .call("whereami_proxy_remote", json!({"city": format!("seq{at}")}))
            .await
            .unwrap();
        latencies.push(started.elapsed());
    }
    latencies.sort();

    const CALLS: usize = 200;
    let started = Instant::now();
    let calls = (0..CALLS).map(|at| {
        let toolset = toolset.clone();
        tokio::spawn(async move {
            let city = format!("city{at}");
            let answer = toolset
                .call("whereami_proxy_remote", json!({"city": city}))
                .await
                .unwrap();
            (city, report(answer))
        })
    });
    let answers = futures_util::future::join_all(calls).await;
    let elapsed = started.elapsed();
    let pids: BTreeSet<u32> = workers.iter().map(WorkerProcess::pid).collect();
    let mut served = BTreeSet::new();
    for answer in answers {
        let (city, report) = answer.unwrap();
        assert_eq!(report.city, city);
        assert!(pids.contains(&report.pid), "{} is not a worker", report.pid);
        served.insert(report.pid);
    }
    eprintln!(
        "round trip (trivial body, sequential): median {:.1} ms, max {:.1} ms; \
         {CALLS} concurrent calls through 2 workers in {:.2} s = {:.0} calls/s, served by {served:?}",
        latencies[latencies.len() / 2].as_secs_f64() * 1e3,
        latencies[latencies.len() - 1].as_secs_f64() * 1e3,
        elapsed.as_secs_f64(),
        CALLS as f64 / elapsed.as_secs_f64()
    );
}

/// An operator's manifest binds the caller's combos; workers bound in Rust serve
/// them, since jobs name the layer input (`whereami_proxy`), not the branch.
async fn a_manifest_relocates_with_the_same_workers(env: Env) {
    let worker = WorkerProcess::start(&env);
    let whereami = whereami_tool();
    let mut bases = BaseTools::new();
    bases.add(&whereami);
    let mut registry = Registry::new();
    registry
        .register(Configured::new(Proxy::allow(["egress-eu", "egress-us"])))
        .unwrap()
        .register(Configured::<Remote>::named("remote"))
        .unwrap();
    let remote = json!({"name": "remote", "config": {"url": env.url, "queue": env.queue}});
    let manifest =
        Manifest::from_value(&json!({"tools": {"whereami": [["proxy", remote]]}})).unwrap();
    let toolset = Toolset::new();
    for (tool, outcome) in toolset.bind_manifest(&registry, &bases, &manifest) {
        outcome.unwrap_or_else(|error| panic!("{tool}: {error}"));
    }
    let answer = toolset
        .call(
            "whereami_proxy_remote",
            json!({"city": "Porto", "proxies": ["egress-eu"]}),
        )
        .await
        .unwrap();
    let answer = report(answer);
    assert_eq!(
        (answer.pid, answer.route.as_deref()),
        (worker.pid(), Some("egress-eu"))
    );

    // A config the backend cannot use refuses the tool when binding, naming the field.
    let broken = Manifest::from_value(&json!({"tools": {"whereami": [[
        {"name": "remote", "config": {"url": "amqp://broker", "queue": "weather"}}
    ]]}}))
    .unwrap();
    let outcome = Toolset::new().bind_manifest(&registry, &bases, &broken);
    match &outcome[0].1 {
        Err(BindError::InvalidConfig { field, problem, .. }) => {
            assert_eq!(field, "url");
            assert!(problem.contains("redis://"), "{problem}");
        }
        other => panic!("expected an invalid config, got {other:?}"),
    }
}

/// Two callers and three workers of one queue: a combo attached on one caller
/// reaches the other caller and every worker (a late one too), which rebind it by
/// name; calls of the new branch are answered from both callers.
async fn a_change_on_one_caller_reaches_every_worker_and_caller(env: Env) {
    let workers = [
        WorkerProcess::start_in_fleet(&env),
        WorkerProcess::start_in_fleet(&env),
    ];
    let remote = env.remote();
    let toolset = toolset(&remote);
    let registry = registry();
    let fleet = Fleet::join(&remote, &toolset, registry.clone())
        .await
        .unwrap();
    let branch = "whereami_trace_remote";
    let caller_b = WorkerProcess::spawn(&env, "fleet_caller_process", &[(CALLER_BRANCH, branch)]);
    // Before the change, no worker binds `whereami_trace`.
    assert!(!toolset.contains(branch));

    let before = fleet.generation();
    let remote_spec =
        ElementSpec::configured("remote", serde_json::to_value(remote.settings()).unwrap());
    toolset
        .edit()
        .attach(
            &registry,
            "whereami",
            &[ElementSpec::named("trace"), remote_spec],
        )
        .commit()
        .unwrap();
    let mut generations = fleet.generations();
    tokio::time::timeout(
        Duration::from_secs(10),
        generations.wait_for(|at| *at > before),
    )
    .await
    .expect("the change is broadcast")
    .unwrap();
    let generation = fleet.generation();
    eprintln!("caller A attached [trace, remote]: generation {before} -> {generation}");
    // At once, before any worker need have heard (on SQLite nothing announces:
    // workers look each beat): the job carries the generation, and the worker
    // that takes it catches up first instead of answering "no tool bound".
    let first = toolset
        .call(branch, json!({"city": "first"}))
        .await
        .unwrap_or_else(|error| panic!("the first call after the change: {error}"));
    eprintln!(
        "caller A's first call after the change answered by worker {}",
        report(first).pid
    );
    let late = WorkerProcess::start_in_fleet(&env);

    // Every member (2 callers, 3 workers) reports the generation.
    let deadline = Instant::now() + Duration::from_secs(20);
    let members = loop {
        let members: Vec<_> = fleet
            .status()
            .await
            .unwrap()
            .into_iter()
            .filter(|member| member.is_alive())
            .collect();
        if members.len() == 5 && members.iter().all(|member| member.generation >= generation) {
            break members;
        }
        assert!(
            Instant::now() < deadline,
            "the fleet did not converge: {members:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for member in &members {
        eprintln!(
            "  {:<40} {:?} at generation {}",
            member.process, member.role, member.generation
        );
        assert!(member.refused.is_empty(), "{member:?}");
    }

    let pids: BTreeSet<u32> = workers
        .iter()
        .chain([&late])
        .map(WorkerProcess::pid)
        .collect();
    let mut served = BTreeSet::new();
    for at in 0..20 {
        let answer = toolset
            .call(branch, json!({"city": format!("a{at}")}))
            .await
            .unwrap();
        let answer = report(answer);
        assert!(pids.contains(&answer.pid), "{} is not a worker", answer.pid);
        served.insert(answer.pid);
    }
    eprintln!("caller A answered 20 calls of `{branch}`, by worker pids {served:?}");
    let line = caller_b.wait_for_line(&["answered 10 calls"]).await;
    eprintln!("{line}");
    let line = late.wait_for_line(&["fleet: applied generation"]).await;
    assert!(line.contains(&format!("generation={generation}")), "{line}");
    for worker in workers.iter().chain([&late]) {
        assert!(worker.jobs_started("whereami_trace") <= 30);
    }
}

/// A private `redis-server` on `port`, up when this returns.
#[cfg(feature = "redis")]
async fn redis_on(port: u16) -> Child {
    let mut server = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("this test needs redis-server");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        assert!(server.try_wait().unwrap().is_none(), "redis-server exited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server
}

/// Redis goes away mid-call and comes back empty (no persistence): the worker
/// process stays up and reconnects, the call in flight gets its result or
/// `TimedOut`, and calls succeed again within 5 s of the server's return.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_and_callers_survive_a_redis_restart() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = redis_on(port).await;
    let env = Env {
        url: format!("redis://127.0.0.1:{port}"),
        queue: unique("restart"),
        _guard: Guard::None,
    };
    let start = Instant::now();
    let at = || format!("{:>6.0} ms", start.elapsed().as_secs_f64() * 1e3);
    let mut worker = WorkerProcess::start(&env);
    let remote = env.remote().timeout(Duration::from_secs(3));
    let toolset = Arc::new(toolset(&remote));
    let first = toolset.call("slow_remote", json!({"ms": 1})).await.unwrap();
    eprintln!("{}: a call answered by worker {first}", at());

    let in_flight = {
        let toolset = toolset.clone();
        tokio::spawn(async move { toolset.call("slow_remote", json!({"ms": 1500})).await })
    };
    worker.wait_for_line(&["job started", "tool=slow"]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill().unwrap();
    server.wait().unwrap();
    eprintln!("{}: redis-server killed, a 1.5 s job in flight", at());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let server = redis_on(port).await;
    let _server = Guard::Server(server);
    let back = Instant::now();
    eprintln!("{}: redis-server back, empty", at());

    match in_flight.await.unwrap() {
        Ok(pid) => eprintln!("{}: the call in flight got its result (worker {pid})", at()),
        Err(ToolError::TimedOut { job, .. }) => {
            eprintln!("{}: the call in flight timed out (job {job:?})", at())
        }
        Err(other) => panic!("the call in flight: {other}"),
    }
    let mut attempts = 0;
    loop {
        attempts += 1;
        match toolset.call("slow_remote", json!({"ms": 1})).await {
            Ok(pid) => {
                eprintln!(
                    "{}: calls succeed again, {:.2} s after the server came back ({attempts} attempts, worker {pid})",
                    at(),
                    back.elapsed().as_secs_f64()
                );
                assert_eq!(pid, json!(worker.pid()));
                break;
            }
            Err(error) => {
                assert!(
                    back.elapsed() < Duration::from_secs(5),
                    "no call succeeded within 5 s of Redis being back: {error}\n{}",
                    worker.log_text()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    assert!(
        worker.child.try_wait().unwrap().is_none(),
        "the worker process exited"
    );
    let restarted = worker.wait_for_line(&["starting it again"]).await;
    eprintln!("worker log: {restarted}");
}

/// A loopback TCP proxy to a Redis server whose connections the test kills: `cut`
/// drops every connection through it and refuses new ones for a while, what a
/// caller sees when its Redis connections die and the network takes time to heal.
#[cfg(feature = "redis")]
struct FlakyLink {
    port: u16,
    open: Arc<std::sync::atomic::AtomicBool>,
    links: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

#[cfg(feature = "redis")]
impl FlakyLink {
    async fn to(upstream: &str) -> Self {
        let upstream = upstream.trim_start_matches("redis://").to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let links = Arc::new(Mutex::new(Vec::new()));
        let (accepting, linked) = (open.clone(), links.clone());
        tokio::spawn(async move {
            while let Ok((mut near, _)) = listener.accept().await {
                if !accepting.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut far) = tokio::net::TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut near, &mut far).await;
                    }
                });
                linked.lock().unwrap().push(link.abort_handle());
            }
        });
        Self { port, open, links }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills every connection now and refuses new ones for `down`.
    fn cut(&self, down: Duration) {
        self.open.store(false, std::sync::atomic::Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
        let open = self.open.clone();
        tokio::spawn(async move {
            tokio::time::sleep(down).await;
            open.store(true, std::sync::atomic::Ordering::SeqCst);
        });
    }
}

/// Counts the calls that go through it and keeps each failure's message: here,
/// between `remote` and `retry`, one per attempt.
#[cfg(feature = "redis")]
#[derive(Clone, Default)]
struct Attempts(Arc<Mutex<Vec<Result<(), String>>>>);

#[cfg(feature = "redis")]
impl<S: Stack> toolgraft::Wrap<S> for Attempts {
    type Locality = toolgraft::extension::Anywhere;
    type Params = ();

    fn name(&self) -> &str {
        "attempts"
    }

    async fn around(
        &self,
        next: toolgraft::extension::Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let outcome = next.call(input).await;
        let seen = outcome.as_ref().map(|_| ()).map_err(ToString::to_string);
        self.0.lock().unwrap().push(seen);
        outcome
    }
}

/// A fleet-wide `concurrency` permit taken for a caller that gave up while the
/// script taking it was in flight (Redis busy for 300 ms, the caller's timeout
/// 100 ms) is given back: the next call gets it at once, not after the 30 s lease.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_gives_back_the_fleet_permit_its_script_took() {
    use toolgraft::ext::Concurrency;
    use toolgraft_jobs::RedisLimits;
    const BUSY: &str = "local t = redis.call('TIME') local s = t[1] * 1e6 + t[2] \
        while true do local n = redis.call('TIME') if n[1] * 1e6 + n[2] - s > 300000 then break end end \
        return 1";
    let env = Env::redis("cancelled_permit").await;
    let store = RedisLimits::new(&env.url)
        .unwrap()
        .prefix(env.queue.clone());
    let ping = Tool::builder()
        .name("ping")
        .description("Answer pong.")
        .read_only()
        .body(|_: Nothing| async { Ok("pong") })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((ping.combo().with(Concurrency::at_most(1).store(store)),))
        .unwrap();
    toolset.call("ping_concurrency", json!({})).await.unwrap();

    let mut other = ::redis::Client::open(env.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let busy = tokio::spawn(async move {
        ::redis::cmd("EVAL")
            .arg(BUSY)
            .arg(0)
            .query_async::<i64>(&mut other)
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let gave_up = tokio::time::timeout(
        Duration::from_millis(100),
        toolset.call("ping_concurrency", json!({})),
    )
    .await;
    assert!(gave_up.is_err(), "the caller gave up while Redis was busy");
    busy.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let next = toolset.call("ping_concurrency", json!({})).await;
    assert_eq!(
        next.map_err(|error| error.to_string()).unwrap(),
        json!("pong"),
        "the permit of the call that gave up is free again"
    );
}

/// `[remote, retry]` on a read-only tool: the caller's Redis connections are
/// killed (and refused for 600 ms); with `retry` the call is answered after
/// attempts that met the dead connection, and killed again, the same call
/// without `retry` fails with that transient relocation error.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_recovers_from_a_killed_redis_connection() {
    use toolgraft::ext::Retry;
    use toolgraft::ext::retry::RetryConfig;
    let env = Env::redis("retry_killed_connection").await;
    let _worker = WorkerProcess::start(&env);
    let link = FlakyLink::to(&env.url).await;
    let remote = Remote::new(link.url())
        .unwrap()
        .queue(&env.queue)
        .unwrap()
        .timeout(Duration::from_secs(5));
    let slow = Tool::builder()
        .name("slow")
        .description("Sleep, then report the process.")
        .read_only()
        .body(slow)
        .build()
        .unwrap();
    let attempts = Attempts::default();
    let retry = Retry::new(RetryConfig {
        attempts: 8,
        backoff_ms: 100,
        max_backoff_ms: 800,
        deadline_ms: 20_000,
    });
    let toolset = Toolset::new();
    toolset
        .bind((slow
            .combo()
            .with(remote.clone())
            .with(attempts.clone())
            .with(retry),))
        .unwrap();
    let started = Instant::now();
    let at = || format!("{:>6.0} ms", started.elapsed().as_secs_f64() * 1e3);
    let call = || toolset.call("slow_remote_attempts_retry", json!({"ms": 1}));
    call().await.expect("a first call, on live connections");
    attempts.0.lock().unwrap().clear();

    link.cut(Duration::from_millis(600));
    eprintln!("{}: the caller's Redis connections killed", at());
    let answered = call().await.expect("retry recovers");
    let seen = attempts.0.lock().unwrap().clone();
    eprintln!(
        "{}: with retry: answered by worker {answered} after {} attempts",
        at(),
        seen.len()
    );
    for (number, outcome) in seen.iter().enumerate() {
        eprintln!("  attempt {}: {outcome:?}", number + 1);
    }
    assert!(
        seen.len() >= 2,
        "the first attempt met the killed connection: {seen:?}"
    );
    assert!(seen.last().unwrap().is_ok());
    assert!(
        seen[..seen.len() - 1].iter().all(Result::is_err),
        "{seen:?}"
    );

    link.cut(Duration::from_millis(600));
    eprintln!("{}: killed again", at());
    let without = toolset
        .call("slow_remote", json!({"ms": 1}))
        .await
        .expect_err("a call without retry meets the killed connection");
    eprintln!("{}: without retry: {without}", at());
    assert!(without.is_transient(), "{without:?}");
}

/// What the job engine still holds of the queue's jobs: Redis keys (each job's
/// metadata, its data, the done set) or SQLite rows.
async fn stored_jobs(env: &Env) -> usize {
    if env.url.starts_with("redis://") {
        #[cfg(feature = "redis")]
        {
            let client = ::redis::Client::open(env.url.as_str()).unwrap();
            let mut redis = client.get_multiplexed_async_connection().await.unwrap();
            let meta: Vec<String> = ::redis::cmd("KEYS")
                .arg(format!("{}:meta:*", env.queue))
                .query_async(&mut redis)
                .await
                .unwrap();
            let (data, done, finished): (usize, usize, usize) = ::redis::pipe()
                .hlen(format!("{}:data", env.queue))
                .scard(format!("{}:done", env.queue))
                .zcard(format!("toolgraft:finished:{}", env.queue))
                .query_async(&mut redis)
                .await
                .unwrap();
            // A finished job must leave its worker's in-flight set, or it runs
            // again when that worker is taken for dead.
            let inflight: Vec<String> = ::redis::cmd("KEYS")
                .arg(format!("{}:inflight:*", env.queue))
                .query_async(&mut redis)
                .await
                .unwrap();
            let mut running = 0;
            for set in inflight {
                let members: usize = ::redis::cmd("SCARD")
                    .arg(set)
                    .query_async(&mut redis)
                    .await
                    .unwrap();
                running += members;
            }
            return meta.len() + data + done + finished + running;
        }
    }
    #[cfg(feature = "sqlite")]
    {
        let pool = sqlx::SqlitePool::connect(&env.url).await.unwrap();
        let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM Jobs WHERE job_type = ?1")
            .bind(&env.queue)
            .fetch_one(&pool)
            .await
            .unwrap();
        pool.close().await;
        return rows as usize;
    }
    #[allow(unreachable_code)]
    0
}

/// With a 1 s retention, the engine forgets finished jobs (after 6 s: never
/// before a dead worker's jobs could come back): what 200 jobs left behind is
/// vacuumed by the worker, so storage stays flat.
async fn finished_jobs_go_after_the_retention(env: Env) {
    let worker = WorkerProcess::spawn(
        &env,
        "worker_process",
        &[(WORKER_ENGINE, r#"{"retention_s": 1}"#)],
    );
    let toolset = toolset(&env.remote());
    let started = Instant::now();
    let mut answered = Vec::with_capacity(200);
    for at in 0..200 {
        toolset
            .call("slow_remote", json!({"ms": 0}))
            .await
            .unwrap_or_else(|error| panic!("call {at}: {error}\n{}", worker.log_text()));
        answered.push(Instant::now());
    }
    // The jobs that ended less than 6 s ago are still stored. A loaded machine
    // can take longer than that for the 200 calls, and then the first ones have
    // rightly gone already: count only those answered in the last 3 s (the rest
    // of the 6 s covers the job's end before its answer, and the count).
    let now = Instant::now();
    let recent = answered
        .iter()
        .filter(|at| now - **at < Duration::from_secs(3))
        .count();
    let left = stored_jobs(&env).await;
    eprintln!(
        "after 200 jobs in {:?} the engine holds {left} keys or rows of them ({recent} answered in the last 3 s)",
        now - started
    );
    assert!(
        left >= recent.max(1),
        "the jobs were stored: {left}, {recent} answered in the last 3 s"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = stored_jobs(&env).await;
        if left == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{left} still stored after 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("vacuumed within the retention and a beat: nothing of them is left");
}

/// A worker that neither polls nor beats for a minute still takes each job at
/// once: the caller's wake-up fetches it (without one, every call here would wait
/// for a poll and time out).
async fn an_idle_worker_is_woken_by_each_job(env: Env) {
    let worker = WorkerProcess::spawn(
        &env,
        "worker_process",
        &[(
            WORKER_ENGINE,
            r#"{"poll_ms": 60000, "heartbeat_ms": 60000}"#,
        )],
    );
    let toolset = toolset(&env.remote().timeout(Duration::from_secs(10)));
    for at in 0..20 {
        let pid = toolset
            .call("slow_remote", json!({"ms": 0}))
            .await
            .unwrap_or_else(|error| panic!("call {at}: {error}\n{}", worker.log_text()));
        assert_eq!(pid, json!(worker.pid()));
        // Idle between calls: the worker parks on an empty queue each time.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Backends made apart (each element of a manifest's combos is one) share one
/// connection per URL and queue: calling through three more of them opens no
/// more connections to Redis than calling through one.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_of_one_url_share_their_connections() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let env = Env {
        url: format!("redis://127.0.0.1:{port}"),
        queue: unique("shared"),
        _guard: Guard::Server(redis_on(port).await),
    };
    let worker = WorkerProcess::start(&env);
    let connections = || async {
        let client = ::redis::Client::open(env.url.as_str()).unwrap();
        let mut redis = client.get_multiplexed_async_connection().await.unwrap();
        let list: String = ::redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut redis)
            .await
            .unwrap();
        // Not counting this connection itself.
        list.lines().count() - 1
    };
    let settings = serde_json::to_value(env.remote().settings()).unwrap();
    let remote = |_| json!({"name": "remote", "config": settings.clone()});
    let whereami = whereami_tool();
    let bases = BaseTools::new().with(&whereami);
    let one = Manifest::from_value(&json!({"tools": {"whereami": [[remote(0)]]}})).unwrap();
    let toolset = Toolset::new();
    for (tool, outcome) in toolset.bind_manifest(&registry(), &bases, &one) {
        outcome.unwrap_or_else(|error| panic!("{tool}: {error}"));
    }
    toolset
        .call("whereami_remote", json!({"city": "Oslo"}))
        .await
        .unwrap();
    let with_one = connections().await;

    let four = Manifest::from_value(&json!({"tools": {"whereami": [
        [remote(1)], ["proxy", remote(2)], [remote(3), "cache"]
    ]}}))
    .unwrap();
    let other = Toolset::new();
    for (tool, outcome) in other.bind_manifest(&registry(), &bases, &four) {
        outcome.unwrap_or_else(|error| panic!("{tool}: {error}"));
    }
    for name in [
        "whereami_remote",
        "whereami_proxy_remote",
        "whereami_remote_cache",
    ] {
        other
            .call(name, json!({"city": "Oslo"}))
            .await
            .unwrap_or_else(|error| panic!("{name}: {error}\n{}", worker.log_text()));
    }
    let with_four = connections().await;
    eprintln!("connections to Redis: {with_one} with one backend, {with_four} with four");
    assert_eq!(with_one, with_four);
}

// ---------------------------------------------------------------- submit and schedule

/// The caller's toolset with the job tools bound beside it.
fn toolset_with_job_tools(remote: &Remote) -> Toolset {
    let toolset = toolset(remote);
    for tool in remote.jobs().tools() {
        toolset.bind((tool.combo(),)).unwrap();
    }
    toolset
}

/// Calls `name` and prints the exchange as a transcript line pair.
async fn transcript(toolset: &Toolset, name: &str, args: Value) -> Result<Value, ToolError> {
    let outcome = toolset.call(name, args.clone()).await;
    eprintln!("> {name} {args}");
    match &outcome {
        Ok(value) => eprintln!("< {value}"),
        Err(error) => eprintln!("< error: {error}"),
    }
    outcome
}

/// The source of a job tool's failure, as the type it is.
fn job_tool_source<T: std::error::Error + 'static>(error: &ToolError) -> &T {
    match error {
        ToolError::Body { source, .. } => source
            .downcast_ref::<T>()
            .unwrap_or_else(|| panic!("another source: {source:?}")),
        other => panic!("expected a body error, got {other:?}"),
    }
}

/// `slow_remote_submit` answers with a ticket at once; `job_status` follows it
/// from queued to finished, and `job_result` gives what `slow_remote` gives.
async fn submit_then_result(env: Env) {
    let _worker = WorkerProcess::start(&env);
    let remote = env.remote();
    let toolset = toolset_with_job_tools(&remote);
    let waited = toolset
        .call("slow_remote", json!({"ms": 400}))
        .await
        .unwrap();
    eprintln!("--- submit then result ({})", env.url);
    let started = Instant::now();
    let ticket = transcript(&toolset, "slow_remote_submit", json!({"ms": 400}))
        .await
        .unwrap();
    let took = started.elapsed();
    eprintln!("  (the ticket came back in {took:?}; the body sleeps 400 ms)");
    assert!(took < Duration::from_millis(400), "{took:?}");
    assert_eq!(ticket["state"], "queued");
    assert_eq!(ticket["tool"], "slow");
    assert_eq!(ticket["queue"], env.queue.as_str());
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let mut states = vec![JobState::Queued];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = toolset
            .call("job_status", json!({"job_id": id}))
            .await
            .unwrap();
        let state: JobState = serde_json::from_value(status["state"].clone()).unwrap();
        if states.last() != Some(&state) {
            eprintln!("> job_status {}\n< {status}", json!({"job_id": id}));
            states.push(state);
        }
        if state.is_done() {
            break;
        }
        assert!(Instant::now() < deadline, "states so far: {states:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(states.last(), Some(&JobState::Finished), "{states:?}");
    let result = transcript(&toolset, "job_result", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(result["state"], "finished");
    assert_eq!(result["result"], waited, "what the waiting branch returns");
    match remote.jobs().result(&id).await.unwrap() {
        JobResult::Finished(value) => assert_eq!(value, waited),
        other => panic!("expected the result, got {other:?}"),
    }
    // Arguments are checked before anything is enqueued, the schedule too.
    match toolset
        .call(
            "slow_remote_submit",
            json!({"ms": 1, "delay_ms": 10, "at": "2030-01-01T00:00:00Z"}),
        )
        .await
        .unwrap_err()
    {
        ToolError::InvalidArguments { tool, field, .. } => {
            assert_eq!(
                (tool.as_str(), field.as_deref()),
                ("slow_remote_submit", Some("at"))
            );
        }
        other => panic!("expected invalid arguments, got {other:?}"),
    }
}

/// A job scheduled 2 s ahead and cancelled never runs: its file is never made,
/// while the same job scheduled 1 s ahead and left alone makes its file.
async fn schedule_then_cancel(env: Env) {
    let worker = WorkerProcess::start(&env);
    let remote = env.remote();
    let toolset = toolset_with_job_tools(&remote);
    let cancelled = std::env::temp_dir().join(format!("{}.mark", unique("cancelled")));
    let control = std::env::temp_dir().join(format!("{}.mark", unique("control")));
    eprintln!("--- schedule then cancel ({})", env.url);
    let ticket = transcript(
        &toolset,
        "mark_remote_submit",
        json!({"path": cancelled.display().to_string(), "delay_ms": 2000}),
    )
    .await
    .unwrap();
    assert_eq!(ticket["state"], "scheduled");
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let status = transcript(&toolset, "job_status", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(status["state"], "scheduled");
    let outcome = transcript(&toolset, "job_cancel", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(outcome["state"], "cancelled");
    // The control job, left alone, runs at its time.
    let kept = toolset
        .call(
            "mark_remote_submit",
            json!({"path": control.display().to_string(), "delay_ms": 1000}),
        )
        .await
        .unwrap();
    eprintln!("  (waiting 4 s: past the cancelled job's time and a poll)");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let status = transcript(&toolset, "job_status", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(status["state"], "cancelled");
    let result = transcript(&toolset, "job_result", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(result, json!({"job_id": id, "state": "cancelled"}));
    eprintln!(
        "  {} exists: {}; the control job's file exists: {}",
        cancelled.display(),
        cancelled.exists(),
        control.exists()
    );
    assert!(!cancelled.exists(), "the cancelled job ran");
    let control_id = kept["job_id"].as_str().unwrap();
    let control_state = remote.jobs().status(control_id).await.unwrap().state;
    assert_eq!(control_state, JobState::Finished, "{}", worker.log_text());
    assert!(control.exists(), "the control job did not run");
    assert_eq!(worker.jobs_started("mark"), 1, "{}", worker.log_text());
    // Cancelling again answers the same.
    assert_eq!(remote.jobs().cancel(&id).await.unwrap().state, JobState::Cancelled);
    let _ = std::fs::remove_file(&control);
}

/// A failing body's error comes back through `job_result` as the same variant;
/// an id nobody submitted is a typed error, from Rust and from the tools.
async fn a_submitted_failure_comes_back_typed_and_unknown_ids_are_errors(env: Env) {
    let worker = WorkerProcess::start(&env);
    let remote = env.remote();
    let toolset = toolset_with_job_tools(&remote);
    eprintln!("--- a failing body, an unknown id ({})", env.url);
    let ticket = transcript(&toolset, "fail_remote_submit", json!({}))
        .await
        .unwrap();
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !remote.jobs().status(&id).await.unwrap().state.is_done() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        remote.jobs().status(&id).await.unwrap().state,
        JobState::Failed
    );
    let check = |error: &ToolError| assert_failed_on_purpose(error, &worker);
    match remote.jobs().result(&id).await.unwrap() {
        JobResult::Failed(error) => check(&error),
        other => panic!("expected the failure, got {other:?}"),
    }
    let error = transcript(&toolset, "job_result", json!({"job_id": id}))
        .await
        .unwrap_err();
    check(job_tool_source::<ToolError>(&error));

    let nobody = ulid::Ulid::generate().to_string();
    for id in [nobody.as_str(), "not-a-job-id"] {
        let error = transcript(&toolset, "job_status", json!({"job_id": id}))
            .await
            .unwrap_err();
        assert!(matches!(
            job_tool_source::<JobError>(&error),
            JobError::Unknown { .. }
        ));
        for outcome in [
            remote.jobs().status(id).await.map(drop),
            remote.jobs().result(id).await.map(drop),
            remote.jobs().cancel(id).await.map(drop),
        ] {
            assert!(
                matches!(outcome, Err(JobError::Unknown { ref job, .. }) if job == id),
                "{outcome:?}"
            );
        }
    }
}

/// Two queues' job tools in one toolset, under names of their own: each follows
/// its own queue's jobs. Under the default names they collide, and binding the
/// second set says so.
async fn two_queues_have_job_tools_under_names_of_their_own(env: Env) {
    let weather = env.remote();
    let other = env.remote().queue(format!("{}-other", env.queue)).unwrap();
    let toolset = toolset(&weather);
    let tools = [
        weather.jobs().tools_named("weather_job").unwrap(),
        other.jobs().tools_named("other_job").unwrap(),
    ];
    for tool in tools.iter().flatten() {
        toolset.bind((tool.combo(),)).unwrap();
    }
    // No worker: the job stays queued.
    let ticket = toolset
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap();
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let status = toolset
        .call("weather_job_status", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(status["state"], "queued", "{status}");
    assert_eq!(status["queue"], weather.queue_name(), "{status}");
    // A ULID reads the same in lower case.
    let lower = toolset
        .call("weather_job_status", json!({"job_id": id.to_lowercase()}))
        .await
        .unwrap();
    assert_eq!(lower, status);
    // Arguments of the wrong type are refused as arguments, not as a failure.
    for args in [json!({"job_id": 5}), json!({})] {
        let refused = toolset
            .call("weather_job_status", args.clone())
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, ToolError::InvalidArguments { field, .. } if field.as_deref() == Some("job_id")),
            "{args}: {refused:?}"
        );
    }
    let error = toolset
        .call("other_job_status", json!({"job_id": id}))
        .await
        .unwrap_err();
    assert!(matches!(
        job_tool_source::<JobError>(&error),
        JobError::Unknown { .. }
    ));
    assert!(
        error
            .to_string()
            .contains(&format!("on queue `{}`", other.queue_name())),
        "{error}"
    );
    let cancelled = toolset
        .call("weather_job_cancel", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");

    let clash = Toolset::new();
    for tool in weather.jobs().tools() {
        clash.bind((tool.combo(),)).unwrap();
    }
    let refused = clash.bind((other.jobs().tools()[0].combo(),)).unwrap_err();
    assert!(refused.to_string().contains("`job_status`"), "{refused}");
    assert!(weather.jobs().tools_named("weather job").is_err());
}

/// Cancels racing each other over the same queued jobs all answer that the job
/// is cancelled ("cancelling it again answers the same"), and none of them runs.
async fn concurrent_cancels_of_a_queued_job_all_cancel_it(env: Env) {
    let remote = env.remote();
    let toolset = toolset(&remote);
    for _ in 0..5 {
        let ticket = toolset
            .call("slow_remote_submit", json!({"ms": 1}))
            .await
            .unwrap();
        let id = ticket["job_id"].as_str().unwrap().to_owned();
        let mut cancels = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let (remote, id) = (remote.clone(), id.clone());
            cancels.spawn(async move { remote.jobs().cancel(&id).await });
        }
        while let Some(outcome) = cancels.join_next().await {
            let ticket = outcome
                .unwrap()
                .unwrap_or_else(|error| panic!("{id}: {error}"));
            assert_eq!(ticket.state, JobState::Cancelled);
        }
        assert_eq!(
            remote.jobs().status(&id).await.unwrap().state,
            JobState::Cancelled
        );
    }
}

/// A job a worker runs is cancelled by withdrawing it: the worker stops the body
/// and sends no result, and the job reads cancelled; one that ended stays ended.
async fn a_running_job_is_cancelled_and_its_body_stopped(env: Env) {
    let worker = WorkerProcess::start(&env);
    let remote = env.remote();
    let toolset = toolset_with_job_tools(&remote);
    let ticket = toolset
        .call("slow_remote_submit", json!({"ms": 20_000}))
        .await
        .unwrap();
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    while remote.jobs().status(&id).await.unwrap().state != JobState::Running {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let asked = Instant::now();
    let cancelled = transcript(&toolset, "job_cancel", json!({"job_id": id}))
        .await
        .unwrap();
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    while !worker.log_text().contains("the body stopped") {
        assert!(Instant::now() < deadline, "{}", worker.log_text());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!(
        "cancel to the body stopped on the worker: {:?}",
        asked.elapsed()
    );
    assert!(matches!(
        remote.jobs().result(&id).await.unwrap(),
        JobResult::NotFinished(JobTicket {
            state: JobState::Cancelled,
            ..
        })
    ));
    // An ended job is not cancelled: its result stays.
    let done = toolset
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap();
    let done = done["job_id"].as_str().unwrap().to_owned();
    while !remote.jobs().status(&done).await.unwrap().state.is_done() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(matches!(
        remote.jobs().cancel(&done).await,
        Err(JobError::NotCancellable {
            state: JobState::Finished,
            ..
        })
    ));
}

/// MCP tasks for `remote` branches are their jobs: a call on one replica (a
/// caller process of a fleet, here a second server with its own toolset) is
/// followed, answered and cancelled from another, by the task id alone.
async fn mcp_tasks_are_jobs_any_replica_follows(env: Env) {
    use rmcp::model::{CallToolResponse, CancelTaskParams, GetTaskParams, TaskPayload, TaskStatus};
    let worker = WorkerProcess::start(&env);
    let remote = env.remote();
    let replica = |remote: &Remote| {
        let tasks = toolgraft_mcp::task::Tasks::new().following(remote.clone());
        toolgraft_mcp::ToolsetServer::new(toolset(remote)).with_tasks(tasks)
    };
    let (one, two) = (
        tasks_client(replica(&remote)).await,
        tasks_client(replica(&env.remote())).await,
    );
    let created = one
        .call_tool_once(
            rmcp::model::CallToolRequestParams::new("slow_remote")
                .with_arguments(json!({"ms": 200}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let CallToolResponse::Task(created) = created else {
        panic!("a task, not {created:?}");
    };
    let id = created.task.task_id;
    assert!(id.starts_with("job."), "{id}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let ended = loop {
        let task = two.get_task(GetTaskParams::new(&id)).await.unwrap().task;
        if task.status() != TaskStatus::Working {
            break task;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let TaskPayload::Completed { result } = ended.payload else {
        panic!("completed, not {:?}", ended.task.status);
    };
    assert_eq!(
        result["structuredContent"],
        json!(worker.pid()),
        "run by the worker"
    );

    // A long one, cancelled from the other replica while it runs.
    let created = one
        .call_tool_once(
            rmcp::model::CallToolRequestParams::new("slow_remote")
                .with_arguments(json!({"ms": 20_000}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let CallToolResponse::Task(created) = created else {
        panic!("a task, not {created:?}");
    };
    let id = created.task.task_id;
    let started = worker.log_text().matches("job started").count();
    while worker.log_text().matches("job started").count() < started.max(2) {
        assert!(Instant::now() < deadline, "{}", worker.log_text());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let asked = Instant::now();
    two.cancel_task(CancelTaskParams::new(&id)).await.unwrap();
    while !worker.log_text().contains("the body stopped") {
        assert!(Instant::now() < deadline, "{}", worker.log_text());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!(
        "tasks/cancel on another replica to the body stopped: {:?}",
        asked.elapsed()
    );
    for client in [&one, &two] {
        let task = client.get_task(GetTaskParams::new(&id)).await.unwrap().task;
        assert_eq!(task.status(), TaskStatus::Cancelled);
    }
    // Ids nobody made are unknown on every replica: a real job's id with a
    // made-up secret (a job id is no secret: tickets and logs show it), a job
    // no server followed, one of another follower, and ones that name nothing.
    let follower = format!("remote:{}", env.queue);
    let hex = |parts: Value| -> String {
        parts
            .to_string()
            .bytes()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    };
    let unhex = |id: &str| -> Value {
        let bytes: Vec<u8> = (4..id.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&id[at..at + 2], 16).unwrap())
            .collect();
        serde_json::from_slice(&bytes).unwrap()
    };
    let handle = unhex(&id)[1].as_str().unwrap().to_owned();
    let (job_id, _) = handle.split_once('.').unwrap();
    let submitted = toolset(&remote)
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap();
    let submitted = submitted["job_id"].as_str().unwrap();
    let forged_secret = format!("{job_id}.{}", "0".repeat(40));
    for forged in [
        format!("job.{}", hex(json!([follower, forged_secret]))),
        format!("job.{}", hex(json!([follower, format!("{submitted}.x")]))),
        format!(
            "job.{}",
            hex(json!([follower, "01M8TJTYMW2H8NQBKJZ4RHQT79.1"]))
        ),
        format!("job.{}", hex(json!(["remote:elsewhere", handle]))),
        "job.7b7d".to_owned(),
        "job.zz".to_owned(),
    ] {
        let unknown = two.get_task(GetTaskParams::new(&forged)).await.unwrap_err();
        assert!(
            unknown.to_string().contains("-32602"),
            "{forged}: {unknown}"
        );
        assert!(
            two.cancel_task(CancelTaskParams::new(&forged))
                .await
                .is_err(),
            "{forged}"
        );
    }
}

type TasksClient = rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig>;

/// A `2026-07-28` client of `server` that declared the tasks extension.
async fn tasks_client<H: rmcp::ServerHandler>(server: H) -> TasksClient {
    use rmcp::{ClientServiceExt, ServiceExt};
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let capabilities = serde_json::from_value(json!({
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }))
    .unwrap();
    let client = rmcp::model::ClientConfig::new(
        capabilities,
        rmcp::model::Implementation::new("jobs-test", "0"),
    );
    let lifecycle = rmcp::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    client
        .serve_with_lifecycle(client_io, lifecycle)
        .await
        .unwrap()
}

/// A manifest binds `[remote, submit]` with the registry's run-time `submit`,
/// and refuses `submit` over anything else, naming the tool and the fix.
async fn a_manifest_submits_only_right_outside_remote(env: Env) {
    let worker = WorkerProcess::start(&env);
    let whereami = whereami_tool();
    let mut bases = BaseTools::new();
    bases.add(&whereami);
    let registry = registry();
    let remote = json!({"name": "remote", "config": {"url": env.url, "queue": env.queue}});
    let manifest =
        Manifest::from_value(&json!({"tools": {"whereami": [["proxy", remote, "submit"]]}}))
            .unwrap();
    let toolset = Toolset::new();
    for (tool, outcome) in toolset.bind_manifest(&registry, &bases, &manifest) {
        outcome.unwrap_or_else(|error| panic!("{tool}: {error}"));
    }
    let caller = env.remote();
    for tool in caller.jobs().tools() {
        toolset.bind((tool.combo(),)).unwrap();
    }
    let ticket = toolset
        .call(
            "whereami_proxy_remote_submit",
            json!({"city": "Porto", "proxies": ["egress-eu"]}),
        )
        .await
        .unwrap();
    assert_eq!(ticket["tool"], "whereami_proxy");
    let id = ticket["job_id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        if let JobResult::Finished(value) = caller.jobs().result(&id).await.unwrap() {
            break report(value);
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (answer.pid, answer.route.as_deref()),
        (worker.pid(), Some("egress-eu"))
    );

    for combo in [json!(["trace", "submit"]), json!(["submit"])] {
        let manifest = Manifest::from_value(&json!({"tools": {"whereami": [combo]}})).unwrap();
        let outcome = Toolset::new().bind_manifest(&registry, &bases, &manifest);
        match &outcome[0].1 {
            Err(
                error @ BindError::ExtensionFailed {
                    tool,
                    extension,
                    problem,
                },
            ) => {
                eprintln!("{combo}: {error}");
                assert_eq!((tool.as_str(), extension.as_str()), ("whereami", "submit"));
                assert!(problem.contains("not a `remote` branch"), "{problem}");
                assert!(problem.contains("[.., remote, submit]"), "{problem}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

/// A submit that recorded its job but could not enqueue it (the jobs file locked
/// by another process past the timeout): the caller gets a relocation error
/// naming the job; the job reads `queued` while that submit could still land,
/// then `failed` with the reason, and is no more cancellable than a failed job.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_that_never_enqueued_reads_failed_not_queued_forever() {
    let env = Env::sqlite("never_enqueued").await;
    let remote = env.remote().timeout(Duration::from_millis(1500));
    let toolset = toolset(&remote);
    // Connects, and makes the files.
    toolset
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap();
    let path = env.url.trim_start_matches("sqlite://").to_owned();
    let mut lock = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys, time\n\
             db = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             db.execute('BEGIN EXCLUSIVE')\n\
             print('locked', flush=True)\n\
             time.sleep(30)",
            &path,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 holds the lock");
    let mut line = String::new();
    BufReader::new(lock.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");
    let refused = toolset
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap_err();
    let _ = lock.kill();
    let _ = lock.wait();
    let ToolError::Relocation { reason, .. } = &refused else {
        panic!("expected a relocation error, got {refused:?}");
    };
    eprintln!("the submit: {refused}");
    let id = reason
        .split('`')
        .nth(1)
        .expect("the reason names the job")
        .to_owned();
    assert!(reason.contains("did not answer within 1.5s"), "{reason}");

    // Until the submit's deadline and its slack, it may still land.
    let early = remote.jobs().status(&id).await.unwrap();
    assert_eq!(early.state, JobState::Queued);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let late = remote.jobs().status(&id).await.unwrap();
    assert_eq!(late.state, JobState::Failed);
    match remote.jobs().result(&id).await.unwrap() {
        JobResult::Failed(ToolError::Relocation { reason, .. }) => {
            eprintln!("its result: {reason}");
            assert!(reason.contains("was never enqueued"), "{reason}");
        }
        other => panic!("expected a relocation failure, got {other:?}"),
    }
    match remote.jobs().cancel(&id).await {
        Err(JobError::NotCancellable { state, .. }) => assert_eq!(state, JobState::Failed),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// An engine that accepts connections and never answers: a submit and the job
/// queries each give up at the backend's timeout, naming it.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_engine_costs_the_timeout_not_more() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    // Accepts (the kernel's backlog does), never reads or writes.
    let remote = Remote::new(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .queue("silent")
        .unwrap()
        .timeout(Duration::from_millis(400));
    let toolset = toolset(&remote);
    let started = Instant::now();
    let refused = toolset
        .call("slow_remote_submit", json!({"ms": 1}))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("did not answer within 400ms"),
        "{refused}"
    );
    let id = ulid::Ulid::generate().to_string();
    for outcome in [
        remote.jobs().status(&id).await.map(drop),
        remote.jobs().result(&id).await.map(drop),
        remote.jobs().cancel(&id).await.map(drop),
    ] {
        match outcome {
            Err(JobError::Engine(message)) => {
                assert!(message.contains("did not answer within 400ms"), "{message}")
            }
            other => panic!("expected the engine's timeout, got {other:?}"),
        }
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "{took:?} for four calls");
    drop(silent);
}

/// The user's side of `approve` for the fleet test: asked later (an
/// input-required round trip), bringing `answer` with its state.
struct Later(Option<(bool, String)>);

impl context::Ask for Later {
    fn answered(&self, _: &str) -> Option<context::Answered> {
        let (yes, state) = self.0.clone()?;
        let mut fields = serde_json::Map::new();
        fields.insert("approve".to_owned(), json!(yes));
        Some(context::Answered {
            answer: context::Answer::Accept(fields),
            state: Some(state),
        })
    }

    fn reach(&self) -> context::Reach {
        context::Reach::Later
    }

    fn ask_now(
        &self,
        _: context::Question,
    ) -> futures_util::future::BoxFuture<'static, Result<context::Answer, String>> {
        Box::pin(async { Err("asked later only".to_owned()) })
    }
}

/// Two replicas with one key and one Redis ledger: an approval sealed by one is
/// taken by the other once, and refused as replayed on either after that.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_spent_on_every_replica_of_a_fleet() {
    use toolgraft::ext::approve::{ApprovalError, Approve, SealKey};
    let env = Env::redis("approval_fleet").await;
    let key = SealKey::new(vec![5; 32]).unwrap();
    let replica = || {
        let approve = Approve::new(key.clone())
            .with_ledger(toolgraft_jobs::RedisLedger::new(&env.url).unwrap());
        let toolset = Toolset::new();
        toolset
            .bind((whereami_tool().combo().with(approve),))
            .unwrap();
        toolset
    };
    let (one, two) = (replica(), replica());
    async fn call(toolset: &Toolset, brought: Option<(bool, String)>) -> Result<Value, ToolError> {
        let call = toolset.call("whereami_approve", json!({"city": "Oslo"}));
        context::with(context::Asker::new(Later(brought)), call).await
    }
    let asked = call(&one, None).await.unwrap_err();
    let state = asked
        .downcast_ref::<context::InputRequired>()
        .unwrap()
        .state
        .clone()
        .unwrap();
    let ran = call(&two, Some((true, state.clone()))).await.unwrap();
    assert_eq!(report(ran).city, "Oslo");
    for replica in [&one, &two] {
        let replayed = call(replica, Some((true, state.clone())))
            .await
            .unwrap_err();
        assert_eq!(
            replayed.downcast_ref::<ApprovalError>(),
            Some(&ApprovalError::Replayed),
            "{replayed}"
        );
    }
    // A ledger that cannot be reached refuses: fail closed.
    let down = Approve::new(key)
        .with_ledger(toolgraft_jobs::RedisLedger::new("redis://127.0.0.1:1").unwrap());
    let toolset = Toolset::new();
    toolset.bind((whereami_tool().combo().with(down),)).unwrap();
    let state = call(&toolset, None)
        .await
        .unwrap_err()
        .downcast_ref::<context::InputRequired>()
        .unwrap()
        .state
        .clone()
        .unwrap();
    let refused = call(&toolset, Some((true, state))).await.unwrap_err();
    assert!(
        matches!(
            refused.downcast_ref::<ApprovalError>(),
            Some(ApprovalError::Ledger(_))
        ),
        "{refused}"
    );
}

/// From a manifest, `approve` binds outside `remote` and is refused inside it,
/// with the rule and the fix.
#[test]
fn a_manifest_puts_approve_outside_remote_only() {
    use toolgraft::ext::approve::{Approve, SealKey};
    use toolgraft::runtime::Refined;
    let mut registry = registry();
    registry
        .register(Refined::new(
            Approve::new(SealKey::new(vec![5; 32]).unwrap()),
            Approve::configured,
        ))
        .unwrap();
    let path = std::env::temp_dir().join(format!("{}.db", unique("approve_manifest")));
    let remote =
        json!({"name": "remote", "config": {"url": format!("sqlite://{}", path.display())}});
    let tools = BaseTools::new().with(&whereami_tool());
    let outside =
        Manifest::from_value(&json!({"tools": {"whereami": [[remote.clone(), "approve"]]}}))
            .unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry, &tools, &outside);
    assert!(outcome[0].1.is_ok(), "{outcome:?}");
    assert!(
        toolset
            .names()
            .iter()
            .any(|name| name.as_str() == "whereami_remote_approve")
    );

    let inside =
        Manifest::from_value(&json!({"tools": {"whereami": [["approve", remote]]}})).unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry, &tools, &inside);
    let error = outcome[0].1.as_ref().unwrap_err();
    eprintln!("{error}");
    assert!(
        matches!(error, BindError::CallerLocalInsideRelocation { .. }),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "on `whereami`, `approve` needs the caller's session but sits inside `remote`, which would run it on a worker with no caller to ask or report to; place `approve` after `remote`"
    );
    assert!(toolset.names().is_empty());
}

/// An MCP client that keeps the progress notifications it gets, with when.
#[derive(Clone, Default)]
struct ProgressClient {
    seen: Arc<Mutex<Vec<(Instant, rmcp::model::ProgressNotificationParam)>>>,
}

impl rmcp::ClientHandler for ProgressClient {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.seen.lock().unwrap().push((Instant::now(), params));
    }
}

/// The whole way: an MCP client calls a `remote` branch through toolgraft-mcp,
/// the body runs in a worker process and reports progress, and the client gets
/// each notification, in order, before the reply.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_from_a_worker_process_reaches_an_mcp_client() {
    use rmcp::ServiceExt;
    let env = Env::sqlite("progress_to_mcp").await;
    let worker = WorkerProcess::start(&env);
    let server = toolgraft_mcp::ToolsetServer::new(toolset(&env.remote()));
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = ProgressClient::default();
    let running = client.clone().serve(client_io).await.unwrap();
    let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(1));
    let mut params = rmcp::model::CallToolRequestParams::new("steps_remote")
        .with_arguments(json!({"steps": 4, "ms": 80}).as_object().unwrap().clone());
    params.meta = Some(rmcp::model::RequestMetaObject::with_progress_token(token));
    let started = Instant::now();
    let answer = running.call_tool(params).await.unwrap();
    let answered = started.elapsed();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let seen = client.seen.lock().unwrap().clone();
    for (at, progress) in &seen {
        eprintln!(
            "+{:>6.1} ms  notifications/progress {}/{:?} {:?}",
            at.duration_since(started).as_secs_f64() * 1e3,
            progress.progress,
            progress.total,
            progress.message
        );
    }
    eprintln!(
        "+{:>6.1} ms  reply {:?}",
        answered.as_secs_f64() * 1e3,
        answer.content[0].as_text().map(|text| &text.text)
    );
    let steps: Vec<f64> = seen.iter().map(|(_, progress)| progress.progress).collect();
    assert_eq!(steps, [1.0, 2.0, 3.0, 4.0], "{seen:?}");
    let worker_step = format!("step 4 in pid {}", worker.pid());
    assert_eq!(seen[3].1.message.as_deref(), Some(worker_step.as_str()));
    assert!(
        seen.iter()
            .all(|(at, _)| at.duration_since(started) <= answered),
        "every notification before the reply"
    );
    running.cancel().await.unwrap();
}
