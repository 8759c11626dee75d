//! `once`: a call's effects once per key (the caller's, a retry's, a
//! redelivered job's), its branch idempotent for rule `side-effects`, typed and
//! from manifests.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::context::{self, Principal};
use toolgraft::error::{ArgsErrorKind, Transient};
use toolgraft::ext::once::{MemoryOutcomes, OnceConfig};
use toolgraft::ext::{OncePerKey, Retry, Trace};
use toolgraft::extension::{Anywhere, Next, Stack, Wrapper};
use toolgraft::prelude::*;
use toolgraft::relocation::JobRun;
use toolgraft::rulebook::Rule;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::runtime::{Configured, Refined};
use toolgraft::toolset::BaseTools;
use toolgraft::{Extension, Registry, Wrap};

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
struct Payment {
    cents: u64,
}

/// A tool that says nothing of side effects, and how many times it charged.
fn pay(
    fails: fn(u32) -> Option<toolgraft::error::BoxError>,
) -> (
    impl toolgraft::tool::BaseTool<Input = Payment, Output = String>
    + toolgraft::tool::Hinted<Hints = toolgraft::tool::Unsaid>,
    Arc<AtomicU32>,
) {
    let charged = Arc::new(AtomicU32::new(0));
    let seen = charged.clone();
    let tool = Tool::builder()
        .name("pay")
        .description("Charge the card.")
        .body(move |payment: Payment| {
            let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
            let failure = fails(n);
            async move {
                match failure {
                    Some(error) => Err(error),
                    None => Ok(format!("charge {n}: {} cents", payment.cents)),
                }
            }
        })
        .build()
        .unwrap();
    (tool, charged)
}

fn never(_: u32) -> Option<toolgraft::error::BoxError> {
    None
}

/// Loses the answer of the first call it passes: the work below was done, and
/// its caller sees a transient failure (a reply lost on the way back).
#[derive(Clone, Debug, Default)]
struct LosesFirstAnswer(Arc<AtomicU32>);

impl Extension for LosesFirstAnswer {
    type Kind = Wrapper;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "loses_first_answer"
    }
}

impl<S: Stack> Wrap<S> for LosesFirstAnswer {
    type Params = ();
    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let answer = next.call(input).await;
        if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(ToolError::Relocation {
                tool: next.name().clone(),
                backend: toolgraft::Name::new("loses_first_answer").unwrap(),
                reason: "the answer was lost on its way back".into(),
            });
        }
        answer
    }
}

