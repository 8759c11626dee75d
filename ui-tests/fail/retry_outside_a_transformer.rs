// A transformer's branch is a new tool whose hints say nothing of its side effects
// (a batch calls its layer many times): a `retry` outside it is refused, even
// over a read-only tool, and the note says to place it inside.
use toolgraft::ext::{Batch, Retry};
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
    let _combo = search.combo().with(Batch::default()).with(Retry::default());
}
