//! MCP tasks and input-required results over rmcp's own client, in process: a
//! relocated call followed as a task to its end, cancelled while it runs, parked
//! for input and resumed; a call that asks its caller at once answered with an
//! input-required result; approval inside a task.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rmcp::handler::server::tool::{InputResponses as Responses, RequestState};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ErrorCode, GetTaskParams,
    InputRequiredResult, InputResponses, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::{ServerHandler, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgraft::context::{self, Asker, InputRequest, InputRequired, Question};
use toolgraft::ext::approve::{Approve, SealKey};
use toolgraft::ext::{Pool, Timeout};
use toolgraft::prelude::*;
use toolgraft_mcp::ToolsetServer;
use toolgraft_mcp::task::Tasks;

use crate::support::{completed, connect_newest, get, settled, task_of, within};

#[derive(Clone, Deserialize, Serialize, JsonSchema)]
struct Work {
    /// How long, in milliseconds.
    ms: u64,
}

#[derive(Clone, Deserialize, Serialize, JsonSchema)]
struct Nothing {}

/// Drops its flag's hold when the body's future is dropped.
struct Stopped(Arc<AtomicBool>);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn toolset(stopped: Arc<AtomicBool>) -> Toolset {
    let work = Tool::builder()
        .name("work")
        .description("Works for a while.")
        .body(move |work: Work| {
            let stopped = stopped.clone();
            async move {
                let _guard = Stopped(stopped);
                tokio::time::sleep(Duration::from_millis(work.ms)).await;
                Ok(format!("worked {} ms", work.ms))
            }
        })
        .build()
        .unwrap();
    let ask = Tool::builder()
        .name("ask")
        .description("Asks two things, then answers with both.")
        .body(|_: Nothing| async move {
            let asker = context::get::<Asker>().ok_or("nobody to ask")?;
            let name = asker
                .answered("name")
                .and_then(|answered| answered.answer.field("name").cloned());
            let roots = asker.response("roots");
            if let (Some(name), Some(roots)) = (name, roots) {
                return Ok(json!({"name": name, "roots": roots["roots"]}));
            }
            let question = Question::new(
                "Your name?",
                json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            );
            Err(InputRequired::new(
                [
                    ("name".to_owned(), InputRequest::Ask(question)),
                    (
                        "roots".to_owned(),
                        InputRequest::protocol("roots/list", json!({})),
                    ),
                ],
                Some("kept".to_owned()),
            )
            .into())
        })
        .build()
        .unwrap();
    let wipe = Tool::builder()
        .name("wipe")
        .description("Wipes a disk (pretend).")
        .body(|_: Nothing| async { Ok("wiped") })
        .build()
        .unwrap();
    let waits = Tool::builder()
        .name("waits")
        .description("Waits, then says whether its request reads cancelled.")
        .body(|_: Nothing| async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let call = toolgraft_mcp::call::McpCall::current().ok_or("not over MCP")?;
            Ok(json!({"cancelled": call.is_cancelled()}))
        })
        .build()
        .unwrap();
    let rename = Tool::builder()
        .name("rename")
        .description("Renames, asking for the new name.")
        .body(|_: Nothing| async move {
            let asker = context::get::<Asker>().ok_or("nobody to ask")?;
            let name = asker
                .answered("new_name")
                .and_then(|answered| answered.answer.field("name").cloned());
            match (name, asker.state()) {
                (Some(name), Some(state)) if state == "body-state" => Ok(
                    json!({"renamed": name, "approve_seen": asker.answered("approve").is_some()}),
                ),
                _ => {
                    let question = Question::new(
                        "New name?",
                        json!({"type": "object", "properties": {"name": {"type": "string"}}}),
                    );
                    Err(InputRequired::new(
                        [("new_name".to_owned(), InputRequest::Ask(question))],
                        Some("body-state".to_owned()),
                    )
                    .into())
                }
            }
        })
        .build()
        .unwrap();
    let key = SealKey::random().unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((
            rename.combo().with(Approve::new(key.clone())),
            rename
                .combo()
                .with(Pool::new(1).unwrap())
                .with(Approve::new(key)),
            waits.combo(),
            work.combo(),
            work.combo().with(Pool::new(2).unwrap()),
            ask.combo(),
            ask.combo().with(Pool::new(1).unwrap()),
            wipe.combo()
                .with(Pool::new(1).unwrap())
                .with(Approve::new(SealKey::random().unwrap())),
        ))
        .unwrap();
    toolset
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap_or_default())
}

fn server(stopped: Arc<AtomicBool>) -> ToolsetServer {
    let tasks = Tasks::new()
        .with_ttl(Duration::from_secs(60))
        .unwrap()
        .with_poll_interval(Duration::from_millis(50))
        .unwrap()
        .require("ask")
        .allow("waits");
    ToolsetServer::new(toolset(stopped)).with_tasks(tasks)
}

