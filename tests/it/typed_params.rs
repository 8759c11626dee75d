//! Reserved params given by type reach every layer, below a transformer too: each
//! batch item's cache, a chain's first call. And a call by name with the same
//! params in each item does the same.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgraft::ext::chain::ChainInput;
use toolgraft::ext::{
    Batch, BatchInput, BatchItem, Cache, CacheParams, Chain, OutputSchema, Trace,
};
use toolgraft::prelude::*;

use crate::common::Shout;

/// A `shout` whose body counts its runs.
fn counted(
    name: &str,
) -> (
    impl BaseTool<Input = Shout, Output = String>,
    Arc<AtomicUsize>,
) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let tool = Tool::builder()
        .name(name)
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

fn items() -> BatchInput<Shout> {
    BatchInput::sequential(vec![Shout::new("a"), Shout::new("a"), Shout::new("b")])
}

fn texts(slots: Vec<BatchItem<String>>) -> Vec<String> {
    slots.into_iter().map(|slot| slot.ok().unwrap()).collect()
}

#[tokio::main(flavor = "current_thread")]
#[test]
async fn batch_items_get_the_params_given_by_type() {
    let (shout, runs) = counted("shout");
    let toolset = Toolset::new();
    let (batched,) = toolset
        .bind((shout.combo().with(Cache::default()).with(Batch::default()),))
        .unwrap();

    // No params: the cache answers the second `a`.
    assert_eq!(texts(batched.call(items()).await.unwrap()), ["a", "a", "b"]);
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // `exp: 0` on the items: the cache refuses it (a caller cannot switch the
    // cache off), so the params reached it; nothing runs.
    let refused = batched
        .params(CacheParams { exp: Some(0.0) })
        .call(items())
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("exp"), "{refused}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // By name, the same params in each item: the same effect.
    let args = json!({"items": [
        {"text": "a", "exp": 0}, {"text": "a", "exp": 0}, {"text": "b", "exp": 0},
    ]});
    let by_name = toolset.call("shout_cache_batch", args).await.unwrap_err();
    assert!(by_name.to_string().contains("exp"), "{by_name}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::main(flavor = "current_thread")]
#[test]
async fn every_item_gets_its_own_copy_and_the_json_path_agrees() {
    let (shout, runs) = counted("shout");
    let toolset = Toolset::new();
    let (batched,) = toolset
        .bind((shout.combo().with(Cache::default()).with(Batch::default()),))
        .unwrap();
    // A TTL the cache refuses: every slot carries the refusal, so every item got
    // the params (not only the first or the last).
    let typed = batched
        .params(CacheParams { exp: Some(-1.0) })
        .call(items().with_keep_going())
        .await
        .unwrap();
    let errors: Vec<String> = typed
        .iter()
        .map(|slot| match slot {
            BatchItem::Err(error) => error.to_string(),
            BatchItem::Ok(value) => panic!("an item ran: {value}"),
        })
        .collect();
    assert_eq!(errors.len(), 3);
    assert!(
        errors.iter().all(|error| error.contains("exp")),
        "{errors:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    let args = json!({"fail_fast": false, "items": [
        {"text": "a", "exp": -1}, {"text": "a", "exp": -1}, {"text": "b", "exp": -1},
    ]});
    let by_name = toolset.call("shout_cache_batch", args).await.unwrap();
    assert_eq!(by_name, serde_json::to_value(&typed).unwrap());
}

#[tokio::main(flavor = "current_thread")]
#[test]
async fn params_flow_through_layers_on_both_sides_of_a_batch() {
    let (shout, runs) = counted("shout");
    let toolset = Toolset::new();
    // A trace above the batch and one between it and the cache: the params pass
    // both. An empty batch takes them too (no item runs, nothing is left over).
    let (branch,) = toolset
        .bind((shout
            .combo()
            .with(Cache::default())
            .with(Trace)
            .with(Batch::default())
            .with(Trace),))
        .unwrap();
    branch.call(items()).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // An `exp` the cache refuses: the refusal says the params reached it.
    let params = CacheParams { exp: Some(0.0) };
    let refused = branch
        .params(params.clone())
        .call(items())
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("exp"), "{refused}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let none = branch
        .params(params)
        .call(BatchInput::<Shout>::sequential(vec![]))
        .await
        .unwrap();
    assert!(none.is_empty());

    // The whole input, hand-assembled, is still accepted as is.
    let whole = BatchInput::sequential(vec![WithParams::new(
        CacheParams { exp: Some(0.0) },
        Shout::new("a"),
    )]);
    let refused = branch.call(whole).await.unwrap_err();
    assert!(refused.to_string().contains("exp"), "{refused}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::main(flavor = "current_thread")]
#[test]
async fn batches_of_batches_get_them_at_every_level() {
    let (shout, runs) = counted("shout");
    let (branch,) = Toolset::new()
        .bind((shout
            .combo()
            .with(Cache::default())
            .with(Batch::default())
            .with(Batch::default()),))
        .unwrap();
    let nested = || BatchInput::sequential(vec![items(), items()]);
    branch.call(nested()).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // An `exp` the cache refuses reaches it through both batches.
    let refused = branch
        .params(CacheParams { exp: Some(0.0) })
        .call(nested())
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("exp"), "{refused}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::main(flavor = "current_thread")]
#[test]
async fn a_chain_first_call_gets_them() {
    let (next, _) = counted("next");
    let toolset = Toolset::new();
    // The next tool takes an arguments object: the first one returns one.
    let runs = Arc::new(AtomicUsize::new(0));
    let lookup = Tool::builder()
        .name("lookup")
        .description("Look the text up.")
        .read_only()
        .body({
            let runs = runs.clone();
            move |input: Shout| {
                runs.fetch_add(1, Ordering::SeqCst);
                std::future::ready(Ok(json!({"text": input.text})))
            }
        })
        .build()
        .unwrap();
    let (chained,) = toolset
        .bind((lookup
            .combo()
            .with(Cache::default())
            .with(Chain::new(&toolset)),))
        .unwrap();
    toolset.bind((next.combo(),)).unwrap();
    let call = || ChainInput::new(Shout::new("a"), "next");
    for _ in 0..2 {
        assert_eq!(chained.call(call()).await.unwrap(), json!("a"));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // An `exp` the cache refuses: the refusal says the params reached it.
    let refused = chained
        .params(CacheParams { exp: Some(0.0) })
        .call(call())
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("exp"), "{refused}");
    let by_name = toolset
        .call(
            "lookup_cache_chain",
            json!({"text": "a", "exp": 0, "next_tool": "next"}),
        )
        .await
        .unwrap_err();
    assert!(by_name.to_string().contains("exp"), "{by_name}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::main(flavor = "current_thread")]
#[test]
async fn output_schema_keeps_the_layer_input_so_they_pass() {
    let (shout, runs) = counted("shout");
    let (branch,) = Toolset::new()
        .bind((shout
            .combo()
            .with(Cache::default())
            .with(OutputSchema::new(json!({"type": "string"})).unwrap()),))
        .unwrap();
    for _ in 0..2 {
        let out: Value = branch.call(Shout::new("a")).await.unwrap();
        assert_eq!(out, json!("a"));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let refused = branch
        .params(CacheParams { exp: Some(0.0) })
        .call(Shout::new("a"))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("exp"), "{refused}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
