//! The call context under hostile use: a context that arrived with many entries,
//! entries under the names of others, and a wire that does not say what the
//! entries it names are.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use toolgraft::Name;
use toolgraft::context::{
    self, BodyLocalCall, ChainDepth, Context, Entry, InProcess, Keyed, Serialized, Stays, Unkeyed,
};
use toolgraft::ext::Cache;
use toolgraft::ext::chain::MAX_CHAIN_DEPTH;
use toolgraft::prelude::*;
use toolgraft::relocation::{Departure, WireContext};

fn below() -> Name {
    Name::new("probe").unwrap()
}

fn wire(entries: Value) -> WireContext {
    serde_json::from_value(entries).unwrap()
}

#[tokio::test]
async fn a_context_of_many_entries_drops_without_overflowing_the_stack() {
    // Dropped as nested `Arc`s, it overflowed the stack: a job whose context
    // has many entries aborted the worker's process (and the next worker's,
    // the job being run again).
    let many = (0..200_000).fold(Context::new(), |context, i| context.with(ChainDepth(i)));
    drop(many.clone());
    assert_eq!(many.get::<ChainDepth>(), Some(ChainDepth(199_999)));
    drop(many);
    let many = (0..200_000)
        .map(|i| json!({"name": format!("hostile.{i}"), "value": i}))
        .collect();
    let empty = wire(Value::Array(many))
        .arrive(async { Context::current().is_empty() })
        .await;
    assert!(!empty);
}

#[test]
fn a_context_of_many_entries_dropped_on_threads_at_once_does_not_overflow_the_stack() {
    // Whichever thread drops the last clone unlinks the entries one by one too.
    for _ in 0..20 {
        let many = (0..50_000).fold(Context::new(), |context, i| context.with(ChainDepth(i)));
        let start = Arc::new(std::sync::Barrier::new(4));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (many, start) = (many.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    drop(many);
                })
            })
            .collect();
        drop(many);
        for thread in threads {
            thread.join().unwrap();
        }
    }
}

