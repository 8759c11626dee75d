//! `rate_limit` and `concurrency` in process: the refusal is `Overloaded` with
//! the time to retry, principals are limited apart, configs are checked when
//! bound, a hostile caller cannot grow the store, load is shed beyond the queue
//! and a cancelled waiter or call gives its place back. The clock is tokio's,
//! paused: counts, never timings.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgraft::context::{self, Principal};
use toolgraft::ext::limit::{Admission, Lease, LimitKey, LimitStore, MemoryLimits, Rate};
use toolgraft::ext::{Concurrency, RateLimit};
use toolgraft::prelude::*;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::runtime::{Configured, Refined};
use toolgraft::store::{StoreError, StoreFuture};
use toolgraft::toolset::BaseTools;
use toolgraft::{BindError, Registry, ToolError};

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Nap {
    pub ms: u64,
}

/// `nap`: sleeps `ms`, counting the calls that started.
fn nap(started: &Arc<AtomicUsize>) -> impl BaseTool<Input = Nap, Output = String> + Clone {
    let started = started.clone();
    Tool::builder()
        .name("nap")
        .description("Sleep, then answer.")
        .body(move |input: Nap| {
            started.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_millis(input.ms)).await;
                Ok("awake".to_owned())
            }
        })
        .build()
        .unwrap()
}

fn toolset_with(combo: impl FnOnce(&Arc<AtomicUsize>) -> Toolset) -> (Toolset, Arc<AtomicUsize>) {
    let started = Arc::new(AtomicUsize::new(0));
    (combo(&started), started)
}

async fn call_as(toolset: &Toolset, who: Option<&str>, name: &str) -> Result<Value, ToolError> {
    let call = toolset.call(name, json!({"ms": 0}));
    match who {
        Some(who) => context::with(Principal::new(who), call).await,
        None => call.await,
    }
}

fn retry_after(result: Result<Value, ToolError>) -> Duration {
    match result {
        Err(ToolError::Overloaded {
            tool,
            extension,
            retry_after: Some(after),
            ..
        }) => {
            assert_eq!(extension.as_str(), "rate_limit");
            assert!(tool.as_str().ends_with("_rate_limit"), "{tool}");
            after
        }
        other => panic!("expected a refusal with retry_after, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn over_the_rate_the_refusal_says_when_to_retry_and_refusals_are_not_counted() {
    let (toolset, started) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started)
                .combo()
                .with(RateLimit::per_second(4).with_burst(2)),))
            .unwrap();
        toolset
    });
    for _ in 0..2 {
        call_as(&toolset, None, "nap_rate_limit").await.unwrap();
    }
    // The burst is spent: the next call is 250 ms away (one every 1/4 s).
    let err = call_as(&toolset, None, "nap_rate_limit").await;
    assert_eq!(retry_after(err), Duration::from_millis(250));
    for _ in 0..5 {
        assert!(call_as(&toolset, None, "nap_rate_limit").await.is_err());
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    call_as(&toolset, None, "nap_rate_limit").await.unwrap();
    assert_eq!(started.load(Ordering::SeqCst), 3, "refused calls never ran");
    let err = call_as(&toolset, None, "nap_rate_limit").await.unwrap_err();
    assert!(err.is_transient());
    assert_eq!(
        err.to_string(),
        "`rate_limit` refused the call to `nap_rate_limit`: over 4 calls per 1s (bursts of up to 2, then one every 250ms); retry after 250 ms"
    );
}

