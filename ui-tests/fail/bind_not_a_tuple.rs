// `Toolset::bind` takes a tuple of combos: one combo alone needs `(combo,)`.
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
    let _ = toolset.bind(shout.combo().with(Trace));
}
