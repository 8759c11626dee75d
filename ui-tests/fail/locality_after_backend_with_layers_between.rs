// A body-locality extension after a backend, with wrappers and transformers in
// between: the typestate remembers the relocation.
use toolgraft::ext::{Batch, Cache, Pool, Proxy, Trace};
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
        .with(Trace)
        .with(Pool::new(1).unwrap())
        .with(Cache::default())
        .with(Trace)
        .with(Batch::default())
        .with(Proxy::allow(["egress-eu"]));
}