#[tokio::test(start_paused = true)]
async fn in_a_second_of_hammering_the_rate_admits_its_calls_and_the_burst_at_most() {
    let (toolset, started) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started)
                .combo()
                .with(RateLimit::per_second(10).with_burst(3)),))
            .unwrap();
        toolset
    });
    let mut admitted = 0;
    for _ in 0..1000 {
        if call_as(&toolset, None, "nap_rate_limit").await.is_ok() {
            admitted += 1;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // 1000 calls over 1 s: 10 a second, plus the burst less one.
    assert_eq!(admitted, 10 + 3 - 1);
    assert_eq!(started.load(Ordering::SeqCst), admitted);
}

#[tokio::test(start_paused = true)]
async fn principals_are_limited_apart_and_anonymous_calls_share_one_limit() {
    let (toolset, _) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started)
                .combo()
                .with(RateLimit::per_minute(1).with_per_principal()),))
            .unwrap();
        toolset
    });
    let name = "nap_rate_limit";
    call_as(&toolset, Some("alice"), name).await.unwrap();
    call_as(&toolset, Some("bob"), name).await.unwrap();
    assert!(call_as(&toolset, Some("alice"), name).await.is_err());
    assert_eq!(
        retry_after(call_as(&toolset, Some("bob"), name).await),
        Duration::from_secs(60)
    );
    call_as(&toolset, None, name).await.unwrap();
    let err = call_as(&toolset, None, name).await.unwrap_err();
    assert!(err.to_string().contains("for this caller"), "{err}");

    // Without `per_principal`, one limit for all.
    let (shared, _) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started).combo().with(RateLimit::per_minute(1)),))
            .unwrap();
        toolset
    });
    call_as(&shared, Some("alice"), name).await.unwrap();
    assert!(call_as(&shared, Some("bob"), name).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn a_wait_up_to_the_next_turn_is_admitted_and_a_longer_one_refused() {
    let (toolset, started) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started).combo().with(
                RateLimit::per_second(2)
                    .with_burst(1)
                    .with_wait_up_to(Duration::from_millis(600)),
            ),))
            .unwrap();
        toolset
    });
    let name = "nap_rate_limit";
    // Three at once: one is admitted, two wait their 500 ms (refusals are not
    // counted), one of them is admitted then; the last would wait until 1 s,
    // past its 600 ms.
    let (one, two, three) = tokio::join!(
        call_as(&toolset, None, name),
        call_as(&toolset, None, name),
        call_as(&toolset, None, name),
    );
    let outcomes = [one, two, three];
    assert_eq!(outcomes.iter().filter(|outcome| outcome.is_ok()).count(), 2);
    let refused = outcomes.into_iter().find(Result::is_err).unwrap();
    assert_eq!(retry_after(refused), Duration::from_millis(500));
    assert_eq!(started.load(Ordering::SeqCst), 2);
}

