//! `Tool::builder()`: fields in any order, the last setting of a field wins, the
//! name is checked at `build`, and what a body may return (its error converted by
//! `?`, a ready future, an `async fn`). The mistakes are compile errors, held by
//! `ui-tests/fail/tool_*.rs`.

use toolgraft::error::BoxError;
use toolgraft::{Stack, Tool, ToolError};

use crate::common::Shout;

#[tokio::test]
async fn fields_are_set_in_any_order_and_the_last_setting_wins() {
    let tool = Tool::builder()
        .body(|input: Shout| async move { Ok(input.text.to_uppercase()) })
        .description("First description.")
        .read_only()
        .name("first")
        .name("loud")
        .description("Return the text, loud.")
        .build()
        .unwrap();
    assert_eq!(tool.spec().name, "loud");
    assert_eq!(tool.spec().description, "Return the text, loud.");
    assert_eq!(tool.call(Shout::new("hi")).await.unwrap(), "HI");
}

#[test]
fn the_name_is_checked_when_the_tool_is_built() {
    let built = Tool::builder()
        .name("not a name")
        .description("Return the text.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text) })
        .build();
    assert!(built.is_err());
}

#[tokio::test]
async fn a_body_converts_its_errors_with_question_mark_and_may_be_an_async_fn() {
    let parse = Tool::builder()
        .name("parse")
        .description("Parse a number.")
        .read_only()
        .body(|input: Shout| async move {
            let n: u32 = input.text.parse()?;
            Ok(n)
        })
        .build()
        .unwrap();
    assert_eq!(parse.call(Shout::new("7")).await.unwrap(), 7);
    let err = parse.call(Shout::new("seven")).await.unwrap_err();
    assert!(
        matches!(err, ToolError::Body { ref source, .. } if source.to_string().contains("invalid digit")),
        "{err}"
    );

    async fn echo(input: Shout) -> Result<String, BoxError> {
        Ok(input.text)
    }
    let echo = Tool::builder()
        .name("echo")
        .description("Return the text.")
        .read_only()
        .body(echo)
        .build()
        .unwrap();
    assert_eq!(echo.call(Shout::new("hi")).await.unwrap(), "hi");
}
