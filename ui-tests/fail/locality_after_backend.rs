// A body-locality extension directly after (outside) a backend.
use toolgraft::ext::{Pool, Proxy};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Fetch {
    url: String,
}

fn main() {
    let fetch = Tool::builder()
        .name("fetch")
        .description("Fetch a page.")
        .body(|input: Fetch| async move { Ok(input.url) })
        .build()
        .unwrap();
    let _combo = fetch
        .combo()
        .with(Pool::new(1).unwrap())
        .with(Proxy::allow(["egress-eu"]));
}
