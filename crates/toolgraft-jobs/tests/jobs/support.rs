//! The harness every area shares: the toolset each process binds (the same
//! code in a caller and in a worker), the worker and caller processes (this
//! test binary started again as `support::worker_process`), the tiers a test
//! runs on ([`Env`], and `on_every_tier!`, which runs a test once per tier
//! built in), and the vocabulary the areas import with `use crate::support::*`.

#![allow(unused_imports)]

pub(crate) use std::collections::BTreeSet;
pub(crate) use std::io::{BufRead, BufReader};
pub(crate) use std::process::{Child, Command, Stdio};
pub(crate) use std::sync::{Arc, Mutex};
pub(crate) use std::time::{Duration, Instant};

pub(crate) use schemars::JsonSchema;
pub(crate) use serde::{Deserialize, Serialize};
pub(crate) use serde_json::{Value, json};
pub(crate) use toolgraft::context::{
    self, ChainDepth, Entry, Identity, InProcess, Keyed, Serialized, Unkeyed,
};
pub(crate) use toolgraft::error::BoxError;
pub(crate) use toolgraft::ext::{Authorize, Batch, Cache, Proxy, Retry, Timeout, Trace, proxy};
pub(crate) use toolgraft::extension::Configurable;
pub(crate) use toolgraft::prelude::*;
pub(crate) use toolgraft::runtime::Configured;
pub(crate) use toolgraft::runtime::manifest::{ElementSpec, Manifest};
pub(crate) use toolgraft::toolset::BaseTools;
pub(crate) use toolgraft::{BindError, Combo, Registry, ToolError};
pub(crate) use toolgraft_jobs::{
    Fleet, JobError, JobResult, JobState, JobTicket, Remote, RemoteFailure, Submit, Worker,
};

// ---------------------------------------------------------------- the toolset

#[derive(Deserialize, Serialize, JsonSchema)]
pub(crate) struct City {
    pub(crate) city: String,
}

/// Where the body ran, and what it saw.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub(crate) struct Report {
    pub(crate) city: String,
    pub(crate) pid: u32,
    pub(crate) route: Option<String>,
    /// The caller's own context entries, where they reached.
    #[serde(default)]
    pub(crate) tenant: Option<String>,
    #[serde(default)]
    pub(crate) in_process: Option<u32>,
    #[serde(default)]
    pub(crate) depth: usize,
    /// The caller's [`Identity`], as the body read it.
    #[serde(default)]
    pub(crate) identity: Option<Value>,
    /// The caller's W3C [`TraceContext`](context::TraceContext), as the body
    /// read it: the `traceparent` and `tracestate` it would send on.
    #[serde(default)]
    pub(crate) trace: Option<(String, String)>,
}

/// A user's own context entry that travels to worker processes.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub(crate) struct Tenant(pub(crate) String);

impl Entry for Tenant {
    const NAME: &'static str = "jobs_test.tenant";
    type Travel = Serialized;
    type Key = Keyed;
}

/// One that reaches worker threads only.
#[derive(Clone, Debug)]
pub(crate) struct ThreadsOnly(pub(crate) u32);

impl Entry for ThreadsOnly {
    const NAME: &'static str = "jobs_test.threads_only";
    type Travel = InProcess;
    type Key = Unkeyed;
}

