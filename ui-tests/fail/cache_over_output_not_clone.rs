// `cache` hands out a clone of a stored result: an output that is not `Clone`
// cannot be cached, and the message should say `Clone` and the fix.
use toolgraft::ext::Cache;
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Hits {
    titles: Vec<String>,
}

fn main() {
    let search = Tool::builder()
        .name("search")
        .description("Search the index.")
        .body(|input: Query| async move {
            Ok(Hits {
                titles: vec![input.text],
            })
        })
        .build()
        .unwrap();
    let _combo = search.combo().with(Cache::default());
}