#[tokio::test]
async fn a_relocated_call_is_a_task_the_client_follows_to_its_result() {
    let server = server(Arc::default());
    assert!(server.get_info().capabilities.supports_tasks());
    let client = connect_newest(server, true).await;
    let id = task_of(&client, call("work_pool", json!({"ms": 100}))).await;
    // In the table before the client read its id.
    let working = get(&client, &id).await;
    assert_eq!(working.task.ttl_ms, Some(60_000));
    assert_eq!(working.task.poll_interval_ms, Some(50));
    let result = completed(&client, &id).await;
    assert_eq!(result["structuredContent"], json!("worked 100 ms"));
    assert_ne!(result["isError"], json!(true));

    // A name whose body is not relocated is answered as the call ends.
    let direct = within(
        "calling",
        client.call_tool_once(call("work", json!({"ms": 1}))),
    )
    .await
    .unwrap();
    assert!(
        matches!(direct, CallToolResponse::Complete(_)),
        "{direct:?}"
    );

    // Unknown ids are invalid params; the same error for every one.
    let unknown = client
        .get_task(GetTaskParams::new("0123"))
        .await
        .unwrap_err();
    assert!(unknown.to_string().contains("no task `0123`"), "{unknown}");
}

#[tokio::test]
async fn an_allowed_name_not_relocated_is_a_task_once_it_waits_and_its_request_is_not_cancelled() {
    let client = connect_newest(server(Arc::default()), true).await;
    let id = task_of(&client, call("waits", json!({}))).await;
    let result = completed(&client, &id).await;
    // The tools/call was answered with the task; the call's request is the
    // task's from then on, cancelled only with it.
    assert_eq!(result["structuredContent"], json!({"cancelled": false}));
}

