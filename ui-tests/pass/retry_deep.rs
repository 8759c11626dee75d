// A typed `retry` deeper than `SEGMENT` (8) layers, where the layers below it are
// closed into a `Segment`: the segment carries its base tool's hints, so the retry
// compiles on a read-only tool, on an idempotent one, on a tool returned with its
// hints shown, over a backend, after an early `.segment()`, and across two
// segments; and it runs.
use toolgraft::ext::{Pool, Retry, Trace};
use toolgraft::prelude::*;
use toolgraft::tool::{Hinted, ReadOnly};

#[derive(Clone, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

fn search() -> impl BaseTool<Input = Query, Output = String> + Hinted<Hints = ReadOnly> {
    Tool::builder()
        .name("f")
        .description("Search.")
        .read_only()
        .body(|query: Query| async move { Ok(query.text) })
        .build()
        .unwrap()
}

async fn run() {
    let read_only = Tool::builder()
        .name("s")
        .description("Search.")
        .read_only()
        .body(|query: Query| async move { Ok(query.text) })
        .build()
        .unwrap();
    let idempotent = Tool::builder()
        .name("p")
        .description("Put.")
        .idempotent()
        .body(|query: Query| async move { Ok(query.text) })
        .build()
        .unwrap();
    // Nine layers: the eight traces are a segment under the retry.
    let ninth = read_only
        .combo()
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Retry::default());
    // Two segments under the retry, on an idempotent tool.
    let seventeenth = idempotent
        .combo()
        .with(Retry::default())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Retry::default());
    // A backend in the segment, and a base returned as `impl BaseTool` with its hints.
    let pooled = search()
        .combo()
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Pool::new(1).unwrap())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Retry::default());
    // A segment closed early.
    let early = read_only.combo().with(Trace).segment().with(Retry::default());
    let toolset = Toolset::new();
    let (ninth, seventeenth, pooled, early) = toolset
        .bind((ninth, seventeenth, pooled, early))
        .unwrap();
    assert_eq!(ninth.name(), "s_trace_trace_trace_trace_trace_trace_trace_trace_retry");
    // `s` and its 9 branches, and `s_trace_retry`; `p` and 17; `f` and 9.
    assert_eq!(toolset.names().len(), 11 + 18 + 10);
    for branch in [&ninth, &early] {
        let answer = branch.call(Query { text: "hi".into() }).await.unwrap();
        assert_eq!(answer, "hi");
    }
    assert_eq!(seventeenth.call(Query { text: "hi".into() }).await.unwrap(), "hi");
    assert_eq!(pooled.call(Query { text: "hi".into() }).await.unwrap(), "hi");
    let by_name = toolset
        .call(seventeenth.name(), serde_json::json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(by_name, serde_json::json!("hi"));
}

fn main() {
    tokio::runtime::Runtime::new().unwrap().block_on(run());
}
