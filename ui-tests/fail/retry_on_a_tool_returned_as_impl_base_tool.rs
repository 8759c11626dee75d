// A tool returned as `impl BaseTool<..>` hides the hints its builder said: a
// `retry` on it is refused though the tool is read-only, and the note says how
// to show them in the return type.
use toolgraft::ext::Retry;
use toolgraft::prelude::*;

#[derive(Clone, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

fn search() -> impl BaseTool<Input = Query, Output = String> {
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
