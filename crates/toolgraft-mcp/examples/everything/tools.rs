//! The suite's tools as toolgraft tools, the rmcp fixtures imported beside
//! them, and the combos and published names the server serves them through.

use std::error::Error;
use std::time::Duration;

use rmcp::model::{ContentBlock, LoggingLevel, LoggingMessageNotificationParam, ResourceContents};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgraft::context::{self, Progress};
use toolgraft::error::{BoxError, InvalidName};
use toolgraft::ext::approve::{Approve, SealKey};
use toolgraft::ext::{Pool, Timeout};
use toolgraft::prelude::*;
use toolgraft::runtime::DynTool;
use toolgraft::toolset::Publish;
use toolgraft_mcp::call::McpCall;
use toolgraft_mcp::{McpContent, import};

use crate::author::RED_PIXEL_PNG;
use crate::fixtures::Fixtures;

/// A tool that takes no arguments.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct NoArgs {}

/// Every tool of the suite, bound and published under the names it calls.
pub fn toolset() -> Result<Toolset, Box<dyn Error>> {
    let toolset = Toolset::new();
    let fixtures = import::tools(Fixtures::tool_router(), Fixtures)?;
    toolset.bind(fixtures.iter().map(|tool| tool.combo()).collect::<Vec<_>>())?;
    let asking = crate::mrtr::tools()?;
    toolset.bind(asking.iter().map(|tool| tool.combo()).collect::<Vec<_>>())?;
    let changes = toolset.downgrade();
    toolset.bind((
        simple_text()?
            .combo()
            .with(Timeout::new(Duration::from_secs(10))),
        // Its progress comes from a worker thread of the pool.
        progress()?.combo().with(Pool::new(2)?),
        embedded_resource()?.combo(),
        mixed_content()?.combo(),
        error()?.combo(),
        logging()?.combo(),
        reconnection()?.combo(),
        // Its `_timeout` branch is published and withdrawn in turn by each call.
        trigger_tool_change(changes)?
            .combo()
            .with(Timeout::new(Duration::from_secs(10))),
        json_schema_2020_12()?.combo(),
        // Runs on a pool thread once the caller's user approves.
        wipe()?
            .combo()
            .with(Pool::new(1)?)
            .with(Approve::new(approval_key()?)),
    ))?;
    let trigger = "test_trigger_tool_change";
    toolset
        .edit()
        .publish(trigger, Publish::only([(trigger, trigger)])?)
        .commit()?;
    // The tasks scenarios': what must wait runs on pool threads.
    toolset.bind((
        crate::tasks::greet()?.combo(),
        crate::tasks::slow_compute()?.combo().with(Pool::new(4)?),
        crate::tasks::failing_job()?.combo().with(Pool::new(2)?),
        crate::tasks::protocol_error_job()?.combo(),
        crate::tasks::confirm_delete()?.combo().with(Pool::new(2)?),
        crate::tasks::multi_input()?.combo().with(Pool::new(2)?),
        crate::tasks::tool_with_task()?.combo(),
    ))?;
    // Clients call the suite's names and are served by the branches.
    toolset
        .edit()
        .publish(
            "test_simple_text",
            Publish::only([("test_simple_text", "test_simple_text_timeout")])?,
        )
        .publish("wipe", Publish::only([("wipe", "wipe_pool_approve")])?)
        .publish(
            "slow_compute",
            Publish::only([("slow_compute", "slow_compute_pool")])?,
        )
        .publish(
            "failing_job",
            Publish::only([("failing_job", "failing_job_pool")])?,
        )
        .publish(
            "confirm_delete",
            Publish::only([("confirm_delete", "confirm_delete_pool")])?,
        )
        .publish(
            "multi_input",
            Publish::only([("multi_input", "multi_input_pool")])?,
        )
        .publish(
            "test_tool_with_progress",
            Publish::only([("test_tool_with_progress", "test_tool_with_progress_pool")])?,
        )
        .commit()?;
    Ok(toolset)
}

/// The key approvals are sealed with: `TOOLGRAFT_APPROVAL_KEY` (32 bytes or
/// more, the same on every replica), or one of this process's own.
fn approval_key() -> Result<SealKey, Box<dyn Error>> {
    Ok(match std::env::var("TOOLGRAFT_APPROVAL_KEY") {
        Ok(key) => SealKey::new(key.into_bytes())?,
        Err(_) => SealKey::random()?,
    })
}

/// The disk to wipe.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Wipe {
    /// Its name, as `sda`.
    pub disk: String,
}

