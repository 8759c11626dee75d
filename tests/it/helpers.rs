//! Generic helpers over combos, written with `Takes` and `With` alone: they return
//! exactly the combo `.with` returns, at any depth (past one and two segments), and
//! the combos they build bind and take calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use toolgraft::combo::{Takes, With};
use toolgraft::ext::{Cache, CacheParams, Trace};
use toolgraft::prelude::*;

use crate::common::Shout;

fn traced<C: Takes<Trace>>(combo: C) -> With<C, Trace> {
    combo.with(Trace)
}

fn cached<C: Takes<Cache>>(combo: C) -> With<C, Cache> {
    combo.with(Cache::default())
}

fn both<C>(combo: C) -> With<With<C, Trace>, Cache>
where
    C: Takes<Trace>,
    With<C, Trace>: Takes<Cache>,
{
    cached(traced(combo))
}

/// `traced` once per token: the helper applied at each depth in turn.
macro_rules! traced_times {
    ($combo:expr; $($n:tt)*) => {{
        let combo = $combo;
        $(let combo = { let _ = $n; traced(combo) };)*
        combo
    }};
}

/// A `shout` whose body counts its runs.
fn counted() -> (
    impl BaseTool<Input = Shout, Output = String>,
    Arc<AtomicUsize>,
) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let tool = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .read_only()
        .body(move |input: Shout| {
            counter.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok(input.text))
        })
        .build()
        .unwrap();
    (tool, runs)
}

#[test]
fn a_helper_returns_the_combo_with_returns() {
    let (shout, _) = counted();
    // The same type both ways, or this does not compile.
    let combos = [
        both(shout.combo()),
        shout.combo().with(Trace).with(Cache::default()),
    ];
    assert!(
        combos
            .iter()
            .all(|combo| combo.name() == "shout_trace_cache")
    );
}

#[tokio::main(flavor = "current_thread")]
#[test]
async fn helpers_work_past_eight_layers() {
    let (shout, runs) = counted();
    // 7 traces, then the helper's trace (8th) and cache (9th: the first above a
    // segment), then one more trace.
    let combo = traced(both(traced_times!(shout.combo(); 1 2 3 4 5 6 7)));
    let mut expected = "shout".to_owned();
    for _ in 0..8 {
        expected.push_str("_trace");
    }
    expected.push_str("_cache_trace");
    assert_eq!(combo.name(), expected.as_str());

    let toolset = Toolset::new();
    let (branch,) = toolset.bind((combo,)).unwrap();
    assert_eq!(branch.name(), expected.as_str());
    for _ in 0..2 {
        assert_eq!(branch.call(Shout::new("hi")).await.unwrap(), "hi");
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the ninth layer's cache answered"
    );
    let refused = branch
        .params(CacheParams { exp: Some(0.0) })
        .call(Shout::new("hi"))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("exp"),
        "`exp: 0` reached the cache: {refused}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let by_name = toolset
        .call(&expected, json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(by_name, json!("hi"));
}

#[tokio::main(flavor = "current_thread")]
#[test]
async fn helpers_work_past_sixteen_layers() {
    let (shout, runs) = counted();
    // 15 traces, then the helper's trace (16th) and cache (17th: the first above
    // the second segment), then a trace and a cache again (the cache by hand, so
    // the combo holds one: a params type that two layers reserve is ambiguous).
    let combo = traced(both(
        traced_times!(shout.combo(); 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15),
    ));
    let mut expected = "shout".to_owned();
    for _ in 0..16 {
        expected.push_str("_trace");
    }
    let cache = format!("{expected}_cache");
    expected = format!("{cache}_trace");
    assert_eq!(combo.name(), expected.as_str());

    let toolset = Toolset::new();
    let (branch,) = toolset.bind((combo,)).unwrap();
    assert!(toolset.contains(&cache));
    for _ in 0..2 {
        assert_eq!(branch.call(Shout::new("hi")).await.unwrap(), "hi");
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the 17th layer's cache answered"
    );
    let refused = branch
        .params(CacheParams { exp: Some(0.0) })
        .call(Shout::new("hi"))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("exp"),
        "`exp: 0` reached the cache: {refused}"
    );
    let by_name = toolset
        .call(&cache, json!({"text": "ho", "exp": 0}))
        .await
        .unwrap_err();
    assert!(by_name.to_string().contains("exp"), "{by_name}");
    let by_name = toolset
        .call(&cache, json!({"text": "ho", "exp": 5}))
        .await
        .unwrap();
    assert_eq!(by_name, json!("ho"));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}
