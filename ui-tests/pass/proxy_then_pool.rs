// `[proxy, pool]`: the locality extension sits inside the backend, so it travels
// with the body to the pool's threads.
use toolgraft::ext::{Pool, Proxy, proxy};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Fetch {
    url: String,
}

#[tokio::main]
async fn main() {
    let fetch = Tool::builder()
        .name("fetch")
        .description("Fetch a page.")
        .read_only()
        .body(|input: Fetch| async move {
            Ok(format!("{} via {:?}", input.url, proxy::current_route()))
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((fetch
            .combo()
            .with(Proxy::allow(["egress-eu"]))
            .with(Pool::new(1).unwrap()),))
        .unwrap();
    let page = toolset
        .call("fetch_proxy_pool", serde_json::json!({"url": "/"}))
        .await
        .unwrap();
    assert_eq!(page, serde_json::json!("/ via Some(\"egress-eu\")"));
}
