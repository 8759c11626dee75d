//! `timeout`: the deadline cancels the layer below, typed and from a manifest,
//! around a pool (the pool's job is aborted) and inside one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::ext::{Pool, Timeout};
use toolgraft::prelude::*;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;
use toolgraft::{BindError, Registry, ToolError};

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Nap {
    pub ms: u64,
}

/// What a nap's body did: whether it woke up (its side effect), and where its
/// future was dropped unfinished (the cancellation), by thread name.
#[derive(Clone)]
struct Witness {
    woke: Arc<AtomicBool>,
    dropped: Arc<Mutex<mpsc::Sender<String>>>,
}

/// Sends the thread's name when the body's future is dropped before it woke.
struct Guard {
    witness: Witness,
    done: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.done {
            let thread = std::thread::current().name().unwrap_or("?").to_owned();
            let _ = self.witness.dropped.lock().unwrap().send(thread);
        }
    }
}

/// `nap {ms}`: sleeps, then records that it woke.
fn nap() -> (
    impl BaseTool<Input = Nap, Output = String>,
    Witness,
    mpsc::Receiver<String>,
) {
    let (send, receive) = mpsc::channel();
    let witness = Witness {
        woke: Arc::new(AtomicBool::new(false)),
        dropped: Arc::new(Mutex::new(send)),
    };
    let body_witness = witness.clone();
    let tool = Tool::builder()
        .name("nap")
        .description("Sleep, then answer.")
        .read_only()
        .body(move |input: Nap| {
            let witness = body_witness.clone();
            async move {
                let mut guard = Guard {
                    witness,
                    done: false,
                };
                tokio::time::sleep(Duration::from_millis(input.ms)).await;
                guard.witness.woke.store(true, Ordering::SeqCst);
                guard.done = true;
                Ok("awake".to_owned())
            }
        })
        .build()
        .unwrap();
    (tool, witness, receive)
}

fn registry(pool: &Pool) -> Registry {
    let mut registry = Registry::new();
    registry
        .register(pool.clone())
        .unwrap()
        .register(Configured::new(Timeout::new(Duration::from_secs(30))))
        .unwrap();
    registry
}

/// Binds `nap` with `combos` from a manifest.
fn from_manifest(
    pool: &Pool,
    combos: serde_json::Value,
) -> (
    Toolset,
    Witness,
    mpsc::Receiver<String>,
    Result<(), BindError>,
) {
    let (tool, witness, dropped) = nap();
    let toolset = Toolset::new();
    let manifest = Manifest::from_value(&json!({"tools": {"nap": combos}})).unwrap();
    let mut outcome =
        toolset.bind_manifest(&registry(pool), &BaseTools::new().with(&tool), &manifest);
    (toolset, witness, dropped, outcome.remove(0).1)
}

/// Waits for the body's future to be dropped (a bound on a wait for an event,
/// not a timing assertion: it only keeps a broken build from hanging).
fn dropped_on(receive: &mpsc::Receiver<String>) -> String {
    receive
        .recv_timeout(Duration::from_secs(20))
        .expect("the body's future was never dropped: the job kept running")
}