#[derive(Clone, Deserialize, Serialize, JsonSchema)]
pub(crate) struct Sleep {
    pub(crate) ms: u64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
pub(crate) struct Nothing {}

#[derive(Clone, Deserialize, Serialize, JsonSchema)]
pub(crate) struct Steps {
    pub(crate) steps: u32,
    /// Between two steps.
    pub(crate) ms: u64,
}

/// Reports each step's progress, `steps` of them, `ms` apart; answers with the
/// process it ran in and the principal it ran for.
pub(crate) async fn steps(input: Steps) -> Result<Value, BoxError> {
    for step in 1..=input.steps {
        tokio::time::sleep(Duration::from_millis(input.ms)).await;
        let progress = context::Progress::new(step.into())
            .with_total(input.steps.into())
            .with_message(format!("step {step} in pid {}", std::process::id()));
        context::report_progress(progress);
    }
    let principal = context::get::<context::Principal>().map(|principal| principal.to_string());
    Ok(json!({"pid": std::process::id(), "principal": principal}))
}

pub(crate) async fn whereami(input: City) -> Result<Report, BoxError> {
    Ok(Report {
        city: input.city,
        pid: std::process::id(),
        route: proxy::current_route(),
        tenant: context::get::<Tenant>().map(|tenant| tenant.0),
        in_process: context::get::<ThreadsOnly>().map(|entry| entry.0),
        depth: ChainDepth::current(),
        identity: context::get::<Identity>()
            .map(serde_json::to_value)
            .transpose()?,
        trace: context::get::<context::TraceContext>()
            .map(|trace| (trace.traceparent(), trace.tracestate().to_owned())),
    })
}

pub(crate) async fn slow(input: Sleep) -> Result<u32, BoxError> {
    tokio::time::sleep(Duration::from_millis(input.ms)).await;
    Ok(std::process::id())
}

pub(crate) async fn fail(_: Nothing) -> Result<u32, BoxError> {
    Err("the body failed on purpose".into())
}

pub(crate) async fn boom(_: Nothing) -> Result<u32, BoxError> {
    panic!("boom on purpose")
}

#[derive(Deserialize, Serialize, JsonSchema)]
pub(crate) struct Path {
    pub(crate) path: String,
}

/// A side effect the tests can see: creates the file `path`.
pub(crate) async fn mark(input: Path) -> Result<u32, BoxError> {
    std::fs::write(&input.path, std::process::id().to_string())?;
    Ok(std::process::id())
}

/// A side effect that adds up: appends the process id as a line to `path`
/// (a charge, a mail sent), saying nothing of calling it twice.
pub(crate) async fn charge(input: Path) -> Result<u32, BoxError> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&input.path)?;
    writeln!(file, "{}", std::process::id())?;
    Ok(std::process::id())
}

/// Kills its own process (SIGKILL) once the layer below has answered, the
/// first time for a `path` (it leaves `<path>.killed` behind): a worker dying
/// after the body's effect and before its reply.
#[derive(Clone, Debug)]
pub(crate) struct DiesAfterTheEffect;

impl toolgraft::Extension for DiesAfterTheEffect {
    type Kind = toolgraft::extension::Wrapper;
    type Locality = toolgraft::extension::Anywhere;
    fn name(&self) -> &str {
        "dies"
    }
}

impl toolgraft::Wrap<toolgraft::runtime::DynStack> for DiesAfterTheEffect {
    type Params = ();
    async fn around(
        &self,
        next: toolgraft::extension::Next<'_, toolgraft::runtime::DynStack, Self>,
        (): (),
        input: toolgraft::extension::DynInput,
    ) -> Result<Value, ToolError> {
        let marker = input
            .args()
            .get("path")
            .and_then(Value::as_str)
            .map(|path| format!("{path}.killed"));
        let answer = next.call(input).await;
        if let Some(marker) = marker
            && std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&marker)
                .is_ok()
        {
            tracing::info!("the effect is done: killing this worker before its reply");
            let _ = Command::new("kill")
                .args(["-KILL", &std::process::id().to_string()])
                .status();
            std::thread::sleep(Duration::from_secs(60));
        }
        answer
    }
}

pub(crate) fn whereami_tool() -> impl BaseTool<Input = City, Output = Report> {
    Tool::builder()
        .name("whereami")
        .description("Report the process and route the body runs with.")
        .read_only()
        .body(whereami)
        .build()
        .unwrap()
}

/// The scope `whereami_remote_authorize` asks of its callers.
pub(crate) const WEATHER_READ: &str = "weather:read";

/// The check of `whereami_remote_authorize`, from its config: a fleet's members
/// rebind it by name (`registry()`) with the same policy.
pub(crate) fn weather_readers() -> Authorize {
    Authorize::from_config(serde_json::from_value(json!({"scopes": [WEATHER_READ]})).unwrap())
        .unwrap()
}

