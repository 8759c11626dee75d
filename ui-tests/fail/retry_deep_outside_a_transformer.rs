// A `retry` deeper than `SEGMENT` (8) layers, over a segment that holds a
// transformer: the segment's branch is a new tool whose hints say nothing, so the
// retry is refused though the tool is read-only, as right outside the transformer.
use toolgraft::ext::{Batch, Retry, Trace};
use toolgraft::prelude::*;

#[derive(Clone, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

fn main() {
    let search = Tool::builder()
        .name("search")
        .description("Search.")
        .read_only()
        .body(|query: Query| async move { Ok(query.text) })
        .build()
        .unwrap();
    let _combo = search
        .combo()
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Retry::default());
}
