// `.params(..)` takes the reserved params of a wrapper in the branch's combo: a
// type that no layer reserves (here a cache's, on a branch without a cache; then a
// proxy's, on a branch with a cache only) is refused where it is passed, and the
// message names the branch's whole input, not the core input inside it.
use toolgraft::ext::{Cache, CacheParams, ProxyParams, Trace};
use toolgraft::{Tool, Toolset};

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn main() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let (traced, cached) = Toolset::new()
        .bind((
            shout.combo().with(Trace),
            shout.combo().with(Cache::default()).with(Trace),
        ))
        .unwrap();
    let _call = traced.params(CacheParams { exp: Some(60.0) });
    let _call = cached.params(ProxyParams::default());
}