#[test]
fn configs_out_of_range_are_refused_when_bound_naming_the_field() {
    let started = Arc::new(AtomicUsize::new(0));
    let typed = [
        (RateLimit::per_second(0), "calls"),
        (RateLimit::per_second(2_000_000), "calls"),
        (RateLimit::new(1, Duration::ZERO), "period_ms"),
        (RateLimit::new(1, Duration::from_secs(100_000)), "period_ms"),
        (RateLimit::new(10_000, Duration::from_millis(1)), "calls"),
        (RateLimit::per_second(5).with_burst(0), "burst"),
        (
            RateLimit::per_second(5).with_wait_up_to(Duration::from_secs(3600)),
            "max_wait_ms",
        ),
        (RateLimit::per_second(5).with_max_keys(0), "max_keys"),
    ];
    for (limit, field) in typed {
        let err = Toolset::new()
            .bind((nap(&started).combo().with(limit),))
            .unwrap_err();
        assert!(
            matches!(&err, BindError::InvalidConfig { field: f, extension, .. } if f == field && extension == "rate_limit"),
            "{field}: {err:?}"
        );
    }
    let typed = [
        (Concurrency::at_most(0), "max"),
        (Concurrency::at_most(1).with_queue(2_000_000), "queue"),
        (
            Concurrency::at_most(1).with_wait_up_to(Duration::ZERO),
            "max_wait_ms",
        ),
        (
            Concurrency::at_most(1).with_lease(Duration::from_millis(10)),
            "lease_ms",
        ),
    ];
    for (limit, field) in typed {
        let err = Toolset::new()
            .bind((nap(&started).combo().with(limit),))
            .unwrap_err();
        assert!(
            matches!(&err, BindError::InvalidConfig { field: f, extension, .. } if f == field && extension == "concurrency"),
            "{field}: {err:?}"
        );
    }

    let mut registry = Registry::new();
    registry
        .register(Configured::<RateLimit>::named("rate_limit"))
        .unwrap()
        .register(Configured::<Concurrency>::named("concurrency"))
        .unwrap();
    for (element, field) in [
        (
            json!({"name": "rate_limit", "config": {"calls": 0}}),
            "calls",
        ),
        (
            json!({"name": "rate_limit", "config": {"calls": 5, "period_ms": 0}}),
            "period_ms",
        ),
        (
            json!({"name": "rate_limit", "config": {"calls": 5, "burst": 0}}),
            "burst",
        ),
        (
            json!({"name": "rate_limit", "config": {"calls": 5, "per": 1}}),
            "per",
        ),
        (json!({"name": "rate_limit", "config": {}}), "calls"),
        (json!({"name": "concurrency", "config": {"max": 0}}), "max"),
        (
            json!({"name": "concurrency", "config": {"max": 2, "lease_ms": 0}}),
            "lease_ms",
        ),
        (
            json!({"name": "concurrency", "config": {"max": 2, "max_wait_ms": 0}}),
            "max_wait_ms",
        ),
    ] {
        let toolset = Toolset::new();
        let manifest =
            Manifest::from_value(&json!({"tools": {"nap": [[element.clone()]]}})).unwrap();
        let tool = nap(&started);
        let mut outcome =
            toolset.bind_manifest(&registry, &BaseTools::new().with(&tool), &manifest);
        let err = outcome.remove(0).1.unwrap_err();
        assert!(
            matches!(&err, BindError::InvalidConfig { field: f, .. } if f.contains(field)),
            "{element}: {err:?}"
        );
        assert!(toolset.names().is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn a_manifest_binds_both_and_a_refined_registration_keeps_the_shared_store() {
    let started = Arc::new(AtomicUsize::new(0));
    let shared = MemoryLimits::new();
    let mut registry = Registry::new();
    registry
        .register(Refined::new(
            RateLimit::per_second(1).with_store(shared.clone()),
            RateLimit::configured,
        ))
        .unwrap()
        .register(Configured::<Concurrency>::named("concurrency"))
        .unwrap();
    let tool = nap(&started);
    let manifest = Manifest::from_value(&json!({"tools": {"nap": [[
        {"name": "rate_limit", "config": {"calls": 1, "period_ms": 60000}},
        {"name": "concurrency", "config": {"max": 1}}
    ]]}}))
    .unwrap();
    // Two toolsets (two replicas in one process) sharing the registry's store.
    let (one, two) = (Toolset::new(), Toolset::new());
    for toolset in [&one, &two] {
        for (_, bound) in toolset.bind_manifest(&registry, &BaseTools::new().with(&tool), &manifest)
        {
            bound.unwrap();
        }
    }
    let name = "nap_rate_limit_concurrency";
    call_as(&one, None, name).await.unwrap();
    let err = call_as(&two, None, name).await.unwrap_err();
    assert!(matches!(err, ToolError::Overloaded { .. }), "{err:?}");
    assert_eq!(shared.tracked(), 1);
}

#[tokio::test(start_paused = true)]
async fn made_up_principals_cannot_grow_the_store_past_its_keys() {
    let (toolset, _) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started).combo().with(
                RateLimit::per_second(1)
                    .with_per_principal()
                    .with_max_keys(100),
            ),))
            .unwrap();
        toolset
    });
    let store = MemoryLimits::new().with_max_keys(100);
    let rate = Rate::new(1, Duration::from_secs(1)).unwrap();
    let branch = toolgraft::Name::new("nap_rate_limit").unwrap();
    let mut refused = 0;
    for n in 0..1000 {
        let who = format!("mallory-{n}-{}", "x".repeat(1000));
        let key = LimitKey::new(branch.clone(), Some(Principal::new(who.as_str())));
        if store.admit(&key, rate).await.is_err() {
            refused += 1;
        }
        assert!(store.tracked() <= 100);
        if call_as(&toolset, Some(&who), "nap_rate_limit")
            .await
            .is_err()
        {
            refused += 1;
        }
    }
    assert_eq!(
        refused,
        2 * 900,
        "each new caller past 100 live ones is refused"
    );
    // Once their state is forgotten (no call within a burst's time), there is room.
    tokio::time::sleep(Duration::from_secs(1)).await;
    call_as(&toolset, Some("alice"), "nap_rate_limit")
        .await
        .unwrap();
    let key = LimitKey::new(branch, Some(Principal::new("alice")));
    assert!(store.admit(&key, rate).await.unwrap().is_admitted());
    assert!(store.tracked() <= 100);
}

