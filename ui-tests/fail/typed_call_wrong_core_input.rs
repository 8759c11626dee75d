// A typed call takes the core input (what the base tool, or the transformer
// nearest the top, takes), every reserved param at its `Default`: another type is
// refused where it is passed, and the message says which input the call takes.
use toolgraft::ext::{Cache, Trace};
use toolgraft::{Tool, Toolset};

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Whisper {
    text: String,
}

fn main() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let (cached,) = Toolset::new()
        .bind((shout.combo().with(Cache::default()).with(Trace),))
        .unwrap();
    let _call = cached.call(Whisper {
        text: "hi".to_owned(),
    });
}
