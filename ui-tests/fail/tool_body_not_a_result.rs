// A body that yields its output bare, not `Ok(output)`: one error, at `.body(..)`.
use toolgraft::Tool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn main() {
    let _shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| async move { input.text })
        .build();
}