#[tokio::test(start_paused = true)]
async fn beyond_the_queue_calls_are_shed_at_once_and_the_queue_runs_in_turn() {
    let (toolset, started) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started)
                .combo()
                .with(Concurrency::at_most(2).with_queue(3)),))
            .unwrap();
        toolset
    });
    let calls = (0..8).map(|_| toolset.call("nap_concurrency", json!({"ms": 1000})));
    let outcomes = futures_util::future::join_all(calls).await;
    let shed: Vec<_> = outcomes
        .iter()
        .filter_map(|outcome| outcome.as_ref().err())
        .collect();
    assert_eq!(shed.len(), 3, "2 run, 3 wait, 3 are shed");
    for err in shed {
        assert!(
            matches!(err, ToolError::Overloaded { retry_after: None, extension, .. } if extension.as_str() == "concurrency"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("all 2 permits are taken and the queue of 3 is full"),
            "{err}"
        );
    }
    assert_eq!(started.load(Ordering::SeqCst), 5);
}

#[tokio::test(start_paused = true)]
async fn a_queued_call_waits_at_most_its_max_wait() {
    let (toolset, started) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started).combo().with(
                Concurrency::at_most(1)
                    .with_queue(5)
                    .with_wait_up_to(Duration::from_millis(300)),
            ),))
            .unwrap();
        toolset
    });
    let (running, waiting) = tokio::join!(
        toolset.call("nap_concurrency", json!({"ms": 1000})),
        async {
            tokio::task::yield_now().await;
            toolset.call("nap_concurrency", json!({"ms": 0})).await
        }
    );
    running.unwrap();
    let err = waiting.unwrap_err();
    assert!(
        err.to_string()
            .contains("waited 300 ms for one of 1 permits"),
        "{err}"
    );
    assert_eq!(started.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_waiter_and_a_cancelled_call_leak_nothing() {
    let store = MemoryLimits::new();
    let (toolset, started) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started).combo().with(
                Concurrency::at_most(1)
                    .with_queue(1)
                    .with_store(store.clone()),
            ),))
            .unwrap();
        toolset
    });
    let key = LimitKey::new(toolgraft::Name::new("nap_concurrency").unwrap(), None);
    for _ in 0..3 {
        // One runs, one waits: both are dropped at a timeout outside.
        let running = toolset.call("nap_concurrency", json!({"ms": 60_000}));
        let waiting = toolset.call("nap_concurrency", json!({"ms": 60_000}));
        let both = futures_util::future::join(running, waiting);
        assert!(
            tokio::time::timeout(Duration::from_secs(1), both)
                .await
                .is_err()
        );
        assert_eq!(store.taken(&key), 0, "the running call's permit came back");
    }
    // The queue's place came back too: one runs and one waits again, not shed.
    let (first, second) = tokio::join!(
        toolset.call("nap_concurrency", json!({"ms": 10})),
        toolset.call("nap_concurrency", json!({"ms": 10})),
    );
    first.unwrap();
    second.unwrap();
    assert_eq!(started.load(Ordering::SeqCst), 3 + 2);
}

#[tokio::test(start_paused = true)]
async fn concurrency_per_principal_counts_each_caller_apart() {
    let (toolset, started) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started)
                .combo()
                .with(Concurrency::at_most(1).with_per_principal()),))
            .unwrap();
        toolset
    });
    let slow = |who: &'static str| {
        context::with(
            Principal::new(who),
            toolset.call("nap_concurrency", json!({"ms": 100})),
        )
    };
    let (alice, bob, alice_again) = tokio::join!(slow("alice"), slow("bob"), slow("alice"));
    assert!(alice.is_ok() && bob.is_ok());
    let err = alice_again.unwrap_err();
    assert!(err.to_string().contains("for this caller"), "{err}");
    assert_eq!(started.load(Ordering::SeqCst), 2);
}

/// A store that cannot answer: every call is refused, never run unlimited.
#[derive(Debug)]
struct Down;

impl LimitStore for Down {
    fn admit<'a>(&'a self, _: &'a LimitKey, _: Rate) -> StoreFuture<'a, Admission> {
        Box::pin(async { Err(StoreError::new("connection refused")) })
    }
    fn acquire<'a>(
        &'a self,
        _: &'a LimitKey,
        _: u32,
        _: Duration,
    ) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async { Err(StoreError::new("connection refused")) })
    }
    fn renew<'a>(&'a self, _: &'a Lease, _: Duration) -> StoreFuture<'a, bool> {
        Box::pin(async { Err(StoreError::new("connection refused")) })
    }
    fn release(&self, _: Lease) -> StoreFuture<'static, ()> {
        Box::pin(async { Err(StoreError::new("connection refused")) })
    }
}