#[tokio::test(start_paused = true)]
async fn a_retried_call_whose_answer_was_lost_answers_the_first_outcome_and_charges_once() {
    let (pay, charged) = pay(never);
    let toolset = Toolset::new();
    let (retried,) = toolset
        .bind((pay
            .combo()
            .with(OncePerKey::default())
            .with(LosesFirstAnswer::default())
            .with(Retry::attempts(3)),))
        .unwrap();
    assert_eq!(
        retried.call(Payment { cents: 500 }).await.unwrap(),
        "charge 1: 500 cents"
    );
    assert_eq!(
        charged.load(Ordering::SeqCst),
        1,
        "the retry did not charge again"
    );

    // Without `once`, the same retry charges twice: what the rule keeps out.
    let unsafe_toolset = Toolset::new();
    let manifest = Manifest::from_json(r#"{"tools": {"pay": [["retry"]]}}"#).unwrap();
    let outcome =
        unsafe_toolset.bind_manifest(&registry(), &BaseTools::new().with(&pay), &manifest);
    assert_eq!(
        outcome[0].1.as_ref().unwrap_err().rule(),
        Some(Rule::SideEffects)
    );
}

#[tokio::test(start_paused = true)]
async fn a_transient_failure_releases_the_key_so_the_retry_runs_again() {
    let (pay, charged) = pay(|n| (n == 1).then(|| Transient::new("the bank is busy").into()));
    let toolset = Toolset::new();
    let (retried,) = toolset
        .bind((pay
            .combo()
            .with(OncePerKey::default())
            .with(Retry::attempts(3)),))
        .unwrap();
    assert_eq!(
        retried.call(Payment { cents: 5 }).await.unwrap(),
        "charge 2: 5 cents"
    );
    assert_eq!(charged.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_key_answers_the_first_outcome_per_caller_and_a_failure_is_replayed() {
    let (pay, charged) = pay(|n| (n == 3).then(|| "card declined".into()));
    let toolset = Toolset::new();
    toolset
        .bind((pay.combo().with(OncePerKey::default()),))
        .unwrap();
    let call = |key: &str| json!({"cents": 7, "idempotency_key": key});
    let as_alice = |args| context::with(Principal::new("alice"), toolset.call("pay_once", args));
    let as_bob = |args| context::with(Principal::new("bob"), toolset.call("pay_once", args));

    assert_eq!(
        as_alice(call("k1")).await.unwrap(),
        json!("charge 1: 7 cents")
    );
    assert_eq!(
        as_alice(call("k1")).await.unwrap(),
        json!("charge 1: 7 cents")
    );
    // Bob's `k1` is not Alice's: his call runs.
    assert_eq!(
        as_bob(call("k1")).await.unwrap(),
        json!("charge 2: 7 cents")
    );
    // A failure that is not transient is the key's answer too.
    let declined = as_alice(call("k2")).await.unwrap_err();
    assert!(declined.to_string().contains("card declined"), "{declined}");
    let again = as_alice(call("k2")).await.unwrap_err();
    assert!(matches!(again, ToolError::Reported { .. }), "{again:?}");
    assert!(again.to_string().contains("card declined"), "{again}");
    assert_eq!(charged.load(Ordering::SeqCst), 3);

    // No key: the call runs, as without `once`.
    toolset.call("pay_once", json!({"cents": 7})).await.unwrap();
    toolset.call("pay_once", json!({"cents": 7})).await.unwrap();
    assert_eq!(charged.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_key_too_long_or_empty_is_refused_naming_the_param() {
    let (pay, charged) = pay(never);
    let toolset = Toolset::new();
    toolset
        .bind((pay.combo().with(OncePerKey::default()),))
        .unwrap();
    for key in [String::new(), "k".repeat(OncePerKey::MAX_KEY_LEN + 1)] {
        let refused = toolset
            .call("pay_once", json!({"cents": 1, "idempotency_key": key}))
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, ToolError::InvalidArguments { field: Some(f), kind: ArgsErrorKind::InvalidValue, .. } if f == "idempotency_key"),
            "{refused:?}"
        );
    }
    let wrong_type = toolset
        .call("pay_once", json!({"cents": 1, "idempotency_key": 7}))
        .await
        .unwrap_err();
    assert!(
        matches!(wrong_type, ToolError::InvalidArguments { .. }),
        "{wrong_type:?}"
    );
    assert_eq!(charged.load(Ordering::SeqCst), 0);
    // The longest key is taken.
    let longest = "é".repeat(OncePerKey::MAX_KEY_LEN);
    toolset
        .call("pay_once", json!({"cents": 1, "idempotency_key": longest}))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_call_with_a_running_key_waits_its_turn_and_a_dropped_one_is_never_run_again() {
    let started = Arc::new(tokio::sync::Notify::new());
    let signal = started.clone();
    let charged = Arc::new(AtomicU32::new(0));
    let seen = charged.clone();
    let slow = Tool::builder()
        .name("pay")
        .description("Charge the card, slowly.")
        .body(move |payment: Payment| {
            seen.fetch_add(1, Ordering::SeqCst);
            signal.notify_one();
            async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(payment.cents)
            }
        })
        .build()
        .unwrap();
    let toolset = Arc::new(Toolset::new());
    toolset
        .bind((slow.combo().with(OncePerKey::default()),))
        .unwrap();
    let args = json!({"cents": 3, "idempotency_key": "k"});

    let first = tokio::spawn({
        let (toolset, args) = (toolset.clone(), args.clone());
        async move { toolset.call("pay_once", args).await }
    });
    started.notified().await;
    let busy = toolset.call("pay_once", args.clone()).await.unwrap_err();
    assert!(busy.is_transient(), "{busy:?}");
    assert_eq!(busy.retry_after(), Some(Duration::from_secs(1)));
    first.abort();
    let _ = first.await;
    tokio::task::yield_now().await;
    let unfinished = toolset.call("pay_once", args).await.unwrap_err();
    assert!(!unfinished.is_transient(), "{unfinished:?}");
    assert!(
        unfinished.to_string().contains("outcome is not known"),
        "{unfinished}"
    );
    assert_eq!(charged.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_job_run_again_answers_its_first_run() {
    let (pay, charged) = pay(never);
    let toolset = Toolset::new();
    let (once,) = toolset
        .bind((pay.combo().with(OncePerKey::default()),))
        .unwrap();
    for _ in 0..2 {
        let answer = context::with(
            JobRun::new("job-1"),
            once.call(toolgraft::extension::WithParams::new(
                Default::default(),
                Payment { cents: 9 },
            )),
        )
        .await
        .unwrap();
        assert_eq!(answer, "charge 1: 9 cents");
    }
    context::with(
        JobRun::new("job-2"),
        toolset.call("pay_once", json!({"cents": 9})),
    )
    .await
    .unwrap();
    assert_eq!(charged.load(Ordering::SeqCst), 2);
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Configured::new(Retry::default()))
        .unwrap()
        .register(Refined::new(
            OncePerKey::default().with_store(MemoryOutcomes::default()),
            OncePerKey::configured,
        ))
        .unwrap()
        .register(Trace)
        .unwrap()
        .register(Configured::new(toolgraft::ext::Batch::default()))
        .unwrap()
        .register(Configured::new(toolgraft::ext::Cache::default()))
        .unwrap();
    registry
}

#[tokio::test]
async fn from_a_manifest_once_makes_a_retry_bindable_but_not_a_cache() {
    let (pay, _) = pay(never);
    let toolset = Toolset::new();
    let manifest =
        Manifest::from_json(r#"{"tools": {"pay": [["once", "trace", "retry"]]}}"#).unwrap();
    let outcome = toolset.bind_manifest(&registry(), &BaseTools::new().with(&pay), &manifest);
    assert!(outcome[0].1.is_ok(), "{:?}", outcome[0].1);
    // Not published as idempotent: a client's call without a key runs each time.
    for name in ["pay", "pay_once", "pay_once_trace_retry"] {
        let hints = &toolset.info(name).unwrap().presentation.annotations;
        assert_eq!(hints.idempotent, None, "{name}");
    }
    let schema =
        serde_json::to_value(&toolset.info("pay_once_trace_retry").unwrap().input_schema).unwrap();
    assert!(
        schema["properties"]["idempotency_key"].is_object(),
        "the caller may send a key: {schema}"
    );

    // Outside `once`, the retry is refused as before; so is one over a
    // transformer over `once` (its branch makes new calls), and a cache, which
    // would answer callers that send no key.
    for combo in [
        r#"["retry", "once"]"#,
        r#"["once", "batch", "retry"]"#,
        r#"["once", "cache"]"#,
    ] {
        let manifest =
            Manifest::from_json(&format!(r#"{{"tools": {{"pay": [{combo}]}}}}"#)).unwrap();
        let outcome =
            Toolset::new().bind_manifest(&registry(), &BaseTools::new().with(&pay), &manifest);
        let refused = outcome[0].1.as_ref().unwrap_err();
        assert_eq!(
            refused.rule(),
            Some(Rule::SideEffects),
            "{combo}: {refused}"
        );
    }
}

#[test]
fn config_out_of_range_is_refused_naming_the_field() {
    for (config, field) in [
        (json!({"lease_ms": 0}), "lease_ms"),
        (json!({"lease_ms": OncePerKey::MAX_MS + 1}), "lease_ms"),
        (json!({"lease_ms": 10_000, "keep_ms": 5_000}), "keep_ms"),
        (json!({"lease_ms": 10_000, "keep_ms": 19_999}), "keep_ms"),
        (json!({"max_outcome_bytes": 1023}), "max_outcome_bytes"),
        (
            json!({"max_outcome_bytes": OncePerKey::MAX_OUTCOME_BYTES + 1}),
            "max_outcome_bytes",
        ),
    ] {
        let config: OnceConfig = serde_json::from_value(config.clone()).unwrap();
        let refused = OncePerKey::default().configured(config).unwrap_err();
        assert_eq!(refused.field, field, "{config:?}");
    }
    assert!(serde_json::from_value::<OnceConfig>(json!({"lease": 1})).is_err());
}

#[tokio::test]
async fn an_answer_too_large_to_keep_is_answered_once_and_a_repeat_is_told_why() {
    let charged = Arc::new(AtomicU32::new(0));
    let seen = charged.clone();
    let report = Tool::builder()
        .name("report")
        .description("Make a large report.")
        .body(move |_: Payment| {
            seen.fetch_add(1, Ordering::SeqCst);
            async move { Ok("x".repeat(10_000)) }
        })
        .build()
        .unwrap();
    let once = OncePerKey::default()
        .configured(OnceConfig {
            max_outcome_bytes: 2_000,
            ..OnceConfig::default()
        })
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((report.combo().with(once),)).unwrap();
    let args = json!({"cents": 1, "idempotency_key": "big"});
    let first = toolset.call("report_once", args.clone()).await.unwrap();
    assert_eq!(first.as_str().unwrap().len(), 10_000);
    let repeat = toolset.call("report_once", args).await.unwrap_err();
    assert!(
        repeat
            .to_string()
            .contains("larger than `once` keeps (2000 bytes)"),
        "{repeat}"
    );
    assert_eq!(charged.load(Ordering::SeqCst), 1, "not run again");
}

#[tokio::test]
async fn a_store_given_durations_that_overflow_does_not_panic() {
    use toolgraft::ext::once::{Claim, OutcomeKey, OutcomeStore};
    let store = MemoryOutcomes::default();
    let key = OutcomeKey::new(None, toolgraft::Name::new("pay").unwrap(), "key:k");
    assert_eq!(
        store
            .claim(&key, Duration::MAX, Duration::MAX)
            .await
            .unwrap(),
        Claim::Granted
    );
    store.record(&key, "done", Duration::MAX).await.unwrap();
    assert_eq!(
        store
            .claim(&key, Duration::MAX, Duration::MAX)
            .await
            .unwrap(),
        Claim::Answered("done".into())
    );
}

#[tokio::test(start_paused = true)]
async fn a_timeout_below_once_leaves_the_key_unfinished_and_the_retry_does_not_charge_again() {
    let charged = Arc::new(AtomicU32::new(0));
    let seen = charged.clone();
    let slow = Tool::builder()
        .name("pay")
        .description("Charge the card, then hang.")
        .body(move |payment: Payment| {
            seen.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_secs(10)).await;
                Ok(payment.cents)
            }
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    let (retried,) = toolset
        .bind((slow
            .combo()
            .with(toolgraft::ext::Timeout::new(Duration::from_secs(1)))
            .with(OncePerKey::default())
            .with(Retry::attempts(3)),))
        .unwrap();
    let refused = retried.call(Payment { cents: 5 }).await.unwrap_err();
    assert!(
        refused.to_string().contains("outcome is not known"),
        "{refused}"
    );
    assert!(!refused.is_transient());
    assert_eq!(
        charged.load(Ordering::SeqCst),
        1,
        "charged once, not three times"
    );
}

#[tokio::test]
async fn calls_under_one_job_are_told_apart_by_their_arguments_and_order() {
    let (pay, charged) = pay(never);
    let toolset = Toolset::new();
    toolset
        .bind((pay
            .combo()
            .with(OncePerKey::default())
            .with(toolgraft::ext::Batch::default()),))
        .unwrap();
    let items = json!({"items": [{"cents": 1}, {"cents": 2}, {"cents": 1}]});
    let run = || {
        context::with(
            JobRun::new("job-7"),
            toolset.call("pay_once_batch", items.clone()),
        )
    };
    let first = run().await.unwrap();
    assert_eq!(
        charged.load(Ordering::SeqCst),
        3,
        "three items, three charges: {first}"
    );
    // The job run again: the same calls in the same order, each its first answer.
    let again = run().await.unwrap();
    assert_eq!(again, first);
    assert_eq!(charged.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_bodys_own_calls_under_an_attempt_are_its_own_calls() {
    let (pay, charged) = pay(never);
    let toolset = Arc::new(Toolset::new());
    toolset
        .bind((pay.combo().with(OncePerKey::default()),))
        .unwrap();
    let calls = Arc::downgrade(&toolset);
    let checkout = Tool::builder()
        .name("checkout")
        .description("Pay two amounts.")
        .idempotent()
        .body(move |_: Payment| {
            let calls = calls.upgrade();
            async move {
                let calls = calls.ok_or("the toolset is gone")?;
                let a = calls.call("pay_once", json!({"cents": 100})).await?;
                let b = calls.call("pay_once", json!({"cents": 200})).await?;
                Ok(vec![a, b])
            }
        })
        .build()
        .unwrap();
    toolset
        .bind((checkout.combo().with(Retry::attempts(2)),))
        .unwrap();
    let answer = toolset
        .call("checkout_retry", json!({"cents": 0}))
        .await
        .unwrap();
    assert_eq!(
        answer,
        json!(["charge 1: 100 cents", "charge 2: 200 cents"])
    );
    assert_eq!(charged.load(Ordering::SeqCst), 2);
}

/// Refuses the first call it gets, before the layer below runs.
#[derive(Clone, Debug, Default)]
struct RefusesFirst(Arc<AtomicU32>);

impl Extension for RefusesFirst {
    type Kind = Wrapper;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "refuses_first"
    }
}

impl<S: Stack> Wrap<S> for RefusesFirst {
    type Params = ();
    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(next.refuse("not yet"));
        }
        next.call(input).await
    }
}

#[tokio::test]
async fn a_refusal_below_once_releases_the_key_for_the_next_call() {
    let (pay, charged) = pay(never);
    let toolset = Toolset::new();
    toolset
        .bind((pay
            .combo()
            .with(RefusesFirst::default())
            .with(OncePerKey::default()),))
        .unwrap();
    let args = json!({"cents": 5, "idempotency_key": "k"});
    let refused = toolset
        .call("pay_refuses_first_once", args.clone())
        .await
        .unwrap_err();
    assert!(matches!(refused, ToolError::Refused { .. }), "{refused:?}");
    let answered = toolset.call("pay_refuses_first_once", args).await.unwrap();
    assert_eq!(answered, json!("charge 1: 5 cents"));
    assert_eq!(charged.load(Ordering::SeqCst), 1);
}

/// A store that never answers.
#[derive(Debug)]
struct Away;

impl toolgraft::ext::once::OutcomeStore for Away {
    fn claim<'a>(
        &'a self,
        _: &'a toolgraft::ext::once::OutcomeKey,
        _: Duration,
        _: Duration,
    ) -> toolgraft::store::StoreFuture<'a, toolgraft::ext::once::Claim> {
        Box::pin(async {
            Err(toolgraft::store::StoreError::new("the store is away")
                .with_retry_after(Duration::from_secs(3)))
        })
    }

    fn record<'a>(
        &'a self,
        _: &'a toolgraft::ext::once::OutcomeKey,
        _: &'a str,
        _: Duration,
    ) -> toolgraft::store::StoreFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }

    fn release<'a>(
        &'a self,
        _: &'a toolgraft::ext::once::OutcomeKey,
    ) -> toolgraft::store::StoreFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn a_store_that_cannot_answer_refuses_the_call_and_runs_nothing() {
    let (pay, charged) = pay(never);
    let toolset = Toolset::new();
    toolset
        .bind((pay.combo().with(OncePerKey::default().with_store(Away)),))
        .unwrap();
    let refused = toolset
        .call("pay_once", json!({"cents": 5, "idempotency_key": "k"}))
        .await
        .unwrap_err();
    assert!(refused.is_transient(), "{refused:?}");
    assert_eq!(refused.retry_after(), Some(Duration::from_secs(3)));
    assert_eq!(
        refused.to_string(),
        "`once` refused the call to `pay_once`: the outcome store could not answer (the store is away); \
         refused rather than run unclaimed; retry after 3000 ms"
    );
    assert_eq!(charged.load(Ordering::SeqCst), 0);
}
