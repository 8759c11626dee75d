// A branch is never the target of a combo: `.combo()` exists on base tools only.
use toolgraft::ext::{Proxy, Trace};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
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
    let toolset = Toolset::new();
    let (traced,) = toolset
        .bind((fetch.combo().with(Trace),))
        .unwrap();
    let _ = traced.combo().with(Proxy::allow(["egress-eu"]));
}