#[tokio::test]
async fn a_store_that_cannot_answer_refuses_the_call_transiently() {
    let started = Arc::new(AtomicUsize::new(0));
    let toolset = Toolset::new();
    toolset
        .bind((
            nap(&started)
                .combo()
                .with(RateLimit::per_second(100).with_store(Down)),
            nap(&started)
                .combo()
                .with(Concurrency::at_most(100).with_store(Down)),
        ))
        .unwrap();
    for name in ["nap_rate_limit", "nap_concurrency"] {
        let err = call_as(&toolset, None, name).await.unwrap_err();
        assert!(
            matches!(&err, ToolError::Overloaded { retry_after: None, reason, .. } if reason.contains("connection refused")),
            "{err:?}"
        );
        assert!(err.is_transient());
    }
    assert_eq!(started.load(Ordering::SeqCst), 0);
}

/// Issue 36, item A: a rate of N per period admits N in a period (its burst is
/// N unless set), and its refusal says what is enforced, burst included; the
/// same typed, from a manifest, and in the store itself.
#[tokio::test(start_paused = true)]
async fn a_rate_of_n_a_period_admits_n_at_once_and_says_what_it_enforces() {
    let started = Arc::new(AtomicUsize::new(0));
    let typed = Toolset::new();
    typed
        .bind((nap(&started).combo().with(RateLimit::per_second(2)),))
        .unwrap();
    let mut registry = Registry::new();
    registry
        .register(Configured::<RateLimit>::named("rate_limit"))
        .unwrap();
    let from_manifest = Toolset::new();
    let manifest = Manifest::from_value(&json!({"tools": {"nap": [
        [{"name": "rate_limit", "config": {"calls": 2}}]
    ]}}))
    .unwrap();
    let tool = nap(&started);
    for (_, bound) in
        from_manifest.bind_manifest(&registry, &BaseTools::new().with(&tool), &manifest)
    {
        bound.unwrap();
    }
    for toolset in [&typed, &from_manifest] {
        call_as(toolset, None, "nap_rate_limit").await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        call_as(toolset, None, "nap_rate_limit").await.unwrap();
        let err = call_as(toolset, None, "nap_rate_limit").await;
        let err = err.unwrap_err();
        assert_eq!(
            err.to_string(),
            "`rate_limit` refused the call to `nap_rate_limit`: over 2 calls per 1s (bursts of up to 2, then one every 500ms); retry after 495 ms"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // An explicit burst is kept, and said.
    let strict = Toolset::new();
    strict
        .bind((nap(&started)
            .combo()
            .with(RateLimit::per_second(2).with_burst(1)),))
        .unwrap();
    call_as(&strict, None, "nap_rate_limit").await.unwrap();
    let err = call_as(&strict, None, "nap_rate_limit").await.unwrap_err();
    assert!(
        err.to_string()
            .contains("over 2 calls per 1s (bursts of up to 1, then one every 500ms)"),
        "{err}"
    );

    // The store counts the rate as it is built: both stores share `Rate`.
    let rate = Rate::new(2, Duration::from_secs(1)).unwrap();
    assert_eq!(
        (rate.burst(), rate.tolerance()),
        (2, Duration::from_millis(500))
    );
    let store = MemoryLimits::new();
    let key = LimitKey::new(toolgraft::Name::new("x_rate_limit").unwrap(), None);
    assert!(store.admit(&key, rate).await.unwrap().is_admitted());
    assert!(store.admit(&key, rate).await.unwrap().is_admitted());
    assert_eq!(
        store.admit(&key, rate).await.unwrap(),
        Admission::Refused {
            retry_after: Duration::from_millis(500)
        }
    );
}

/// Issue 36, item A: an operator's numbers out of range are typed errors
/// naming the field, from a manifest as typed; a burst left out is the rate's.
#[test]
fn rate_limit_config_numbers_out_of_range_are_typed_errors() {
    let started = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::new();
    registry
        .register(Configured::<RateLimit>::named("rate_limit"))
        .unwrap();
    for (config, field) in [
        (json!({"calls": 5_000_000_000_u64}), "calls"),
        (json!({"calls": -1}), "calls"),
        (json!({"calls": 5, "burst": 2_000_000}), "burst"),
        (json!({"calls": 5, "burst": 5_000_000_000_u64}), "burst"),
        (json!({"calls": 5, "period_ms": u64::MAX}), "period_ms"),
        (json!({"calls": 5, "max_wait_ms": u64::MAX}), "max_wait_ms"),
    ] {
        let manifest = Manifest::from_value(&json!({"tools": {"nap": [
            [{"name": "rate_limit", "config": config.clone()}]
        ]}}))
        .unwrap();
        let tool = nap(&started);
        let mut outcome =
            Toolset::new().bind_manifest(&registry, &BaseTools::new().with(&tool), &manifest);
        let err = outcome.remove(0).1.unwrap_err();
        assert!(
            matches!(&err, BindError::InvalidConfig { field: f, .. } if f == field),
            "{config}: {err:?}"
        );
    }
    let config: toolgraft::ext::limit::RateLimitConfig =
        serde_json::from_value(json!({"calls": 5})).unwrap();
    assert_eq!(config.burst, None);
    assert_eq!(
        RateLimit::per_second(5).rate().unwrap().burst(),
        5,
        "a burst left out is the rate's calls"
    );
}

/// Issue 36: with 100 calls a day (a burst of 100), a key that called once is
/// the same as a new one an emission interval (864 s) later, not a day later:
/// the in-process table frees it then, and a new caller is admitted.
#[tokio::test(start_paused = true)]
async fn a_full_key_table_frees_a_key_once_its_state_is_fresh_not_a_period_later() {
    let day = Duration::from_secs(24 * 60 * 60);
    let (toolset, started) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started).combo().with(
                RateLimit::new(100, day)
                    .with_per_principal()
                    .with_max_keys(2),
            ),))
            .unwrap();
        toolset
    });
    for who in ["p1", "p2"] {
        call_as(&toolset, Some(who), "nap_rate_limit")
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(60 * 60)).await;
    call_as(&toolset, Some("p3"), "nap_rate_limit")
        .await
        .unwrap();
    assert_eq!(started.load(Ordering::SeqCst), 3);

    // The store itself: a key's state is fresh at its theoretical arrival
    // time, however large the burst.
    let store = MemoryLimits::new().with_max_keys(1);
    let rate = Rate::new(100, day).unwrap();
    let branch = toolgraft::Name::new("x_rate_limit").unwrap();
    let key = |who: &str| LimitKey::new(branch.clone(), Some(Principal::new(who)));
    assert!(store.admit(&key("p1"), rate).await.unwrap().is_admitted());
    tokio::time::sleep(Duration::from_secs(864)).await;
    assert!(store.admit(&key("p2"), rate).await.unwrap().is_admitted());
    assert_eq!(store.tracked(), 1);
}