#[tokio::test]
async fn a_context_that_arrived_with_many_entries_relocates_in_linear_time() {
    // A job whose context has many entries (a buggy or hostile caller): each
    // relocation from inside it reads them once, not once per entry.
    let many = (0..40_000)
        .map(|i| json!({"name": format!("hostile.{i}"), "value": i}))
        .collect();
    let started = Instant::now();
    let carried = wire(Value::Array(many))
        .arrive(async {
            let departure = Departure::new("hop", &below()).unwrap();
            let names = departure
                .in_process(async { context::Context::current().names().len() })
                .await;
            (names, departure.to_wire().unwrap().names().count())
        })
        .await;
    assert_eq!(carried, (40_000, 40_000));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// An entry under the name of the chain depth, staying with the caller: a
/// mistake a user can make.
#[derive(Clone, Debug)]
struct LooksLikeDepth;

impl Entry for LooksLikeDepth {
    const NAME: &'static str = "toolgraft.chain_depth";
    type Travel = Stays;
    type Key = Unkeyed;
}

/// An entry under the name of a body-local layer's call.
#[derive(Clone, Debug)]
struct LooksLikeBodyLocal;

impl Entry for LooksLikeBodyLocal {
    const NAME: &'static str = "toolgraft.body_local_call";
    type Travel = InProcess;
    type Key = Unkeyed;
}

#[tokio::test]
async fn an_entry_under_another_types_name_does_not_hide_it_from_a_worker_thread() {
    // The chain depth must reach a worker thread whatever else is set, or a
    // cycle through a backend never ends.
    let depth = context::with(
        ChainDepth(5),
        context::with(LooksLikeDepth, async {
            let departure = Departure::new("hop", &below()).unwrap();
            departure.in_process(async { ChainDepth::current() }).await
        }),
    )
    .await;
    assert_eq!(depth, 5);
}

#[tokio::test]
async fn an_entry_under_another_types_name_does_not_unpin_a_call() {
    let inside = BodyLocalCall {
        extension: Name::new("lane").unwrap(),
        branch: Name::new("outer_lane").unwrap(),
    };
    let departure = context::with(
        inside,
        context::with(LooksLikeBodyLocal, async {
            Departure::new("hop", &below())
        }),
    )
    .await;
    let refused = departure.unwrap_err().to_string();
    assert!(refused.contains("place `lane` inside `hop`"), "{refused}");
}

#[tokio::test]
async fn a_chain_depth_that_arrives_unreadable_is_too_deep() {
    // A job from a buggy or hostile caller (or a build of another `usize`): the
    // depth cannot be read, so it cannot be trusted to be shallow.
    for unreadable in [
        json!("3"),
        json!(-1),
        json!(1e30),
        serde_json::from_str("18446744073709551616").unwrap(),
        json!({"depth": 1}),
        Value::Null,
    ] {
        let arrived = wire(json!([{"name": "toolgraft.chain_depth", "value": unreadable}]));
        let depth = arrived.arrive(async { ChainDepth::current() }).await;
        assert!(depth >= MAX_CHAIN_DEPTH, "{unreadable} read as {depth}");
    }
    let arrived = wire(json!([{"name": "toolgraft.chain_depth", "value": 7}]));
    assert_eq!(arrived.arrive(async { ChainDepth::current() }).await, 7);
}

/// What a worker sets around the jobs it runs, in its own process.
#[derive(Clone, Debug, PartialEq)]
struct WorkerSlot(u32);

impl Entry for WorkerSlot {
    const NAME: &'static str = "worker.slot";
    type Travel = InProcess;
    type Key = Unkeyed;
}

#[tokio::test]
async fn an_arrived_entry_does_not_hide_one_that_cannot_arrive() {
    // A job naming an entry that never crosses processes cannot erase the
    // worker's own.
    let arrived = wire(json!([{"name": "worker.slot", "value": 9}]));
    let seen = context::with(
        WorkerSlot(3),
        arrived.arrive(async { context::get::<WorkerSlot>() }),
    )
    .await;
    assert_eq!(seen, Some(WorkerSlot(3)));
}

/// A keyed entry the body reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Region(String);

impl Entry for Region {
    const NAME: &'static str = "test.region";
    type Travel = Serialized;
    type Key = Keyed;
}

/// Another type under `Region`'s name: a mistake a user can make.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct AlsoRegion(String);

impl Entry for AlsoRegion {
    const NAME: &'static str = "test.region";
    type Travel = Serialized;
    type Key = Keyed;
}

#[derive(Deserialize, Serialize, schemars::JsonSchema)]
struct Where {}

#[tokio::test]
async fn a_cache_tells_two_types_under_one_name_apart() {
    // `Region` = eu beside `AlsoRegion` = us, and `Region` = us beside
    // `AlsoRegion` = eu: the same names and values, not the same answer.
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let region = Tool::builder()
        .name("region")
        .description("Say the region.")
        .read_only()
        .body(move |_: Where| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(context::get::<Region>().map(|region| region.0)) }
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((region.combo().with(Cache::default()),))
        .unwrap();
    let eu = Context::new()
        .with(Region("eu".into()))
        .with(AlsoRegion("us".into()));
    let us = Context::new()
        .with(AlsoRegion("eu".into()))
        .with(Region("us".into()));
    let call = |context: Context| context.scope(toolset.call("region_cache", json!({"exp": 60})));
    assert_eq!(call(eu.clone()).await.unwrap(), "eu");
    assert_eq!(call(us.clone()).await.unwrap(), "us");
    assert_eq!(call(eu).await.unwrap(), "eu");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "one run per context");
}

#[tokio::test]
async fn a_call_by_name_is_named_in_its_context_at_the_top_and_nested() {
    use toolgraft::context::CallName;
    let toolset = toolgraft::Toolset::new();
    let inner = toolgraft::Tool::builder()
        .name("inner")
        .description("Say which name was called.")
        .read_only()
        .body(|_: serde_json::Value| async {
            Ok(toolgraft::context::get::<CallName>().map(|name| name.0.to_string()))
        })
        .build()
        .unwrap();
    toolset.bind((inner.combo(),)).unwrap();
    let top = toolset.call("inner", serde_json::json!({})).await.unwrap();
    assert_eq!(top, "inner");
    // Inside another call (a context already there), the inner call is named too.
    let outer =
        toolgraft::context::Context::new().with(CallName(toolgraft::Name::new("outer").unwrap()));
    let nested = outer
        .clone()
        .scope(toolset.call("inner", serde_json::json!({})))
        .await
        .unwrap();
    assert_eq!(nested, "inner");
    assert_eq!(
        outer
            .get::<CallName>()
            .map(|name| name.0.to_string())
            .as_deref(),
        Some("outer")
    );
}