/// The one binding code of callers and workers.
pub(crate) fn toolset(remote: &Remote) -> Toolset {
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
            // The check outside: it decides in the caller, before a job is sent.
            Combo::on(&whereami)
                .with(remote.clone())
                .with(weather_readers()),
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
    // The second: three layers around `remote` and one inside
    // (tests/jobs/otel.rs traces it).
    toolset
        .bind((
            steps.combo().with(remote.clone()),
            steps
                .combo()
                .with(Proxy::allow(["egress-eu", "egress-us"]))
                .with(remote.clone())
                .with(Retry::attempts(2))
                .with(Timeout::new(Duration::from_secs(30))),
        ))
        .unwrap();
    // Effects once: `[once, dies, remote]`, the outcome in the job engine. The
    // worker runs `charge_once_dies` (as a manifest would: `dies` fits the
    // run-time stack only).
    let charge = Tool::builder()
        .name("charge")
        .description("Charge once: append a line to a file.")
        .body(charge)
        .build()
        .unwrap();
    let once = toolgraft::ext::OncePerKey::default().with_store(remote.outcomes());
    let mut effects = Registry::new();
    effects
        .register(toolgraft::runtime::Refined::new(
            once,
            toolgraft::ext::OncePerKey::configured,
        ))
        .unwrap()
        .register(DiesAfterTheEffect)
        .unwrap()
        .register(remote.clone())
        .unwrap();
    let manifest =
        Manifest::from_json(r#"{"tools": {"charge": [["once", "dies", "remote"]]}}"#).unwrap();
    for (_, bound) in toolset.bind_manifest(&effects, &BaseTools::new().with(&charge), &manifest) {
        bound.unwrap();
    }
    crate::imported::bind(&toolset, remote);
    toolset
}

/// A tool only callers bind: workers do not know it.
pub(crate) fn with_unknown_tool(toolset: &Toolset, remote: &Remote) {
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

pub(crate) const WORKER_URL: &str = "TOOLGRAFT_TEST_WORKER_URL";
pub(crate) const WORKER_QUEUE: &str = "TOOLGRAFT_TEST_WORKER_QUEUE";
/// A JSON object of `RemoteConfig` fields the worker's remote takes over.
pub(crate) const WORKER_ENGINE: &str = "TOOLGRAFT_TEST_WORKER_ENGINE";
/// Set: the worker follows the queue's fleet with `registry()`.
pub(crate) const WORKER_FLEET: &str = "TOOLGRAFT_TEST_WORKER_FLEET";
/// The branch a caller process waits for, then calls.
pub(crate) const CALLER_BRANCH: &str = "TOOLGRAFT_TEST_CALLER_BRANCH";

/// The extensions every process of a fleet can rebind by name.
pub(crate) fn registry() -> Registry {
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
        // The imported rmcp tools' combos (`imported::bind`).
        .register(Configured::new(Retry::default()))
        .unwrap()
        .register(Configured::new(Timeout::new(Duration::from_secs(30))))
        .unwrap()
        .register(Configured::<Remote>::named("remote"))
        .unwrap()
        .register(Submit::new().dynamic())
        .unwrap()
        .register(Configured::new(Authorize::default()))
        .unwrap()
        // `charge`'s effects once: in each process's memory when a fleet
        // rebinds it (the tests that kill a worker bind it with the engine's).
        .register(Configured::new(toolgraft::ext::OncePerKey::default()))
        .unwrap()
        .register(DiesAfterTheEffect)
        .unwrap();
    registry
}

/// The worker process the tests start: this binary, run as
/// `jobs --exact worker_process --ignored` with the two variables above.
#[test]
#[ignore = "a worker process: the other tests start it"]
pub(crate) fn worker_process() {
    let (Ok(url), Ok(queue)) = (std::env::var(WORKER_URL), std::env::var(WORKER_QUEUE)) else {
        return;
    };
    // Traces go to `OTEL_EXPORTER_OTLP_ENDPOINT` when it is set (tests/jobs/otel.rs).
    #[cfg(feature = "otel")]
    let _otel = crate::otlp::init("toolgraft-jobs-worker").unwrap();
    #[cfg(not(feature = "otel"))]
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let mut remote = Remote::new(url).unwrap().with_queue(queue).unwrap();
    if let Ok(engine) = std::env::var(WORKER_ENGINE) {
        let mut config = serde_json::to_value(remote.settings()).unwrap();
        let engine: serde_json::Map<String, Value> = serde_json::from_str(&engine).unwrap();
        config.as_object_mut().unwrap().extend(engine);
        remote = Remote::from_config(serde_json::from_value(config).unwrap()).unwrap();
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut worker = Worker::new(toolset(&remote), &remote).with_grace(Duration::from_secs(10));
    if std::env::var_os(WORKER_FLEET).is_some() {
        worker = worker.with_fleet(registry());
    }
    runtime.block_on(worker.run()).unwrap();
    eprintln!("worker {} exited cleanly", std::process::id());
}

/// A caller process of a fleet: joins it, waits until its toolset binds
/// `CALLER_BRANCH` (a change another caller made), calls it, and prints what
/// answered.
#[test]
#[ignore = "a caller process: the fleet test starts it"]
pub(crate) fn fleet_caller_process() {
    let (Ok(url), Ok(queue), Ok(branch)) = (
        std::env::var(WORKER_URL),
        std::env::var(WORKER_QUEUE),
        std::env::var(CALLER_BRANCH),
    ) else {
        return;
    };
    let remote = Remote::new(url).unwrap().with_queue(queue).unwrap();
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
pub(crate) struct WorkerProcess {
    pub(crate) child: Child,
    pub(crate) log: Arc<Mutex<Vec<String>>>,
}

impl WorkerProcess {
    pub(crate) fn start(env: &Env) -> Self {
        Self::spawn(env, "worker_process", &[])
    }

    /// A worker that follows the queue's fleet.
    pub(crate) fn start_in_fleet(env: &Env) -> Self {
        Self::spawn(env, "worker_process", &[(WORKER_FLEET, "1")])
    }

    /// This binary run as the ignored test `test` (of `support`, unless its
    /// path names another module), with the env's URL and queue.
    pub(crate) fn spawn(env: &Env, test: &str, vars: &[(&str, &str)]) -> Self {
        let test = match test.contains("::") {
            true => test.to_owned(),
            false => format!("support::{test}"),
        };
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &test, "--ignored", "--nocapture"])
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

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Log lines of jobs started for `tool`.
    pub(crate) fn jobs_started(&self, tool: &str) -> usize {
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
    pub(crate) async fn settled_jobs(&self, tool: &str, at_least: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.jobs_started(tool) < at_least && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.jobs_started(tool)
    }

    pub(crate) fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits until the log has a line containing all of `needles`.
    pub(crate) async fn wait_for_line(&self, needles: &[&str]) -> String {
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

    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub(crate) async fn exit_status(&mut self, within: Duration) -> std::process::ExitStatus {
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
pub(crate) struct Env {
    pub(crate) url: String,
    pub(crate) queue: String,
    pub(crate) _guard: Guard,
}

pub(crate) enum Guard {
    None,
    Server(Child),
    File(std::path::PathBuf),
    /// A PostgreSQL server of the test's own (`scripts/postgres`), in this
    /// directory: stopped, and the directory removed.
    #[cfg(feature = "postgres")]
    Postgres(std::path::PathBuf),
}

impl Drop for Guard {
    fn drop(&mut self) {
        match self {
            Guard::None => {}
            Guard::Server(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            #[cfg(feature = "postgres")]
            Guard::Postgres(dir) => {
                let _ = postgres_script("stop", dir).status();
                let _ = std::fs::remove_dir_all(dir);
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

/// A redis-server of the test's own on a free loopback port, without persistence,
/// answering when this returns: its URL and its process (the caller stops it).
#[cfg(feature = "redis")]
pub(crate) fn start_redis_server() -> (String, std::process::Child) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect(
            "the Redis tests need a Redis: run them with scripts/test, set TOOLGRAFT_REDIS_URL, or install redis-server",
        );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Another process could have taken the port between the probe and the start.
    assert!(
        server.try_wait().unwrap().is_none(),
        "redis-server exited: port {port} was taken"
    );
    (format!("redis://127.0.0.1:{port}"), server)
}

pub(crate) fn unique(test: &str) -> String {
    format!("{test}-{}", ulid::Ulid::generate()).to_lowercase()
}

impl Env {
    #[cfg(feature = "redis")]
    pub(crate) async fn redis(test: &str) -> Self {
        let queue = unique(test);
        if let Ok(url) = std::env::var("TOOLGRAFT_REDIS_URL") {
            return Self {
                url,
                queue,
                _guard: Guard::None,
            };
        }
        let (url, server) = start_redis_server();
        Self {
            url,
            queue,
            _guard: Guard::Server(server),
        }
    }

    /// A queue of the test's own on the PostgreSQL server `TOOLGRAFT_POSTGRES_URL`
    /// names (scripts/test starts one): a database serves many queues, each
    /// test's apart from the others'.
    #[cfg(feature = "postgres")]
    pub(crate) async fn postgres(test: &str) -> Self {
        Self {
            url: postgres_url(),
            queue: unique(test),
            _guard: Guard::None,
        }
    }

    #[cfg(feature = "sqlite")]
    pub(crate) async fn sqlite(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!("{}.db", unique(test)));
        Self {
            url: format!("sqlite://{}", path.display()),
            queue: "toolgraft".to_owned(),
            _guard: Guard::File(path),
        }
    }

    pub(crate) fn remote(&self) -> Remote {
        Remote::new(&self.url)
            .unwrap()
            .with_queue(&self.queue)
            .unwrap()
            .with_timeout(Duration::from_secs(30))
    }
}

macro_rules! on_every_tier {
    ($($test:ident),* $(,)?) => {
        #[cfg(feature = "redis")]
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(crate::support::Env::redis(stringify!($test)).await).await
                }
            )*
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(crate::support::Env::postgres(stringify!($test)).await).await
                }
            )*
        }
        #[cfg(feature = "sqlite")]
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(crate::support::Env::sqlite(stringify!($test)).await).await
                }
            )*
        }
    };
}

/// The PostgreSQL server the tests share: `TOOLGRAFT_POSTGRES_URL`.
#[cfg(feature = "postgres")]
pub(crate) fn postgres_url() -> String {
    std::env::var("TOOLGRAFT_POSTGRES_URL").expect(
        "the PostgreSQL tests need a server: run them with scripts/test (which starts one), \
         or set TOOLGRAFT_POSTGRES_URL=postgres://user@host:port/database",
    )
}

/// `scripts/postgres COMMAND DIR`, to run.
#[cfg(feature = "postgres")]
pub(crate) fn postgres_script(command: &str, dir: &std::path::Path) -> Command {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres");
    let mut script = Command::new(script);
    script.arg(command).arg(dir).stdout(Stdio::piped());
    script
}

impl Env {
    /// A queue on a PostgreSQL server of the test's own (what the test does to
    /// it, restarting it, touches no other test): stopped with the `Env`.
    #[cfg(feature = "postgres")]
    pub(crate) async fn postgres_of_its_own(test: &str) -> Self {
        let dir = std::env::temp_dir().join(unique(test));
        let started = postgres_script("start", &dir).output().unwrap();
        let guard = Guard::Postgres(dir);
        assert!(
            started.status.success(),
            "scripts/postgres could not start a server (it needs PostgreSQL's binaries)"
        );
        Env {
            url: String::from_utf8(started.stdout).unwrap().trim().to_owned(),
            queue: unique(test),
            _guard: guard,
        }
    }
}

/// How many rows of `apalis.jobs` the queue `queue` has on `url`.
#[cfg(feature = "postgres")]
pub(crate) async fn postgres_jobs(url: &str, queue: &str) -> usize {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM apalis.jobs WHERE job_type = $1")
        .bind(queue)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    usize::try_from(rows).unwrap()
}

/// How many jobs the store of `env`'s queue holds, whatever their state: what
/// callers enqueued on it (kept for the retention, which outlasts a test).
pub(crate) async fn stored_jobs(env: &Env) -> usize {
    #[cfg(feature = "redis")]
    if env.url.starts_with("redis") {
        use ::redis::AsyncCommands as _;
        let client = ::redis::Client::open(env.url.as_str()).unwrap();
        let mut redis = client.get_multiplexed_async_connection().await.unwrap();
        let stored: usize = redis.hlen(format!("{}:data", env.queue)).await.unwrap();
        return stored;
    }
    #[cfg(feature = "postgres")]
    if env.url.starts_with("postgres") {
        return postgres_jobs(&env.url, &env.queue).await;
    }
    #[cfg(feature = "sqlite")]
    if let Some(path) = env.url.strip_prefix("sqlite://") {
        if !std::path::Path::new(path).exists() {
            return 0;
        }
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{path}?mode=ro"))
            .await
            .unwrap();
        let (stored,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM Jobs WHERE job_type = ?1")
            .bind(&env.queue)
            .fetch_one(&pool)
            .await
            .unwrap();
        pool.close().await;
        return usize::try_from(stored).unwrap();
    }
    panic!("no tier of this build reads {}", env.url)
}

pub(crate) fn report(value: Value) -> Report {
    serde_json::from_value(value).unwrap()
}

/// `error` is `fail`'s body error, come back typed from `worker`.
pub(crate) fn assert_failed_on_purpose(error: &ToolError, worker: &WorkerProcess) {
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

/// A free loopback port (free when asked: a server started on it soon takes it).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Env {
    /// A queue on a `redis-server` of the test's own: what the server receives
    /// is the test's, and what the test does to it (killing its connections,
    /// stopping it) touches no other test. Stopped with the `Env`, passed or
    /// failed.
    #[cfg(feature = "redis")]
    pub(crate) async fn redis_of_its_own(test: &str) -> Self {
        let port = free_port();
        Env {
            url: format!("redis://127.0.0.1:{port}"),
            queue: unique(test),
            _guard: Guard::Server(redis_on(port).await),
        }
    }
}

/// A private `redis-server` on `port`, up when this returns.
#[cfg(feature = "redis")]
pub(crate) async fn redis_on(port: u16) -> Child {
    redis_on_with(port, &[]).await
}

/// [`redis_on`], with more of the server's arguments.
#[cfg(feature = "redis")]
pub(crate) async fn redis_on_with(port: u16, arguments: &[&std::ffi::OsStr]) -> Child {
    let mut server = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .args(arguments)
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

/// A loopback TCP proxy to a server whose connections the test kills: `cut`
/// drops every connection through it and refuses new ones for a while, what a
/// caller sees when its connections die and the network takes time to heal.
#[cfg(any(feature = "redis", feature = "postgres"))]
pub(crate) struct FlakyLink {
    /// The server's URL, its host and port replaced by `{}`.
    url: String,
    port: u16,
    open: Arc<std::sync::atomic::AtomicBool>,
    links: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

#[cfg(any(feature = "redis", feature = "postgres"))]
impl FlakyLink {
    /// A link to the server at `url` (`scheme://[user@]host:port[/..]`).
    pub(crate) async fn to(url: &str) -> Self {
        let (scheme, rest) = url.split_once("://").unwrap();
        let authority = rest.split('/').next().unwrap();
        let upstream = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host)
            .to_owned();
        let url = format!("{scheme}://{}", rest.replacen(&upstream, "{}", 1));
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
        Self {
            url,
            port,
            open,
            links,
        }
    }

    /// The server's URL through the link.
    pub(crate) fn url(&self) -> String {
        self.url
            .replacen("{}", &format!("127.0.0.1:{}", self.port), 1)
    }

    /// Kills every connection now and refuses new ones for `down`.
    pub(crate) fn cut(&self, down: Duration) {
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
