// A plain closure, not an async one: one error, at `.body(..)`, that says a body
// is async and how to write one.
use toolgraft::Tool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn main() {
    let _shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| Ok(input.text))
        .build();
}
