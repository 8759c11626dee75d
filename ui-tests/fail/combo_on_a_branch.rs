// A branch is never the target of a combo, nor bound again: only combos bind.
use toolgraft::ext::Trace;
use toolgraft::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
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
    let toolset = Toolset::new();
    let (traced,) = toolset
        .bind((shout.combo().with(Trace),))
        .unwrap();
    let _ = toolset.bind((traced,));
}
