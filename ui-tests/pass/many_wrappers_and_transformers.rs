// Wrappers and transformers are `multiple`: any number of them, in any order.
use toolgraft::ext::{Batch, Cache, Trace};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Square {
    n: i64,
}

#[tokio::main]
async fn main() {
    let square = Tool::builder()
        .name("square")
        .description("Square a number.")
        .read_only()
        .body(|input: Square| async move { Ok(input.n * input.n) })
        .build()
        .unwrap();
    let combo = square
        .combo()
        .with(Trace)
        .with(Cache::default())
        .with(Batch::default())
        .with(Trace)
        .with(Batch::default())
        .with(Trace);
    assert_eq!(combo.name(), "square_trace_cache_batch_trace_batch_trace");
    let toolset = Toolset::new();
    toolset.bind((combo,)).unwrap();
    assert_eq!(toolset.names().len(), 7);
    let out = toolset
        .call(
            "square_trace_cache_batch_trace_batch",
            serde_json::json!({"items": [{"items": [{"n": 2}, {"n": 3}]}]}),
        )
        .await
        .unwrap();
    assert_eq!(out, serde_json::json!([[4, 9]]));
}