/// Issue 36: a new caller refused because every tracked key is live is told
/// when the earliest of them will be fresh, and is admitted then.
#[tokio::test(start_paused = true)]
async fn a_new_caller_refused_by_a_full_key_table_is_told_when_a_key_frees() {
    let (toolset, _) = toolset_with(|started| {
        let toolset = Toolset::new();
        toolset
            .bind((nap(started).combo().with(
                RateLimit::per_second(4)
                    .with_per_principal()
                    .with_max_keys(2),
            ),))
            .unwrap();
        toolset
    });
    // p1 runs 3 intervals ahead, p2 one: p2's state is fresh first, in 250 ms.
    for _ in 0..3 {
        call_as(&toolset, Some("p1"), "nap_rate_limit")
            .await
            .unwrap();
    }
    call_as(&toolset, Some("p2"), "nap_rate_limit")
        .await
        .unwrap();
    let err = call_as(&toolset, Some("p3"), "nap_rate_limit")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Overloaded { retry_after: Some(after), reason, .. }
            if *after == Duration::from_millis(250) && reason.contains("2 distinct callers")),
        "{err:?}"
    );
    assert!(err.is_transient());
    tokio::time::sleep(Duration::from_millis(249)).await;
    assert!(
        call_as(&toolset, Some("p3"), "nap_rate_limit")
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(1)).await;
    call_as(&toolset, Some("p3"), "nap_rate_limit")
        .await
        .unwrap();

    // The store's own error says it too.
    let store = MemoryLimits::new().with_max_keys(1);
    let rate = Rate::new(4, Duration::from_secs(1)).unwrap();
    let branch = toolgraft::Name::new("x_rate_limit").unwrap();
    let key = |who: &str| LimitKey::new(branch.clone(), Some(Principal::new(who)));
    for _ in 0..2 {
        assert!(store.admit(&key("p1"), rate).await.unwrap().is_admitted());
    }
    let error = store.admit(&key("p2"), rate).await.unwrap_err();
    assert_eq!(error.retry_after(), Some(Duration::from_millis(500)));
}