fn assert_timed_out(err: &ToolError, layer: &str, after: Duration) {
    match err {
        ToolError::TimedOut {
            tool,
            extension,
            job,
            after: limit,
        } => {
            assert_eq!(tool.as_str(), layer);
            assert_eq!(extension.as_str(), "timeout");
            assert_eq!(*job, None);
            assert_eq!(*limit, after);
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!("`{layer}` did not finish within {after:?}; `timeout` cancelled it")
    );
}

#[tokio::test(start_paused = true)]
async fn the_deadline_cancels_the_body_typed_and_from_a_manifest() {
    let after = Duration::from_millis(100);
    // Typed.
    let (tool, witness, dropped) = nap();
    let toolset = Toolset::new();
    let (timed,) = toolset
        .bind((tool.combo().with(Timeout::new(after)),))
        .unwrap();
    assert_eq!(
        timed.call(Nap { ms: 10 }).await.unwrap(),
        "awake",
        "a call within the limit is unchanged"
    );
    witness.woke.store(false, Ordering::SeqCst);
    let err = timed.call(Nap { ms: 60_000 }).await.unwrap_err();
    assert_timed_out(&err, "nap", after);
    dropped_on(&dropped);
    assert!(!witness.woke.load(Ordering::SeqCst), "the body never woke");

    // The same through a manifest, by name.
    let pool = Pool::new(1).unwrap();
    let (toolset, witness, dropped, bound) =
        from_manifest(&pool, json!([[{"name": "timeout", "config": {"ms": 100}}]]));
    bound.unwrap();
    assert_eq!(toolset.names(), ["nap", "nap_timeout"]);
    assert_eq!(
        toolset
            .call("nap_timeout", json!({"ms": 10}))
            .await
            .unwrap(),
        json!("awake")
    );
    witness.woke.store(false, Ordering::SeqCst);
    let err = toolset
        .call("nap_timeout", json!({"ms": 60_000}))
        .await
        .unwrap_err();
    assert_timed_out(&err, "nap", after);
    dropped_on(&dropped);
    assert!(!witness.woke.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_timeout_around_a_pool_aborts_the_pool_job() {
    let after = Duration::from_millis(200);
    for manifest in [false, true] {
        let pool = Pool::new(2).unwrap();
        let (toolset, witness, dropped) = if manifest {
            let (toolset, witness, dropped, bound) = from_manifest(
                &pool,
                json!([["pool", {"name": "timeout", "config": {"ms": 200}}]]),
            );
            bound.unwrap();
            (toolset, witness, dropped)
        } else {
            let (tool, witness, dropped) = nap();
            let toolset = Toolset::new();
            toolset
                .bind((tool.combo().with(pool.clone()).with(Timeout::new(after)),))
                .unwrap();
            (toolset, witness, dropped)
        };
        assert_eq!(toolset.names(), ["nap", "nap_pool", "nap_pool_timeout"]);
        let err = toolset
            .call("nap_pool_timeout", json!({"ms": 600_000}))
            .await
            .unwrap_err();
        // The layer that ran out of time is the pool's branch.
        assert_timed_out(&err, "nap_pool", after);
        // The job started on the pool, and was dropped there (aborted), unfinished.
        assert_eq!(pool.jobs_started(), 1);
        let thread = dropped_on(&dropped);
        println!(
            "[pool, timeout] manifest={manifest}: {err}; jobs started: {}; body dropped unfinished on `{thread}`; woke: {}",
            pool.jobs_started(),
            witness.woke.load(Ordering::SeqCst)
        );
        assert_eq!(thread, "toolgraft-pool");
        assert!(
            !witness.woke.load(Ordering::SeqCst),
            "the body's side effect never happened"
        );
    }
}

#[tokio::test]
async fn a_timeout_inside_a_pool_runs_on_the_pool_threads() {
    let after = Duration::from_millis(200);
    for manifest in [false, true] {
        let pool = Pool::new(1).unwrap();
        let (toolset, witness, dropped) = if manifest {
            let (toolset, witness, dropped, bound) = from_manifest(
                &pool,
                json!([[{"name": "timeout", "config": {"ms": 200}}, "pool"]]),
            );
            bound.unwrap();
            (toolset, witness, dropped)
        } else {
            let (tool, witness, dropped) = nap();
            let toolset = Toolset::new();
            toolset
                .bind((tool.combo().with(Timeout::new(after)).with(pool.clone()),))
                .unwrap();
            (toolset, witness, dropped)
        };
        assert_eq!(
            toolset
                .call("nap_timeout_pool", json!({"ms": 1}))
                .await
                .unwrap(),
            json!("awake")
        );
        witness.woke.store(false, Ordering::SeqCst);
        let err = toolset
            .call("nap_timeout_pool", json!({"ms": 600_000}))
            .await
            .unwrap_err();
        assert_timed_out(&err, "nap", after);
        // The deadline fired beside the body, on the pool's thread.
        assert_eq!(dropped_on(&dropped), "toolgraft-pool");
        assert!(!witness.woke.load(Ordering::SeqCst));
        assert_eq!(pool.jobs_started(), 2);
    }
}

#[test]
fn the_limit_is_checked_when_binding_on_both_paths() {
    let (tool, _, _) = nap();
    for limit in [Duration::ZERO, Timeout::MAX + Duration::from_millis(1)] {
        let err = Toolset::new()
            .bind((tool.combo().with(Timeout::new(limit)),))
            .unwrap_err();
        assert!(
            matches!(err, BindError::InvalidConfig { ref field, ref extension, .. } if field == "ms" && extension == "timeout"),
            "{err:?}"
        );
        assert_eq!(err.rule(), Some(toolgraft::rulebook::Rule::Config));
    }
    let pool = Pool::new(1).unwrap();
    for config in [
        json!({"ms": 0}),
        json!({"ms": -5}),
        json!({"ms": 86_400_001}),
        json!({"ms": "soon"}),
        json!({"mss": 100}),
    ] {
        let (toolset, _, _, bound) =
            from_manifest(&pool, json!([[{"name": "timeout", "config": config}]]));
        let err = bound.unwrap_err();
        assert!(
            matches!(err, BindError::InvalidConfig { ref field, .. } if field == "ms" || field == "mss"),
            "{config}: {err:?}"
        );
        assert!(toolset.names().is_empty(), "a refused tool binds nothing");
    }
    // Without config, the registered default (30 s) applies.
    let (toolset, _, _, bound) = from_manifest(&pool, json!(["timeout"]));
    bound.unwrap();
    assert_eq!(toolset.names(), ["nap", "nap_timeout"]);
}
