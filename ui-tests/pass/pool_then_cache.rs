// `[pool, cache]`: an extension without body locality may sit outside a backend (it
// then runs in the calling process).
use toolgraft::ext::{Cache, Pool};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

#[tokio::main]
async fn main() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text.to_uppercase()) })
        .build()
        .unwrap();
    let pool = Pool::new(1).unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((shout.combo().with(pool.clone()).with(Cache::default()),))
        .unwrap();
    for _ in 0..2 {
        let out = toolset
            .call("shout_pool_cache", serde_json::json!({"text": "hi"}))
            .await
            .unwrap();
        assert_eq!(out, serde_json::json!("HI"));
    }
    assert_eq!(pool.jobs_started(), 1);
}
