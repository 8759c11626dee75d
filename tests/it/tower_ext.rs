//! `tower` (feature): tower's own layers as wrappers, typed and bound from a
//! manifest (ConcurrencyLimit, RateLimit, LoadShed, Timeout), their errors as
//! typed `ToolError`s, bad configs refused at bind, cancelled waits that do not
//! wedge a limit, and a branch as a `tower::Service`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::time::Instant;
use toolgraft::ext::tower::{
    ConcurrencyLimitConfig, LayerError, RateLimitConfig, ToolService, Tower, shed,
};
use toolgraft::prelude::*;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;
use toolgraft::{BindError, Registry, ToolError};
use tower::limit::ConcurrencyLimitLayer;
use tower::timeout::TimeoutLayer;
use tower::{ServiceBuilder, ServiceExt};

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Nap {
    pub ms: u64,
}

/// How many calls of a body run at once, and the most that ever did.
#[derive(Clone, Default)]
struct Overlap {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

impl Overlap {
    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// One call of a body running: counted down when its future ends.
struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `name {ms}`: sleeps, counting how many of its calls overlap.
fn nap(name: &str, overlap: &Overlap) -> impl BaseTool<Input = Nap, Output = String> {
    let overlap = overlap.clone();
    Tool::builder()
        .name(name)
        .description("Sleep, then answer.")
        .body(move |input: Nap| {
            let overlap = overlap.clone();
            async move {
                let now = overlap.now.fetch_add(1, Ordering::SeqCst) + 1;
                overlap.most.fetch_max(now, Ordering::SeqCst);
                overlap.calls.fetch_add(1, Ordering::SeqCst);
                // Ended when the body's future is, finished or cancelled.
                let _running = Running(overlap.now.clone());
                tokio::time::sleep(Duration::from_millis(input.ms)).await;
                Ok("awake".to_owned())
            }
        })
        .build()
        .unwrap()
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(toolgraft::ext::tower::concurrency_limit())
        .unwrap()
        .register(toolgraft::ext::tower::rate_limit())
        .unwrap()
        .register(toolgraft::ext::tower::timeout())
        .unwrap();
    registry
}

/// Binds `base` with the combos `combos` from a manifest.
fn from_manifest(
    (name, base): (&str, &impl BaseTool),
    combos: Value,
) -> (Toolset, Result<(), BindError>) {
    let toolset = Toolset::new();
    let manifest = Manifest::from_value(&json!({"tools": {name: combos}})).unwrap();
    let mut outcome = toolset.bind_manifest(&registry(), &BaseTools::new().with(base), &manifest);
    (toolset, outcome.remove(0).1)
}

/// `n` concurrent calls of `name`, each answer with when it came (since `start`).
async fn concurrently(
    toolset: &Toolset,
    name: &str,
    n: usize,
    ms: u64,
    start: Instant,
) -> Vec<(Result<Value, ToolError>, Duration)> {
    join_all((0..n).map(|_| async move {
        let answer = toolset.call(name, json!({ "ms": ms })).await;
        (answer, start.elapsed())
    }))
    .await
}

#[tokio::test(start_paused = true)]
async fn a_typed_concurrency_limit_of_one_serializes_the_calls() {
    let overlap = Overlap::default();
    let toolset = Toolset::new();
    toolset
        .bind((nap("nap", &overlap)
            .combo()
            .with(Tower::new("one_at_a_time", ConcurrencyLimitLayer::new(1))),))
        .unwrap();
    let start = Instant::now();
    let answers = concurrently(&toolset, "nap_one_at_a_time", 4, 50, start).await;
    assert!(answers.iter().all(|(answer, _)| answer.is_ok()));
    assert_eq!((overlap.calls(), overlap.most()), (4, 1));
    // The paused clock only moves when every task waits: 4 naps one after the other.
    assert_eq!(start.elapsed(), Duration::from_millis(200));
}

#[tokio::test(start_paused = true)]
async fn each_branch_has_its_own_service() {
    // The same wrapper on two tools: one limit each, not one for both.
    let overlap = Overlap::default();
    let one = Tower::new("one_at_a_time", ConcurrencyLimitLayer::new(1));
    let toolset = Toolset::new();
    toolset
        .bind((
            nap("left", &overlap).combo().with(one.clone()),
            nap("right", &overlap).combo().with(one),
        ))
        .unwrap();
    let start = Instant::now();
    let (left, right) = tokio::join!(
        toolset.call("left_one_at_a_time", json!({"ms": 50})),
        toolset.call("right_one_at_a_time", json!({"ms": 50})),
    );
    assert!(left.is_ok() && right.is_ok());
    assert_eq!(overlap.most(), 2);
    assert_eq!(start.elapsed(), Duration::from_millis(50));
}

/// The must-show: tower's ConcurrencyLimit and RateLimit bound from a manifest,
/// on the wall clock, with the timings printed (`--nocapture`). Only lower
/// bounds are asserted (a limit never admits a call early), and overlap counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_a_manifest_concurrency_limit_and_rate_limit_hold_on_the_wall_clock() {
    let overlap = Overlap::default();
    let (toolset, bound) = from_manifest(
        ("nap", &nap("nap", &overlap)),
        json!([[{"name": "tower_concurrency_limit", "config": {"max": 1}}]]),
    );
    bound.unwrap();
    let start = Instant::now();
    let answers = concurrently(&toolset, "nap_tower_concurrency_limit", 4, 50, start).await;
    let total = start.elapsed();
    eprintln!("tower_concurrency_limit {{max: 1}}: 4 concurrent calls of a 50 ms body");
    for (i, (answer, at)) in answers.iter().enumerate() {
        eprintln!("  call {i}: {answer:?} at {at:?}");
    }
    eprintln!(
        "  total {total:?} (>= 200 ms), most at once: {}",
        overlap.most()
    );
    assert!(answers.iter().all(|(answer, _)| answer.is_ok()));
    assert_eq!((overlap.calls(), overlap.most()), (4, 1));
    assert!(total >= Duration::from_millis(200));

