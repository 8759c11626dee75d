// `.params(..)` takes the reserved params of a wrapper in the branch's combo: a
// type that no layer reserves (here a cache's, on a branch without a cache) is
// refused where it is passed.
use toolgraft::ext::{CacheParams, Trace};
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
    let (traced,) = Toolset::new().bind((shout.combo().with(Trace),)).unwrap();
    let _call = traced.params(CacheParams { exp: Some(60.0) });
}