#[tokio::test]
async fn a_client_without_the_extension_has_its_call_answered_and_a_required_name_refused() {
    let client = connect_newest(server(Arc::default()), false).await;
    let answered = within(
        "calling",
        client.call_tool_once(call("work_pool", json!({"ms": 1}))),
    )
    .await
    .unwrap();
    assert!(
        matches!(answered, CallToolResponse::Complete(_)),
        "{answered:?}"
    );
    let refused = client
        .call_tool_once(call("ask", json!({})))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(error) = refused else {
        panic!("a protocol error, not {refused}");
    };
    assert_eq!(error.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
    assert_eq!(
        error.data.unwrap()["requiredCapabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}})
    );
    // And tasks/* are refused to it too (rmcp's gate, on the capability the server advertises).
    let gated = client.get_task(GetTaskParams::new("x")).await.unwrap_err();
    assert!(gated.to_string().contains("-32021"), "{gated}");
}

#[tokio::test]
async fn tasks_cancel_stops_the_relocated_body_and_the_task_reads_cancelled() {
    let stopped = Arc::new(AtomicBool::new(false));
    let client = connect_newest(server(stopped.clone()), true).await;
    let id = task_of(&client, call("work_pool", json!({"ms": 30_000}))).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!stopped.load(Ordering::SeqCst), "running");
    let asked = Instant::now();
    within(
        "tasks/cancel",
        client.cancel_task(CancelTaskParams::new(&id)),
    )
    .await
    .unwrap();
    within("the body to stop", async {
        while !stopped.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    eprintln!(
        "tasks/cancel to the pool body dropped: {:?}",
        asked.elapsed()
    );
    assert_eq!(get(&client, &id).await.status(), TaskStatus::Cancelled);
    // Again: the same empty ack, and still cancelled.
    within(
        "tasks/cancel",
        client.cancel_task(CancelTaskParams::new(&id)),
    )
    .await
    .unwrap();
    assert_eq!(get(&client, &id).await.status(), TaskStatus::Cancelled);
}

fn responses(value: Value) -> InputResponses {
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn a_task_parks_for_input_and_runs_again_once_every_request_is_answered() {
    let client = connect_newest(server(Arc::default()), true).await;
    let id = task_of(&client, call("ask_pool", json!({}))).await;
    let parked = settled(&client, &id).await;
    let TaskPayload::InputRequired { input_requests } = parked.payload else {
        panic!("input required, not {:?}", parked.task.status);
    };
    assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["name", "roots"]);
    let name = json!({"name": {"action": "accept", "content": {"name": "Ada"}}});
    within(
        "tasks/update",
        client.update_task(UpdateTaskParams::new(&id, responses(name))),
    )
    .await
    .unwrap();
    let TaskPayload::InputRequired { input_requests } = get(&client, &id).await.payload else {
        panic!("still waiting for the roots");
    };
    assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["roots"]);
    let roots = json!({"roots": {"roots": [{"uri": "file:///work"}]}});
    within(
        "tasks/update",
        client.update_task(UpdateTaskParams::new(&id, responses(roots))),
    )
    .await
    .unwrap();
    let result = completed(&client, &id).await;
    assert_eq!(
        result["structuredContent"],
        json!({"name": "Ada", "roots": [{"uri": "file:///work"}]})
    );
}

#[tokio::test]
async fn a_call_that_asks_at_once_is_answered_with_an_input_required_result_then_completes() {
    let client = connect_newest(server(Arc::default()), true).await;
    // `ask` is required to be a task, and is not relocated: it asks before it
    // waits, so the question is the call's answer, not a task's.
    let first = within("calling", client.call_tool_once(call("ask", json!({}))))
        .await
        .unwrap();
    let CallToolResponse::InputRequired(needed) = first else {
        panic!("an input-required result, not {first:?}");
    };
    let asked = serde_json::to_value(&needed).unwrap();
    assert_eq!(
        asked["inputRequests"]["name"]["method"],
        "elicitation/create"
    );
    assert_eq!(
        asked["inputRequests"]["name"]["params"]["message"],
        "Your name?"
    );
    assert_eq!(asked["inputRequests"]["roots"]["method"], "roots/list");
    assert_eq!(asked["requestState"], "kept");
    let mut again = call("ask", json!({}));
    again.input_responses = Some(responses(json!({
        "name": {"action": "accept", "content": {"name": "Lin"}},
        "roots": {"roots": []},
    })));
    again.request_state = needed.request_state.clone();
    // Answered: the call goes on, and is a task once it must wait (it need not
    // here: its answer is ready at once).
    let done = within("calling", client.call_tool_once(again))
        .await
        .unwrap();
    let CallToolResponse::Complete(result) = done else {
        panic!("complete, not {done:?}");
    };
    assert_eq!(
        result.structured_content,
        Some(json!({"name": "Lin", "roots": []}))
    );
}

#[tokio::test]
async fn an_approval_inside_a_task_parks_the_task_until_the_user_says_yes() {
    let client = connect_newest(server(Arc::default()), true).await;
    let id = task_of(&client, call("wipe_pool_approve", json!({}))).await;
    let parked = settled(&client, &id).await;
    let TaskPayload::InputRequired { input_requests } = parked.payload else {
        panic!("input required, not {:?}", parked.task.status);
    };
    let question = serde_json::to_value(&input_requests["approve"]).unwrap();
    assert!(
        question["params"]["message"]
            .as_str()
            .unwrap()
            .contains("Tool: wipe_pool_approve"),
        "{question}"
    );
    let yes = json!({"approve": {"action": "accept", "content": {"approve": true}}});
    within(
        "tasks/update",
        client.update_task(UpdateTaskParams::new(&id, responses(yes))),
    )
    .await
    .unwrap();
    let result = completed(&client, &id).await;
    assert_eq!(result["structuredContent"], json!("wiped"));
    // Answering again after the end runs nothing.
    within(
        "tasks/update",
        client.update_task(UpdateTaskParams::new(&id, responses(yes_again()))),
    )
    .await
    .unwrap();
    assert_eq!(get(&client, &id).await.status(), TaskStatus::Completed);

    // A no ends the task with the refusal, as a tool error.
    let id = task_of(&client, call("wipe_pool_approve", json!({}))).await;
    settled(&client, &id).await;
    let no = json!({"approve": {"action": "decline"}});
    within(
        "tasks/update",
        client.update_task(UpdateTaskParams::new(&id, responses(no))),
    )
    .await
    .unwrap();
    let result = completed(&client, &id).await;
    assert_eq!(result["isError"], json!(true));
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("did not approve"),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_body_that_asks_after_an_approval_is_asked_without_the_user_approving_again_and_once() {
    let client = connect_newest(server(Arc::default()), false).await;
    let round = |responses_: Option<Value>, state: Option<String>| {
        let mut params = call("rename_approve", json!({}));
        params.input_responses = responses_.map(responses);
        params.request_state = state;
        params
    };
    let asked = |response: CallToolResponse| match response {
        CallToolResponse::InputRequired(needed) => needed,
        other => panic!("an input-required result, not {other:?}"),
    };
    let first = asked(
        within("1", client.call_tool_once(round(None, None)))
            .await
            .unwrap(),
    );
    assert!(
        first
            .input_requests
            .as_ref()
            .unwrap()
            .contains_key("approve")
    );
    let yes = json!({"approve": {"action": "accept", "content": {"approve": true}}});
    let second = asked(
        within(
            "2",
            client.call_tool_once(round(Some(yes), first.request_state.clone())),
        )
        .await
        .unwrap(),
    );
    // The body's question now, not approve's again.
    let keys: Vec<_> = second
        .input_requests
        .as_ref()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["new_name"]);
    let name = json!({"new_name": {"action": "accept", "content": {"name": "kestrel"}}});
    let third = round(Some(name), second.request_state.clone());
    let done = within("3", client.call_tool_once(third.clone()))
        .await
        .unwrap();
    let CallToolResponse::Complete(result) = done else {
        panic!("complete, not {done:?}");
    };
    // The body saw its own answer and its own state, and nothing of approve's.
    assert_eq!(
        result.structured_content,
        Some(json!({"renamed": "kestrel", "approve_seen": false}))
    );
    // That round again runs nothing: the continuation is spent.
    let replayed = within("3 again", client.call_tool_once(third))
        .await
        .unwrap();
    let CallToolResponse::Complete(replayed) = replayed else {
        panic!("a refusal, not {replayed:?}");
    };
    assert_eq!(replayed.is_error, Some(true));
    assert!(
        replayed.content[0]
            .as_text()
            .unwrap()
            .text
            .contains("used already"),
        "{replayed:?}"
    );
}

#[tokio::test]
async fn in_a_task_an_approval_then_the_body_s_own_question_then_the_result() {
    let client = connect_newest(server(Arc::default()), true).await;
    let id = task_of(&client, call("rename_pool_approve", json!({}))).await;
    settled(&client, &id).await;
    let yes = json!({"approve": {"action": "accept", "content": {"approve": true}}});
    within(
        "tasks/update",
        client.update_task(UpdateTaskParams::new(&id, responses(yes))),
    )
    .await
    .unwrap();
    let parked = settled(&client, &id).await;
    let TaskPayload::InputRequired { input_requests } = parked.payload else {
        panic!("the body's question, not {:?}", parked.task.status);
    };
    // A second round: asked under a key of its own.
    assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["new_name.2"]);
    let name = json!({"new_name.2": {"action": "accept", "content": {"name": "osprey"}}});
    within(
        "tasks/update",
        client.update_task(UpdateTaskParams::new(&id, responses(name))),
    )
    .await
    .unwrap();
    let result = completed(&client, &id).await;
    assert_eq!(
        result["structuredContent"],
        json!({"renamed": "osprey", "approve_seen": false})
    );
}

fn yes_again() -> Value {
    json!({"approve": {"action": "accept", "content": {"approve": true}}})
}

// ------------------------------------------------- an rmcp tool, imported

#[derive(Clone)]
struct Rounds;

#[tool_router]
impl Rounds {
    #[tool(description = "Asks for a color, keeping a state.")]
    async fn color(
        &self,
        Responses(responses): Responses,
        RequestState(state): RequestState,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let color = responses
            .as_ref()
            .and_then(|responses| responses.get("color"))
            .and_then(|answer| answer["content"]["color"].as_str());
        match (color, state.as_deref()) {
            (Some(color), Some("round-1")) => {
                Ok(
                    rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                        format!("you like {color}"),
                    )])
                    .into(),
                )
            }
            _ => {
                let request = serde_json::from_value(json!({
                    "method": "elicitation/create",
                    "params": {"mode": "form", "message": "Color?", "requestedSchema": {
                        "type": "object", "properties": {"color": {"type": "string"}}}},
                }))
                .unwrap();
                Ok(InputRequiredResult::new(
                    Some([("color".to_owned(), request)].into_iter().collect()),
                    Some("round-1".to_owned()),
                )
                .into())
            }
        }
    }
}