    let overlap = Overlap::default();
    let (toolset, bound) = from_manifest(
        ("tick", &nap("tick", &overlap)),
        json!([[{"name": "tower_rate_limit", "config": {"num": 2, "per_ms": 300}}]]),
    );
    bound.unwrap();
    let start = Instant::now();
    let mut answers = concurrently(&toolset, "tick_tower_rate_limit", 3, 0, start).await;
    eprintln!("tower_rate_limit {{num: 2, per_ms: 300}}: 3 concurrent calls of a 0 ms body");
    for (i, (answer, at)) in answers.iter().enumerate() {
        eprintln!("  call {i}: {answer:?} at {at:?}");
    }
    assert!(answers.iter().all(|(answer, _)| answer.is_ok()));
    answers.sort_by_key(|(_, at)| *at);
    // The third call waited for the next window; the first two did not wait for it.
    assert!(answers[2].1 >= Duration::from_millis(300));
    assert!(answers[1].1 < answers[2].1);
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_holds_the_call_over_it_until_the_next_window() {
    let overlap = Overlap::default();
    let config = RateLimitConfig {
        num: 2,
        per_ms: 1000,
        load_shed: false,
    };
    let toolset = Toolset::new();
    toolset
        .bind((nap("tick", &overlap)
            .combo()
            .with(Tower::new("two_a_second", config.layer().unwrap())),))
        .unwrap();
    let start = Instant::now();
    let mut at: Vec<Duration> = concurrently(&toolset, "tick_two_a_second", 3, 0, start)
        .await
        .into_iter()
        .map(|(answer, at)| {
            answer.unwrap();
            at
        })
        .collect();
    at.sort();
    assert_eq!(at, [Duration::ZERO, Duration::ZERO, Duration::from_secs(1)]);

    // Shed: the call over the rate is refused at once, naming the limit.
    let toolset = Toolset::new();
    let shedding = RateLimitConfig {
        load_shed: true,
        ..config
    };
    toolset
        .bind((nap("tick", &overlap)
            .combo()
            .with(Tower::new("two_a_second", shedding.layer().unwrap())),))
        .unwrap();
    let answers = concurrently(&toolset, "tick_two_a_second", 3, 0, Instant::now()).await;
    let refused: Vec<_> = answers
        .iter()
        .filter(|(answer, _)| answer.is_err())
        .collect();
    assert_eq!(refused.len(), 1);
    assert!(matches!(
        &refused[0].0,
        Err(ToolError::Overloaded { tool, extension, retry_after: None, .. })
            if tool == "tick_two_a_second" && extension == "two_a_second"
    ));
}

#[tokio::test(start_paused = true)]
async fn load_shed_over_a_concurrency_limit_answers_overloaded() {
    let overlap = Overlap::default();
    let toolset = Toolset::new();
    let layer = ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(1)
        .into_inner();
    toolset
        .bind((nap("nap", &overlap)
            .combo()
            .with(Tower::new("one_or_refuse", layer)),))
        .unwrap();
    let (first, second) = tokio::join!(
        toolset.call("nap_one_or_refuse", json!({"ms": 50})),
        toolset.call("nap_one_or_refuse", json!({"ms": 50})),
    );
    assert_eq!(first.unwrap(), json!("awake"));
    let err = second.unwrap_err();
    assert!(err.is_transient());
    assert_eq!(
        err.to_string(),
        "`one_or_refuse` refused the call to `nap_one_or_refuse`: its limit is full, and it sheds the calls over it"
    );
    assert_eq!(overlap.calls(), 1);
    // Once the first call is done, the limit admits again.
    assert!(
        toolset
            .call("nap_one_or_refuse", json!({"ms": 1}))
            .await
            .is_ok()
    );

    // The same from a manifest: `load_shed: true`.
    let (toolset, bound) = from_manifest(
        ("nap", &nap("nap", &overlap)),
        json!([[{"name": "tower_concurrency_limit", "config": {"max": 1, "load_shed": true}}]]),
    );
    bound.unwrap();
    let answers = concurrently(
        &toolset,
        "nap_tower_concurrency_limit",
        3,
        50,
        Instant::now(),
    )
    .await;
    let overloaded = answers
        .iter()
        .filter(|(answer, _)| matches!(answer, Err(ToolError::Overloaded { .. })))
        .count();
    assert_eq!(overloaded, 2);
}

#[tokio::test(start_paused = true)]
async fn a_tower_timeout_answers_timed_out_typed_and_from_a_manifest() {
    let overlap = Overlap::default();
    let toolset = Toolset::new();
    toolset
        .bind((nap("nap", &overlap).combo().with(Tower::new(
            "deadline",
            TimeoutLayer::new(Duration::from_millis(100)),
        )),))
        .unwrap();
    assert!(
        toolset
            .call("nap_deadline", json!({"ms": 10}))
            .await
            .is_ok()
    );
    let err = toolset
        .call("nap_deadline", json!({"ms": 5_000}))
        .await
        .unwrap_err();
    assert!(matches!(
        &err,
        ToolError::TimedOut { tool, extension, job: None, after }
            if tool == "nap" && extension == "deadline" && *after == Duration::from_millis(100)
    ));
    assert_eq!(
        err.to_string(),
        "`nap` did not finish within 100ms; `deadline` cancelled it"
    );

    let (toolset, bound) = from_manifest(
        ("nap", &nap("nap", &overlap)),
        json!([[{"name": "tower_timeout", "config": {"ms": 250}}]]),
    );
    bound.unwrap();
    let err = toolset
        .call("nap_tower_timeout", json!({"ms": 5_000}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::TimedOut { after, .. } if after == Duration::from_millis(250))
    );
}

#[tokio::test]
async fn the_layer_below_s_errors_pass_through_unchanged() {
    #[derive(Debug, thiserror::Error)]
    #[error("the disk is full")]
    struct DiskFull;
    let failing = Tool::builder()
        .name("write")
        .description("Fail.")
        .body(|_: Nap| async { Err::<String, _>(DiskFull.into()) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((failing
            .combo()
            .with(Tower::new("one_at_a_time", ConcurrencyLimitLayer::new(1))),))
        .unwrap();
    let err = toolset
        .call("write_one_at_a_time", json!({"ms": 0}))
        .await
        .unwrap_err();
    assert!(matches!(&err, ToolError::Body { tool, .. } if tool == "write"));
    assert!(err.downcast_ref::<DiskFull>().is_some());
    assert!(err.downcast_ref::<LayerError>().is_none());
}

#[test]
fn bad_configs_are_refused_at_bind_naming_the_field() {
    let overlap = Overlap::default();
    let cases = [
        ("tower_concurrency_limit", json!({"max": 0}), "max"),
        (
            "tower_concurrency_limit",
            json!({"max": 1_000_000_000}),
            "max",
        ),
        ("tower_concurrency_limit", json!({}), "max"),
        (
            "tower_concurrency_limit",
            json!({"max": 1, "shed": true}),
            "shed",
        ),
        ("tower_concurrency_limit", json!({"max": -1}), "max"),
        ("tower_rate_limit", json!({"num": 0, "per_ms": 1000}), "num"),
        ("tower_rate_limit", json!({"num": 5, "per_ms": 0}), "per_ms"),
        (
            "tower_rate_limit",
            json!({"num": 5, "per_ms": 86_400_001}),
            "per_ms",
        ),
        ("tower_rate_limit", json!({"num": 5}), "per_ms"),
        ("tower_timeout", json!({"ms": 0}), "ms"),
        ("tower_timeout", json!({"ms": u64::MAX}), "ms"),
    ];
    for (name, config, expected) in cases {
        let (toolset, bound) = from_manifest(
            ("nap", &nap("nap", &overlap)),
            json!([[{"name": name, "config": config}]]),
        );
        match bound {
            Err(BindError::InvalidConfig {
                extension, field, ..
            }) => {
                assert_eq!(extension.as_str(), name);
                assert_eq!(field, expected, "{name} {config}");
            }
            other => panic!("{name} {config}: expected InvalidConfig, got {other:?}"),
        }
        assert!(
            toolset.names().len() <= 1,
            "{name} {config}: {:?}",
            toolset.names()
        );
    }
    // Two configs are two stacks: both bind, each with its own limit.
    let (toolset, bound) = from_manifest(
        ("nap", &nap("nap", &overlap)),
        json!([[{"name": "tower_timeout", "config": {"ms": 100}}]]),
    );
    bound.unwrap();
    assert_eq!(toolset.names(), ["nap", "nap_tower_timeout"]);
}

#[tokio::test(start_paused = true)]
async fn a_call_cancelled_while_it_waits_does_not_wedge_the_limit() {
    let overlap = Overlap::default();
    let toolset = Toolset::new();
    toolset
        .bind((nap("nap", &overlap)
            .combo()
            .with(Tower::new("one_at_a_time", ConcurrencyLimitLayer::new(1))),))
        .unwrap();
    let name = "nap_one_at_a_time";
    let running = tokio::spawn({
        let toolset = toolset.clone();
        async move { toolset.call(name, json!({"ms": 100})).await }
    });
    tokio::task::yield_now().await;
    // One call waits for the permit (holding the service), another for the
    // service: both are dropped before the first call ends.
    let waits = tokio::join!(
        tokio::time::timeout(
            Duration::from_millis(10),
            toolset.call(name, json!({"ms": 1}))
        ),
        tokio::time::timeout(
            Duration::from_millis(20),
            toolset.call(name, json!({"ms": 1}))
        ),
    );
    assert!(waits.0.is_err() && waits.1.is_err());
    assert_eq!(running.await.unwrap().unwrap(), json!("awake"));
    // The limit admits again, still one at a time.
    let answers = concurrently(&toolset, name, 3, 10, Instant::now()).await;
    assert!(answers.iter().all(|(answer, _)| answer.is_ok()));
    assert_eq!((overlap.calls(), overlap.most()), (4, 1));
}

#[tokio::test(start_paused = true)]
async fn a_branch_is_a_tower_service_under_a_service_builder() {
    let overlap = Overlap::default();
    let (branch,) = Toolset::new()
        .bind((nap("nap", &overlap).combo(),))
        .unwrap();
    let service = ServiceBuilder::new()
        .timeout(Duration::from_millis(100))
        .concurrency_limit(1)
        .service(branch);
    assert_eq!(
        service.clone().oneshot(Nap { ms: 10 }).await.unwrap(),
        "awake"
    );
    // tower's own timeout, outside: its error is tower's.
    let err = service.clone().oneshot(Nap { ms: 500 }).await.unwrap_err();
    assert!(err.is::<tower::timeout::error::Elapsed>());

    // Served concurrently, one at a time by the builder's limit.
    let start = Instant::now();
    let answers = join_all((0..3).map(|_| service.clone().oneshot(Nap { ms: 20 }))).await;
    assert!(answers.iter().all(Result::is_ok));
    assert_eq!(start.elapsed(), Duration::from_millis(60));
    assert_eq!(overlap.most(), 1);

    // A name from a manifest, as a service of JSON arguments; a toolgraft error
    // comes out as itself.
    let (toolset, bound) = from_manifest(
        ("nap", &nap("nap", &overlap)),
        json!([[{"name": "tower_timeout", "config": {"ms": 50}}]]),
    );
    bound.unwrap();
    let named = ServiceBuilder::new()
        .concurrency_limit(4)
        .service(ToolService::new(&toolset, "nap_tower_timeout"));
    assert_eq!(
        named.clone().oneshot(json!({"ms": 1})).await.unwrap(),
        json!("awake")
    );
    let err = named.oneshot(json!({"ms": 500})).await.unwrap_err();
    assert!(matches!(err, ToolError::TimedOut { .. }));
}

#[test]
fn concurrency_configs_are_checked_typed_too() {
    assert_eq!(
        ConcurrencyLimitConfig {
            max: 0,
            load_shed: false
        }
        .layer()
        .unwrap_err()
        .field,
        "max"
    );
    let _shed = Tower::new("shed", shed(ConcurrencyLimitLayer::new(2), true));
}

#[test]
fn a_rate_limit_binds_outside_a_runtime_and_runs_in_one() {
    // tower's `RateLimit` starts a timer when it is made: the branch's service is
    // made at its first call, in the runtime that serves it, not at bind.
    let overlap = Overlap::default();
    let (toolset, bound) = from_manifest(
        ("tick", &nap("tick", &overlap)),
        json!([[{"name": "tower_rate_limit", "config": {"num": 1, "per_ms": 10}}]]),
    );
    bound.unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let answer = runtime.block_on(toolset.call("tick_tower_rate_limit", json!({"ms": 0})));
    assert_eq!(answer.unwrap(), json!("awake"));
}
