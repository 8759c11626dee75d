// A tool built without one of its required fields.
use toolgraft::Tool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn main() {
    let _shout = Tool::builder()
        .name("shout")
        .body(|input: Shout| async move { Ok(input.text) })
        .build();
}
