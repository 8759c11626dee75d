//! The call context under hostile use: a context that arrived with many entries,
//! entries under the names of others, and a wire that does not say what the
//! entries it names are.

use serde_json::{Value, json};
use toolgraft::context::{ChainDepth, Context};
use toolgraft::relocation::WireContext;

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
