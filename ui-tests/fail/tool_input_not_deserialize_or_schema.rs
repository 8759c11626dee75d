// A tool's input must be `Deserialize` (arguments are decoded into it) and
// `JsonSchema` (its schema is what a model reads): one error per tool, at
// `.body(..)`, naming the one missing.
use toolgraft::Tool;

#[derive(schemars::JsonSchema)]
struct NoDeserialize {
    text: String,
}

#[derive(serde::Deserialize)]
struct NoSchema {
    text: String,
}

fn main() {
    let _first = Tool::builder()
        .name("first")
        .description("Return the text.")
        .body(|input: NoDeserialize| async move { Ok(input.text) })
        .build();
    let _second = Tool::builder()
        .name("second")
        .description("Return the text.")
        .body(|input: NoSchema| async move { Ok(input.text) })
        .build();
}
