// `cache` keys a call by its input serialized: an input that is `Deserialize` and
// `JsonSchema` but not `Serialize` (what an rmcp tool's argument struct usually
// derives) cannot be cached, and the message should say `Serialize` and the fix.
use toolgraft::ext::Cache;
use toolgraft::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

fn main() {
    let search = Tool::builder()
        .name("search")
        .description("Search the index.")
        .body(|input: Query| async move { Ok(input.text) })
        .build()
        .unwrap();
    let _combo = search.combo().with(Cache::default());
}
