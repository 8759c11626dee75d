// A body whose error is not `BoxError`: one error, at `.body(..)`, that says what a
// body yields and how to convert. The same holds for an rmcp handler's
// `Result<String, rmcp::ErrorData>` (the core crate does not depend on rmcp, so a
// local error type that is no `std::error::Error` stands in for it here).
use toolgraft::Tool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

#[derive(Debug)]
struct NotFound;

fn main() {
    let _shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| async move { Ok::<String, NotFound>(input.text) })
        .build();
}