/// `wipe {disk}`, which the caller's user approves first (`approve`), on a pool
/// thread.
fn wipe() -> Result<impl BaseTool<Input = Wipe> + Clone, InvalidName> {
    Tool::builder()
        .name("wipe")
        .description("Wipe a disk (pretend).")
        .body(|wipe: Wipe| async move {
            let thread = std::thread::current().name().unwrap_or("?").to_owned();
            Ok(format!("wiped {} on {thread}", wipe.disk))
        })
        .build()
}

fn simple_text() -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("test_simple_text")
        .description("Returns a text.")
        .annotations(read_only())
        .body(|_: NoArgs| async { Ok("This is a simple text response for testing.") })
        .build()
}

fn progress() -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("test_tool_with_progress")
        .description("Reports its progress, from a worker thread.")
        .body(|_: NoArgs| async {
            for (done, step) in [(0.0, "Starting"), (50.0, "Halfway"), (100.0, "Complete")] {
                context::report_progress(Progress::new(done).with_total(100.0).with_message(step));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let thread = std::thread::current();
            Ok(format!(
                "Progress test completed on {}",
                thread.name().unwrap_or("a worker")
            ))
        })
        .build()
}

fn embedded_resource() -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("test_embedded_resource")
        .description("Returns an embedded resource.")
        .annotations(read_only())
        .body(|_: NoArgs| async {
            Ok(McpContent::new(vec![text_resource(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            )]))
        })
        .build()
}

fn mixed_content() -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("test_multiple_content_types")
        .description("Returns a text, an image and a resource.")
        .annotations(read_only())
        .body(|_: NoArgs| async {
            Ok(McpContent::new(vec![
                ContentBlock::text("Multiple content types test:"),
                ContentBlock::image(RED_PIXEL_PNG, "image/png"),
                text_resource(
                    "test://mixed-content-resource",
                    "application/json",
                    r#"{"test":"data","value":123}"#,
                ),
            ]))
        })
        .build()
}

fn error() -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("test_error_handling")
        .description("Always fails.")
        .body(|_: NoArgs| async {
            Err::<String, BoxError>("This tool intentionally returns an error for testing".into())
        })
        .build()
}

#[allow(deprecated)] // Logging is what clients show, though the newest protocol drops it.
fn logging() -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("test_tool_with_logging")
        .description("Logs three messages to the client while it runs.")
        .body(|_: NoArgs| async {
            let call = McpCall::current().ok_or("not called over MCP: no client to log to")?;
            for text in [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ] {
                let message = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(text))
                    .with_logger("everything");
                call.peer().notify_logging_message(message).await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok("Logging test completed")
        })
        .build()
}

fn reconnection() -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("test_reconnection")
        .description("Answers after a moment.")
        .body(|_: NoArgs| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok("Reconnection test completed")
        })
        .build()
}

/// Publishes its `_timeout` branch beside its own name, or withdraws it, in
/// turn: a change of what every client is shown, which every client
/// subscribed to tool changes hears of (a change that shows no client anything
/// new is told to none).
fn trigger_tool_change(
    toolset: toolgraft::toolset::WeakToolset,
) -> Result<impl BaseTool<Input = NoArgs> + Clone, InvalidName> {
    Tool::builder()
        .name("test_trigger_tool_change")
        .description("Changes the tool list, so subscribers are told.")
        .body(move |_: NoArgs| {
            let toolset = toolset.upgrade();
            async move {
                let toolset = toolset.ok_or("the server is shutting down")?;
                let name = "test_trigger_tool_change";
                let publish = match toolset.is_published("test_trigger_tool_change_timeout") {
                    true => Publish::only([(name, name)])?,
                    false => Publish::All,
                };
                toolset.edit().publish(name, publish).commit()?;
                Ok("Tool list change triggered")
            }
        })
        .build()
}

/// A tool whose input schema uses JSON Schema 2020-12 (`$defs`, `$anchor`,
/// `allOf`, `if`/`then`/`else`), which a run-time tool takes as it is written.
fn json_schema_2020_12() -> Result<DynTool, InvalidName> {
    let schema = schemars::json_schema!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            },
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false,
    });
    DynTool::builder()
        .name("json_schema_2020_12_tool")
        .description("Greets, with an input schema of JSON Schema 2020-12.")
        .input_schema(schema)
        .body(|args| async move {
            let name = args.get("name").and_then(Value::as_str).unwrap_or("world");
            Ok(json!(format!("Hello, {name}!")))
        })
        .build()
}

fn text_resource(uri: &str, mime_type: &str, text: &str) -> ContentBlock {
    ContentBlock::resource(ResourceContents::TextResourceContents {
        uri: uri.into(),
        mime_type: Some(mime_type.into()),
        text: text.into(),
        meta: None,
    })
}

fn read_only() -> toolgraft::tool::Annotations {
    toolgraft::tool::Annotations {
        read_only: Some(true),
        ..Default::default()
    }
}
