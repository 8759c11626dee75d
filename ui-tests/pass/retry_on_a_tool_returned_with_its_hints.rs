// The fix the note of `retry_on_a_tool_returned_as_impl_base_tool` names: the
// return type shows the hints, and the retry binds.
use toolgraft::ext::Retry;
use toolgraft::prelude::*;
use toolgraft::tool::{Hinted, ReadOnly};

#[derive(Clone, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

fn search() -> impl BaseTool<Input = Query, Output = String> + Hinted<Hints = ReadOnly> {
    Tool::builder()
        .name("search")
        .description("Search.")
        .read_only()
        .body(|query: Query| async move { Ok(query.text) })
        .build()
        .unwrap()
}

fn main() {
    let _combo = search().combo().with(Retry::default());
}