#[tokio::test]
async fn an_imported_rmcp_tool_asks_through_the_layers_outside_it_and_gets_its_answers() {
    let imported = toolgraft_mcp::import::tools(Rounds::tool_router(), Rounds).unwrap();
    let toolset = Toolset::new();
    toolset
        .bind(
            imported
                .iter()
                .map(|tool| tool.combo().with(Timeout::new(Duration::from_secs(5))))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let client = connect_newest(ToolsetServer::new(toolset), false).await;
    let first = within(
        "calling",
        client.call_tool_once(call("color_timeout", json!({}))),
    )
    .await
    .unwrap();
    let CallToolResponse::InputRequired(needed) = first else {
        panic!("an input-required result, not {first:?}");
    };
    assert_eq!(needed.request_state.as_deref(), Some("round-1"));
    let mut again = call("color_timeout", json!({}));
    again.input_responses = Some(responses(json!({
        "color": {"action": "accept", "content": {"color": "teal"}},
    })));
    again.request_state = needed.request_state;
    let done = within("calling", client.call_tool_once(again))
        .await
        .unwrap();
    let CallToolResponse::Complete(result) = done else {
        panic!("complete, not {done:?}");
    };
    assert_eq!(result.content[0].as_text().unwrap().text, "you like teal");
}
