//! `submit` over a layer that is not a `remote` branch does not compile.
use toolgraft::prelude::*;
use toolgraft::ext::Trace;
use toolgraft_jobs::Submit;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn main() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text, loud.")
        .body(|i: Shout| async move { Ok(i.text.to_uppercase()) })
        .build()
        .unwrap();
    let _ = shout.combo().with(Trace).with(Submit::new());
}
