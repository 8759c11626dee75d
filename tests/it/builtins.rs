//! The built-in extensions at call time (scenarios 29, 30, 31, and `trace`).

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Shout;
use serde_json::json;
use toolgraft::ToolError;
use toolgraft::context::{self, Principal};
use toolgraft::error::BoxError;
use toolgraft::ext::{Batch, BatchInput, Cache, CacheParams, Proxy, Trace, proxy};
use toolgraft::prelude::*;

/// `shout`, counting how often its body runs, failing on "fail", taking a second
/// (of tokio time) on "slow".
fn counted_shout(runs: Arc<AtomicUsize>) -> impl BaseTool<Input = Shout, Output = String> {
    Tool::builder()
        .name("shout")
        .description("Return the text.")
        .read_only()
        .body(move |input: Shout| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                match input.text.as_str() {
                    "fail" => Err("asked to fail".into()),
                    "slow" => {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        Ok("SLOW".to_owned())
                    }
                    text => Ok(text.to_uppercase()),
                }
            }
        })
        .build()
        .unwrap()
}

fn with_exp<I>(exp: f64, input: I) -> WithParams<CacheParams, I> {
    WithParams::new(CacheParams { exp: Some(exp) }, input)
}

#[tokio::test(start_paused = true)]
async fn cache_honours_the_ttl_on_a_controllable_clock() {
    let runs = Arc::new(AtomicUsize::new(0));
    let shout = counted_shout(runs.clone());
    let toolset = Toolset::new();
    toolset
        .bind((shout.combo().with(Cache::default()),))
        .unwrap();
    let call = || toolset.call("shout_cache", json!({"text": "hi", "exp": 10}));

    assert_eq!(call().await.unwrap(), json!("HI"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(call().await.unwrap(), json!("HI"));
    assert_eq!(runs.load(Ordering::SeqCst), 1, "a hit at +5 s");
    tokio::time::advance(Duration::from_secs(15)).await;
    assert_eq!(call().await.unwrap(), json!("HI"));
    assert_eq!(runs.load(Ordering::SeqCst), 2, "recomputed at +20 s");
    // `exp: 0` no longer bypasses the cache: it is refused.
    toolset
        .call("shout_cache", json!({"text": "hi", "exp": 0}))
        .await
        .unwrap_err();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn cache_does_not_keep_errors() {
    let runs = Arc::new(AtomicUsize::new(0));
    let shout = counted_shout(runs.clone());
    let toolset = Toolset::new();
    let (cached,) = toolset
        .bind((shout.combo().with(Cache::default()),))
        .unwrap();
    for _ in 0..2 {
        let err = cached
            .call(with_exp(60.0, Shout::new("fail")))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Body { .. }));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert!(cached.stack().wrapper().is_empty());
}

#[tokio::test(start_paused = true)]
async fn concurrent_identical_calls_run_the_body_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let shout = counted_shout(runs.clone());
    let toolset = Toolset::new();
    let (cached,) = toolset
        .bind((shout.combo().with(Cache::default()),))
        .unwrap();
    let calls = (0..5).map(|_| cached.call(with_exp(60.0, Shout::new("slow"))));
    let results = futures_util::future::join_all(calls).await;
    assert!(results.iter().all(|r| r.as_deref().ok() == Some("SLOW")));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_runner_hands_the_key_to_a_waiter() {
    let runs = Arc::new(AtomicUsize::new(0));
    let shout = counted_shout(runs.clone());
    let toolset = Toolset::new();
    let (cached,) = toolset
        .bind((shout.combo().with(Cache::default()),))
        .unwrap();
    let runner = {
        let cached = cached.clone();
        tokio::spawn(async move { cached.call(with_exp(60.0, Shout::new("slow"))).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    let waiter = {
        let cached = cached.clone();
        tokio::spawn(async move { cached.call(with_exp(60.0, Shout::new("slow"))).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    runner.abort();
    assert_eq!(waiter.await.unwrap().unwrap(), "SLOW");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn the_store_never_exceeds_its_bound_and_evicts_the_least_recently_used() {
    let runs = Arc::new(AtomicUsize::new(0));
    let shout = counted_shout(runs.clone());
    let toolset = Toolset::new();
    let (cached,) = toolset
        .bind((shout.combo().with(Cache::with_capacity(2)),))
        .unwrap();
    let call = |text: &str| cached.call(with_exp(60.0, Shout::new(text)));
    for text in ["a", "b", "a", "c"] {
        call(text).await.unwrap();
        assert!(cached.stack().wrapper().len() <= 2);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3, "`a` was a hit");
    call("a").await.unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "`a` was used recently, so `b` went"
    );
    call("b").await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 4);
    for i in 0..50 {
        call(&format!("k{i}")).await.unwrap();
        assert_eq!(cached.stack().wrapper().len(), 2);
    }
}

#[tokio::test]
async fn each_cache_branch_has_its_own_store() {
    let runs = Arc::new(AtomicUsize::new(0));
    let shout = counted_shout(runs.clone());
    let toolset = Toolset::new();
    toolset
        .bind((
            shout.combo().with(Cache::default()),
            shout.combo().with(Trace).with(Cache::default()),
        ))
        .unwrap();
    toolset
        .call("shout_cache", json!({"text": "x"}))
        .await
        .unwrap();
    toolset
        .call("shout_trace_cache", json!({"text": "x"}))
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    toolset
        .call("shout_cache", json!({"text": "x"}))
        .await
        .unwrap();
    toolset
        .call("shout_trace_cache", json!({"text": "x"}))
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[derive(Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Num {
    n: i64,
}

/// `n -> n`; fails on 2 when `fail_on_two`; each call takes one second (tokio
/// time) and records how many run at once.
fn identity(
    started: Arc<AtomicUsize>,
    peak: Arc<Mutex<(usize, usize)>>,
) -> impl BaseTool<Input = Num, Output = i64> {
    Tool::builder()
        .name("identity")
        .description("Return n.")
        .read_only()
        .body(move |input: Num| {
            let (started, peak) = (started.clone(), peak.clone());
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                {
                    let mut peak = peak.lock().unwrap();
                    peak.0 += 1;
                    peak.1 = peak.1.max(peak.0);
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                peak.lock().unwrap().0 -= 1;
                if input.n == 2 {
                    return Err::<i64, BoxError>("two is not allowed".into());
                }
                Ok(input.n)
            }
        })
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn batch_runs_items_in_order_sequentially_or_in_parallel() {
    let (started, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new((0, 0))));
    let tool = identity(started.clone(), peak.clone());
    let toolset = Toolset::new();
    toolset
        .bind((tool.combo().with(Batch::max_items(5)),))
        .unwrap();

    let items = json!([{"n": 1}, {"n": 3}, {"n": 4}]);
    let before = tokio::time::Instant::now();
    let out = toolset
        .call("identity_batch", json!({"items": items}))
        .await
        .unwrap();
    assert_eq!(out, json!([1, 3, 4]));
    assert_eq!(
        before.elapsed(),
        Duration::from_secs(3),
        "one after the other"
    );
    assert_eq!(peak.lock().unwrap().1, 1);

    let before = tokio::time::Instant::now();
    let out = toolset
        .call("identity_batch", json!({"items": items, "parallel": true}))
        .await
        .unwrap();
    assert_eq!(out, json!([1, 3, 4]));
    assert_eq!(before.elapsed(), Duration::from_secs(1), "all at once");
    assert_eq!(peak.lock().unwrap().1, 3);

    *peak.lock().unwrap() = (0, 0);
    let args = json!({"items": [{"n": 1}, {"n": 3}, {"n": 4}, {"n": 5}], "parallel": true, "max_concurrent": 2});
    let out = toolset.call("identity_batch", args).await.unwrap();
    assert_eq!(out, json!([1, 3, 4, 5]));
    assert_eq!(peak.lock().unwrap().1, 2);
}

#[tokio::test(start_paused = true)]
async fn batch_failures_fail_fast_or_fill_their_slot() {
    let (started, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new((0, 0))));
    let tool = identity(started.clone(), peak);
    let toolset = Toolset::new();
    toolset
        .bind((tool.combo().with(Batch::max_items(5)),))
        .unwrap();
    let items = json!([{"n": 1}, {"n": 2}, {"n": 3}]);

    for parallel in [false, true] {
        let out = toolset
            .call(
                "identity_batch",
                json!({"items": items, "parallel": parallel, "fail_fast": false}),
            )
            .await
            .unwrap();
        assert_eq!(out[0], json!(1));
        assert_eq!(out[2], json!(3));
        let error = out[1]["error"].as_str().unwrap();
        assert!(error.contains("two is not allowed"), "{error}");

        let err = toolset
            .call(
                "identity_batch",
                json!({"items": items, "parallel": parallel}),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("two is not allowed"));
    }
}

#[tokio::test(start_paused = true)]
async fn batch_limits_are_checked_before_any_item_runs() {
    let (started, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new((0, 0))));
    let tool = identity(started.clone(), peak);
    let toolset = Toolset::new();
    let (batched,) = toolset
        .bind((tool.combo().with(Batch::max_items(2)),))
        .unwrap();

    let err = toolset
        .call(
            "identity_batch",
            json!({"items": [{"n": 1}, {"n": 3}, {"n": 4}]}),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("3 items is over the limit of 2"),
        "{err}"
    );
    let err = batched
        .call(BatchInput::sequential(vec![
            Num { n: 1 },
            Num { n: 3 },
            Num { n: 4 },
        ]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidArguments { ref tool, ref field, .. }
            if tool == "identity_batch" && field.as_deref() == Some("items")),
        "the typed path refuses with the same error as the JSON path: {err:?}"
    );

    let err = toolset
        .call(
            "identity_batch",
            json!({"items": [{"n": 1}], "parallel": true, "max_concurrent": 0}),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidArguments { ref field, .. } if field.as_deref() == Some("max_concurrent"))
    );
    let err = batched
        .call(BatchInput::parallel(vec![Num { n: 1 }]).with_max_items(0))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("max_concurrent"), "{err}");
    assert_eq!(started.load(Ordering::SeqCst), 0);

    // An empty batch is an empty answer.
    assert_eq!(
        toolset
            .call("identity_batch", json!({"items": []}))
            .await
            .unwrap(),
        json!([])
    );
}

/// `fetch {} -> route`: the proxy route its body sees, counting its runs.
fn route_reporter(
    runs: Arc<AtomicUsize>,
) -> impl BaseTool<Input = common::Ping, Output = Option<String>> {
    Tool::builder()
        .name("fetch")
        .description("Report the route.")
        .read_only()
        .body(move |_: common::Ping| {
            runs.fetch_add(1, Ordering::SeqCst);
            async { Ok(proxy::current_route()) }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn proxy_picks_an_allowed_route_for_the_body_only() {
    let runs = Arc::new(AtomicUsize::new(0));
    let fetch = route_reporter(runs.clone());
    let toolset = Toolset::new();
    toolset
        .bind((fetch.combo().with(Proxy::allow(["A"])),))
        .unwrap();

    let err = toolset
        .call("fetch_proxy", json!({"proxies": ["B"]}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::Refused { ref tool, .. } if tool == "fetch_proxy"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("route `B` is not on the allow-list (A)"),
        "{err}"
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "refused before the body ran"
    );

    assert_eq!(
        toolset.call("fetch_proxy", json!({})).await.unwrap(),
        json!("A")
    );
    assert_eq!(
        toolset
            .call("fetch_proxy", json!({"proxies": ["A"]}))
            .await
            .unwrap(),
        json!("A")
    );
    assert_eq!(
        proxy::current_route(),
        None,
        "no route leaks into the caller's task"
    );
    // The base has no route at all.
    assert_eq!(toolset.call("fetch", json!({})).await.unwrap(), json!(null));
}

/// A cache inside a proxy keys the route with the arguments: the proxy changes
/// the answer without changing what the cache is given.
#[tokio::test]
async fn a_cache_inside_a_proxy_keeps_one_answer_per_route() {
    let runs = Arc::new(AtomicUsize::new(0));
    let fetch = route_reporter(runs.clone());
    let toolset = Toolset::new();
    toolset
        .bind((fetch
            .combo()
            .with(Cache::default())
            .with(Proxy::allow(["eu", "us"])),))
        .unwrap();
    for (route, runs_after) in [("eu", 1), ("us", 2), ("eu", 2), ("us", 2)] {
        let answer = toolset
            .call("fetch_cache_proxy", json!({"proxies": [route]}))
            .await
            .unwrap();
        assert_eq!(answer, json!(route));
        assert_eq!(runs.load(Ordering::SeqCst), runs_after, "{route}");
    }
    // Without a proxy around it, the cache keys the arguments alone.
    toolset.call("fetch_cache", json!({})).await.unwrap();
    toolset.call("fetch_cache", json!({})).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

/// Records every `tool_call` span: its `tool` field, and its `error` once recorded.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Recorded>>>);

/// A span's `tool` field, and its `error` field once recorded.
type Recorded = (String, Option<String>);

struct Fields<'a>(&'a mut Recorded);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "tool" => self.0.0 = format!("{value:?}"),
            "error" => self.0.1 = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if attrs.metadata().name() == "tool_call" {
            let mut span = (String::new(), None);
            attrs.record(&mut Fields(&mut span));
            self.0.lock().unwrap().push(span);
        }
    }

    fn on_record(
        &self,
        _: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(last) = self.0.lock().unwrap().last_mut() {
            values.record(&mut Fields(last));
        }
    }
}

#[tokio::test]
async fn trace_opens_a_span_per_call_named_after_the_layer_input() {
    use tracing_subscriber::layer::SubscriberExt;
    let spans = Spans::default();
    let _guard = common::subscribe(tracing_subscriber::registry().with(spans.clone()));

    let runs = Arc::new(AtomicUsize::new(0));
    let shout = counted_shout(runs);
    let toolset = Toolset::new();
    toolset
        .bind((shout.combo().with(Trace).with(common::Loud).with(Trace),))
        .unwrap();
    toolset
        .call("shout_trace", json!({"text": "ok"}))
        .await
        .unwrap();
    toolset
        .call("shout_trace_loud_trace", json!({"text": "ok"}))
        .await
        .unwrap();
    toolset
        .call("shout_trace", json!({"text": "fail"}))
        .await
        .unwrap_err();

    let spans = spans.0.lock().unwrap().clone();
    let tools: Vec<&str> = spans.iter().map(|(tool, _)| tool.as_str()).collect();
    assert_eq!(tools, ["shout", "shout_trace_loud", "shout", "shout"]);
    assert!(spans[..3].iter().all(|(_, error)| error.is_none()));
    let error = spans[3].1.as_deref().expect("the failure is recorded");
    assert!(error.contains("asked to fail"), "{error}");
}

/// An operator's TTL too long to represent is the operator's choice: it never
/// expires, and it neither overflows nor panics. A caller's negative `exp` is
/// refused, naming `exp`.
#[tokio::test(start_paused = true)]
async fn an_operators_ttl_too_long_to_represent_never_expires_and_a_negative_exp_is_refused() {
    use toolgraft::ext::cache::CacheConfig;
    for default_ttl_secs in [1e19, 1e300, f64::INFINITY, f64::MAX] {
        let runs = Arc::new(AtomicUsize::new(0));
        let shout = counted_shout(runs.clone());
        let toolset = Toolset::new();
        let cache = Cache::new(CacheConfig {
            default_ttl_secs,
            ..CacheConfig::default()
        });
        let (cached,) = toolset.bind((shout.combo().with(cache),)).unwrap();
        for _ in 0..2 {
            let out = toolset
                .call("shout_cache", json!({"text": "hi"}))
                .await
                .unwrap();
            assert_eq!(out, json!("HI"));
            tokio::time::advance(Duration::from_secs(10 * 365 * 24 * 3600)).await;
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{default_ttl_secs}");

        let err = cached
            .call(with_exp(-1.0, Shout::new("hi")))
            .await
            .unwrap_err();
        match err {
            ToolError::InvalidArguments { tool, field, .. } => {
                assert_eq!(
                    (tool.as_str(), field.as_deref()),
                    ("shout_cache", Some("exp")),
                    "names the branch called"
                );
            }
            other => panic!("expected invalid arguments, got {other:?}"),
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}

/// Issue 36: a caller's `exp` is capped by the operator's `max_ttl_secs` (a day
/// unless set). One caller of a public cache cannot make an entry permanent for
/// everyone: an `exp` over the maximum (1e300 among them) is refused, naming
/// `exp`, typed and by name; the schema says the maximum; ten years on, a call
/// without `exp` runs again.
#[tokio::test(start_paused = true)]
async fn a_callers_exp_over_the_operators_maximum_is_refused_and_never_makes_an_entry_permanent() {
    use toolgraft::ext::cache::CacheConfig;
    let runs = Arc::new(AtomicUsize::new(0));
    let shout = counted_shout(runs.clone());
    let toolset = Toolset::new();
    let (cached,) = toolset
        .bind((shout.combo().with(Cache::default().with_public()),))
        .unwrap();
    let schema = toolset.info("shout_cache").unwrap().input_schema;
    let exp = &schema.get("properties").unwrap()["exp"];
    assert_eq!(exp["maximum"], json!(86400), "{exp}");
    assert_eq!(exp["minimum"], json!(1), "{exp}");
    for exp in [1e300, 1e19, 86400.5, f64::MAX] {
        let by_name = context::with(
            Principal::new("mallory"),
            toolset.call("shout_cache", json!({"text": "hi", "exp": exp})),
        )
        .await
        .unwrap_err();
        let typed = cached
            .call(with_exp(exp, Shout::new("hi")))
            .await
            .unwrap_err();
        for err in [by_name, typed] {
            assert!(
                matches!(&err, ToolError::InvalidArguments { field: Some(field), .. } if field == "exp"),
                "{exp}: {err:?}"
            );
            assert!(err.to_string().contains("at most 86400"), "{err}");
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing ran");
    let call = || {
        context::with(
            Principal::new("alice"),
            toolset.call("shout_cache", json!({"text": "hi"})),
        )
    };
    call().await.unwrap();
    tokio::time::advance(Duration::from_secs(10 * 365 * 24 * 3600)).await;
    call().await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2, "no entry outlived its TTL");
    toolset
        .call("shout_cache", json!({"text": "day", "exp": 86400}))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(86399)).await;
    toolset
        .call("shout_cache", json!({"text": "day"}))
        .await
        .unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "a day's `exp` is kept a day"
    );

    // An operator's lower maximum: the schema and the check follow it.
    let toolset = Toolset::new();
    let cache = Cache::new(CacheConfig {
        max_ttl_secs: 600.0,
        ..CacheConfig::default()
    });
    toolset
        .bind((counted_shout(runs.clone()).combo().with(cache),))
        .unwrap();
    let schema = toolset.info("shout_cache").unwrap().input_schema;
    assert_eq!(
        schema.get("properties").unwrap()["exp"]["maximum"],
        json!(600)
    );
    let err = toolset
        .call("shout_cache", json!({"text": "hi", "exp": 601}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::InvalidArguments { field: Some(field), .. } if field == "exp"),
        "{err:?}"
    );
    assert!(err.to_string().contains("at most 600"), "{err}");
    toolset
        .call("shout_cache", json!({"text": "hi", "exp": 600}))
        .await
        .unwrap();
}

/// Issue 36: the operator's `max_ttl_secs` is checked when bound: 0, negative,
/// not a number, under a second or over a year is a typed config error naming it.
#[test]
fn an_out_of_range_max_ttl_is_refused_when_bound() {
    use toolgraft::BindError;
    use toolgraft::ext::cache::{CacheConfig, LONGEST_MAX_TTL_SECS};
    for max_ttl_secs in [0.0, -1.0, 0.5, f64::NAN, LONGEST_MAX_TTL_SECS + 1.0, 1e300] {
        let cache = Cache::new(CacheConfig {
            max_ttl_secs,
            ..CacheConfig::default()
        });
        let err = Toolset::new()
            .bind((counted_shout(Arc::new(AtomicUsize::new(0)))
                .combo()
                .with(cache),))
            .err()
            .unwrap();
        assert!(
            matches!(&err, BindError::InvalidConfig { field, .. } if field == "max_ttl_secs"),
            "{max_ttl_secs}: {err:?}"
        );
    }
    let config: CacheConfig = serde_json::from_str(r#"{"max_ttl_secs": 3600}"#).unwrap();
    assert_eq!(config.max_ttl_secs, 3600.0);
    assert_eq!(CacheConfig::default().max_ttl_secs, 86400.0);
}

#[tokio::test(start_paused = true)]
async fn concurrent_callers_share_a_failure_instead_of_retrying_one_by_one() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let slow_failure = Tool::builder()
        .name("flaky")
        .description("Fails after a second.")
        .read_only()
        .body(move |_: Shout| {
            counter.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Err::<String, BoxError>("upstream down".into())
            }
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    let (cached,) = toolset
        .bind((slow_failure.combo().with(Cache::default()),))
        .unwrap();
    let before = tokio::time::Instant::now();
    let calls = (0..5).map(|_| cached.call(with_exp(60.0, Shout::new("x"))));
    let results = futures_util::future::join_all(calls).await;
    assert!(results.iter().all(|r| {
        r.as_ref()
            .is_err_and(|e| e.to_string().contains("upstream down"))
    }));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(before.elapsed(), Duration::from_secs(1));
    // Not stored: the next call runs again.
    cached
        .call(with_exp(60.0, Shout::new("x")))
        .await
        .unwrap_err();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn identical_calls_from_many_threads_run_the_body_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let slow = Tool::builder()
        .name("slow")
        .description("Takes a while.")
        .read_only()
        .body(move |input: Shout| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(input.text)
            }
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((slow.combo().with(Cache::default()),))
        .unwrap();
    let calls: Vec<_> = (0..32)
        .map(|i| {
            let toolset = toolset.clone();
            let text = if i % 2 == 0 { "even" } else { "odd" };
            tokio::spawn(async move { toolset.call("slow_cache", json!({"text": text})).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(runs.load(Ordering::SeqCst), 2, "once per distinct input");
}

#[tokio::test(start_paused = true)]
async fn a_fail_fast_batch_stops_at_the_first_failure() {
    let (started, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new((0, 0))));
    let tool = identity(started.clone(), peak);
    let toolset = Toolset::new();
    toolset
        .bind((tool.combo().with(Batch::max_items(5)),))
        .unwrap();
    let items = json!([{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}]);
    toolset
        .call("identity_batch", json!({"items": items}))
        .await
        .unwrap_err();
    assert_eq!(
        started.load(Ordering::SeqCst),
        2,
        "items after the failed one never start"
    );
}

#[tokio::test(start_paused = true)]
async fn a_parallel_fail_fast_batch_fails_when_the_failure_happens() {
    #[derive(Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
    struct Wait {
        secs: u64,
        fail: bool,
    }
    let waiter = Tool::builder()
        .name("wait")
        .description("Waits, then maybe fails.")
        .read_only()
        .body(|input: Wait| async move {
            tokio::time::sleep(Duration::from_secs(input.secs)).await;
            if input.fail {
                return Err::<u64, BoxError>("failed".into());
            }
            Ok(input.secs)
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((waiter.combo().with(Batch::default()),))
        .unwrap();
    let before = tokio::time::Instant::now();
    let items = json!([{"secs": 60, "fail": false}, {"secs": 1, "fail": true}]);
    toolset
        .call("wait_batch", json!({"items": items, "parallel": true}))
        .await
        .unwrap_err();
    assert_eq!(
        before.elapsed(),
        Duration::from_secs(1),
        "the slow first item did not hold up the failure"
    );
}

#[tokio::test]
async fn batch_items_are_as_strict_as_direct_calls() {
    let runs = Arc::new(AtomicUsize::new(0));
    let shout = counted_shout(runs.clone());
    let toolset = Toolset::new();
    toolset
        .bind((shout.combo().with(Batch::default()),))
        .unwrap();
    let err = toolset
        .call(
            "shout_batch",
            json!({"items": [{"text": "hi"}, {"text": "hi", "bogus": 1}]}),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidArguments { ref field, .. } if field.as_deref() == Some("items[1].bogus")),
        "{err:?}"
    );
    let err = toolset
        .call("shout_batch", json!({"items": [], "paralel": true}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("paralel"), "{err}");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[test]
fn operator_config_is_checked_when_binding() {
    use toolgraft::BindError;
    use toolgraft::ext::cache::CacheConfig;
    let shout = counted_shout(Arc::new(AtomicUsize::new(0)));
    let bad_ttl = Cache::new(CacheConfig {
        default_ttl_secs: -1.0,
        ..CacheConfig::default()
    });
    let cases: [(toolgraft::BindError, &str); 3] = [
        (
            Toolset::new()
                .bind((shout.combo().with(Proxy::allow(Vec::<String>::new())),))
                .err()
                .unwrap(),
            "allow",
        ),
        (
            Toolset::new()
                .bind((shout.combo().with(bad_ttl),))
                .err()
                .unwrap(),
            "default_ttl_secs",
        ),
        (
            Toolset::new()
                .bind((shout.combo().with(Batch::max_items(0)),))
                .err()
                .unwrap(),
            "max_items",
        ),
    ];
    for (err, expected) in cases {
        assert!(
            matches!(err, BindError::InvalidConfig { ref field, .. } if field == expected),
            "{err:?}"
        );
    }
}

/// Issue 36, item 6: the model cannot switch the cache off. A caller's `exp`
/// is at least 1 s: the schema says so, and a smaller one (0 among them) is
/// refused, naming `exp`, before anything runs, typed and by name; and an
/// operator's pin must be one the schema admits too.
#[tokio::test(start_paused = true)]
async fn a_callers_exp_below_a_second_is_refused_and_never_bypasses_the_cache() {
    let runs = Arc::new(AtomicUsize::new(0));
    let shout = counted_shout(runs.clone());
    let toolset = Toolset::new();
    let (cached,) = toolset
        .bind((shout.combo().with(Cache::default()),))
        .unwrap();
    let schema = toolset.info("shout_cache").unwrap().input_schema;
    let exp = &schema.get("properties").unwrap()["exp"];
    assert_eq!(exp["minimum"], json!(1), "{exp}");
    assert!(!exp["description"].as_str().unwrap().contains("bypass"));
    toolset
        .call("shout_cache", json!({"text": "hi"}))
        .await
        .unwrap();
    for exp in [0.0, 0.5] {
        let by_name = toolset
            .call("shout_cache", json!({"text": "hi", "exp": exp}))
            .await
            .unwrap_err();
        let typed = cached
            .call(with_exp(exp, Shout::new("hi")))
            .await
            .unwrap_err();
        for err in [by_name, typed] {
            assert!(
                matches!(&err, ToolError::InvalidArguments { field: Some(field), .. } if field == "exp"),
                "{exp}: {err:?}"
            );
            assert!(err.to_string().contains("at least 1"), "{err}");
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "nothing bypassed the cache");
    toolset
        .call("shout_cache", json!({"text": "hi", "exp": 1}))
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1, "a hit");
}
