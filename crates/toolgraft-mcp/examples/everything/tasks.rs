//! The tasks scenarios' tools (SEP-2663), and which of their names a task
//! carries: the relocated ones (`slow_compute`, `confirm_delete`,
//! `multi_input`, `failing_job` run on a pool thread) by default, and the ones
//! [`policy`] names.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::ContentBlock;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgraft::context::{self, Asker, InputRequest, InputRequired, Question};
use toolgraft::error::{BoxError, InvalidName};
use toolgraft::prelude::*;
use toolgraft_mcp::McpContent;
use toolgraft_mcp::task::{TaskSettingError, Tasks};

use crate::mrtr::{accepted, accepted_text};
use crate::tools::NoArgs;

/// Tasks for the relocated names, and for the ones that are not relocated but
/// take a task all the same.
pub fn policy() -> Result<Tasks, TaskSettingError> {
    Ok(Tasks::new()
        .with_poll_interval(Duration::from_millis(100))?
        .require("failing_job")
        .require("test_tool_with_task")
        .allow("protocol_error_job"))
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Greet {
    /// Whom to greet.
    pub name: String,
}

/// `greet {name}`: answered at once, never a task.
pub fn greet() -> Result<impl BaseTool<Input = Greet> + Clone, InvalidName> {
    Tool::builder()
        .name("greet")
        .description("Greets by name.")
        // Content, not a structured string: the text is the greeting itself.
        .body(|greet: Greet| async move {
            let text = format!("Hello, {}!", greet.name);
            Ok(McpContent::new(vec![ContentBlock::text(text)]))
        })
        .build()
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Compute {
    /// How long to work, in seconds (0 to 60).
    pub seconds: f64,
    /// A label to answer with.
    #[serde(default)]
    pub label: Option<String>,
}

/// `slow_compute {seconds, label}`: works that long, on a pool thread.
pub fn slow_compute() -> Result<impl BaseTool<Input = Compute> + Clone, InvalidName> {
    Tool::builder()
        .name("slow_compute")
        .description("Works for some seconds, then answers.")
        .body(|compute: Compute| async move {
            if !(0.0..=60.0).contains(&compute.seconds) {
                return Err::<String, BoxError>("seconds must be 0 to 60".into());
            }
            tokio::time::sleep(Duration::from_secs_f64(compute.seconds)).await;
            let label = compute.label.unwrap_or_default();
            Ok(format!("computed `{label}` in {} s", compute.seconds))
        })
        .build()
}

/// `failing_job`: fails as a tool after a second (a result with `isError`).
pub fn failing_job() -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("failing_job")
        .description("Fails, after a second.")
        .body(|_: NoArgs| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Err::<String, BoxError>("the job failed, as it always does".into())
        })
        .build()
}

/// `protocol_error_job`: fails with a protocol error after a moment.
pub fn protocol_error_job() -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("protocol_error_job")
        .description("Fails with a protocol error, after a moment.")
        .body(|_: NoArgs| async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Err::<String, BoxError>(ErrorData::internal_error("the job broke down", None).into())
        })
        .build()
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Delete {
    /// The file to delete (pretend). Optional: the suite calls the first tool
    /// listed, this one, without arguments.
    #[serde(default = "Delete::default_file")]
    pub filename: String,
}

impl Delete {
    fn default_file() -> String {
        "notes.txt".to_owned()
    }
}

/// `confirm_delete {filename}`: asks the caller's user first, on a pool thread.
pub fn confirm_delete() -> Result<impl BaseTool<Input = Delete> + Clone, InvalidName> {
    Tool::builder()
        .name("confirm_delete")
        .description("Deletes a file (pretend) once the user confirms.")
        .body(|delete: Delete| async move {
            let asker = context::get::<Asker>().ok_or("nobody to ask")?;
            match accepted(&asker, "confirm") {
                Some(fields) if fields.get("confirm") == Some(&json!(true)) => {
                    Ok(format!("deleted {}", delete.filename))
                }
                Some(_) => Ok(format!("kept {}", delete.filename)),
                None => Err(InputRequired::new(
                    [(
                        "confirm".to_owned(),
                        confirm(&format!("Delete {}?", delete.filename)),
                    )],
                    None,
                )
                .into()),
            }
        })
        .build()
}

/// `multi_input`: asks two things at once, on a pool thread.
pub fn multi_input() -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("multi_input")
        .description("Asks for a name and a confirmation at once.")
        .body(|_: NoArgs| async move {
            let asker = context::get::<Asker>().ok_or("nobody to ask")?;
            if let (Some(name), Some(_)) = (accepted(&asker, "name"), accepted(&asker, "confirm")) {
                let name = name.get("name").and_then(Value::as_str).unwrap_or("someone");
                return Ok(format!("{name} confirmed"));
            }
            let name = InputRequest::Ask(Question::new(
                "Your name?",
                json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            ));
            Err(InputRequired::new(
                [
                    ("name".to_owned(), name),
                    ("confirm".to_owned(), confirm("Go on?")),
                ],
                None,
            )
            .into())
        })
        .build()
}

/// `test_tool_with_task`: asks for the user's name at once (an input-required
/// result), then works on in a task.
pub fn tool_with_task() -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("test_tool_with_task")
        .description("Asks for a name, then greets it from a task.")
        .body(|_: NoArgs| async move {
            let asker = context::get::<Asker>().ok_or("nobody to ask")?;
            let name = accepted_text(&asker, "user_name", "name");
            let Some(name) = name else {
                let question = InputRequest::Ask(Question::new(
                    "What is your name?",
                    json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
                ));
                return Err(InputRequired::new([("user_name".to_owned(), question)], None).into());
            };
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(format!("Hello, {name}, from a task!"))
        })
        .build()
}

fn confirm(message: &str) -> InputRequest {
    InputRequest::Ask(Question::new(
        message,
        json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}),
    ))
}
