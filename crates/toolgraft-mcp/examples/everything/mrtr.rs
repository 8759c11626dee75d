//! The input-required scenarios' tools (SEP-2322), written against toolgraft's
//! own API: a body asks its caller by failing with an [`InputRequired`] (several
//! requests at once, a state for the round trip), and the call comes back with
//! the responses ([`Asker::response`], [`Asker::answered`]) and the state
//! ([`Asker::state`]). What a body keeps in the state it seals: the client
//! echoes it, and may change it.

use std::sync::LazyLock;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use toolgraft::context::{self, Answer, Asker, InputRequest, InputRequired, Question};
use toolgraft::error::{BoxError, InvalidName};
use toolgraft::runtime::DynTool;

/// The key of this process's round-trip states (a fleet would share one).
static STATES: LazyLock<RequestStateCodec> = LazyLock::new(|| {
    let mut key = [0_u8; 32];
    getrandom::fill(&mut key).expect("the system's random source");
    RequestStateCodec::new(key.to_vec())
});

/// How long a round trip may take.
const STATE_TTL: Duration = Duration::from_secs(600);

/// What a multi-round tool keeps between rounds.
#[derive(Serialize, Deserialize)]
struct Round {
    round: u32,
    #[serde(default)]
    name: Option<String>,
}

/// Every tool of the input-required scenarios.
pub fn tools() -> Result<Vec<DynTool>, InvalidName> {
    Ok(vec![
        tool(
            "test_input_required_result_elicitation",
            "Greets the user by the name it asks for.",
            elicitation,
        )?,
        tool(
            "test_input_required_result_sampling",
            "Asks the client's model a question.",
            sampling,
        )?,
        tool(
            "test_input_required_result_list_roots",
            "Lists the client's roots.",
            list_roots,
        )?,
        tool(
            "test_input_required_result_request_state",
            "Asks for a confirmation, keeping a sealed state.",
            request_state,
        )?,
        tool(
            "test_input_required_result_multiple_inputs",
            "Asks for a name, a greeting and the roots at once.",
            multiple_inputs,
        )?,
        tool(
            "test_input_required_result_multi_round",
            "Asks in two rounds.",
            multi_round,
        )?,
        tool(
            "test_input_required_result_tampered_state",
            "Refuses a state it did not seal.",
            tampered_state,
        )?,
        tool(
            "test_input_required_result_capabilities",
            "Asks only what the client can answer.",
            capabilities,
        )?,
    ])
}

/// A tool without arguments whose body is `body`, on the call's [`Asker`].
fn tool(
    name: &str,
    description: &str,
    body: fn(&Asker, &str) -> Result<Value, BoxError>,
) -> Result<DynTool, InvalidName> {
    let named = name.to_owned();
    DynTool::builder()
        .name(name)
        .description(description)
        .input_schema(schemars::json_schema!({"type": "object", "properties": {}}))
        .body(move |_| {
            let name = named.clone();
            async move {
                let asker = context::get::<Asker>().ok_or("not called over MCP: nobody to ask")?;
                body(&asker, &name)
            }
        })
        .build()
}

fn question(message: &str, field: &str, kind: &str) -> InputRequest {
    InputRequest::Ask(Question::new(
        message,
        json!({"type": "object", "properties": {field: {"type": kind}}, "required": [field]}),
    ))
}

/// The fields of an accepted answer under `key`.
pub fn accepted(asker: &Asker, key: &str) -> Option<Map<String, Value>> {
    match asker.answered(key)?.answer {
        Answer::Accept(fields) => Some(fields),
        Answer::Decline | Answer::Cancel => None,
    }
}

/// The text field `field` of an accepted answer under `key`.
pub fn accepted_text(asker: &Asker, key: &str, field: &str) -> Option<String> {
    Some(accepted(asker, key)?.get(field)?.as_str()?.to_owned())
}

fn text(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn ask(requests: Vec<(&str, InputRequest)>, state: Option<String>) -> Result<Value, BoxError> {
    let requests = requests
        .into_iter()
        .map(|(key, request)| (key.to_owned(), request));
    Err(InputRequired::new(requests, state).into())
}

fn seal(tool: &str, round: &Round) -> Result<String, BoxError> {
    let options = SealOptions::new()
        .associated_data(tool.as_bytes())
        .ttl(STATE_TTL);
    Ok(STATES.seal_json_with(round, &options)?)
}

/// The state the call brings, opened: a protocol error (-32602) when it is not
/// one this tool sealed, or expired.
fn opened(asker: &Asker, tool: &str) -> Result<Option<Round>, BoxError> {
    let Some(state) = asker.state() else {
        return Ok(None);
    };
    STATES
        .open_json_with(&state, tool.as_bytes())
        .map(Some)
        .map_err(|error| {
            ErrorData::invalid_params(format!("requestState refused: {error}"), None).into()
        })
}

fn elicitation(asker: &Asker, _: &str) -> Result<Value, BoxError> {
    match accepted_text(asker, "user_name", "name") {
        Some(name) => Ok(text(format!("Hello, {name}!"))),
        // Asked again when the answer is missing, declined or not a name.
        None => ask(
            vec![(
                "user_name",
                question("What is your name?", "name", "string"),
            )],
            None,
        ),
    }
}

fn sampling(asker: &Asker, _: &str) -> Result<Value, BoxError> {
    let said = asker.response("capital_question");
    match said
        .as_ref()
        .and_then(|said| said["content"]["text"].as_str())
    {
        Some(said) => Ok(text(format!("The model said: {said}"))),
        None => ask(
            vec![(
                "capital_question",
                sample("What is the capital of France?", 100),
            )],
            None,
        ),
    }
}

fn sample(prompt: &str, max_tokens: u32) -> InputRequest {
    InputRequest::protocol(
        "sampling/createMessage",
        json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens,
        }),
    )
}

fn roots_of(asker: &Asker, key: &str) -> Option<Vec<String>> {
    let listed = asker.response(key)?;
    let roots = listed.get("roots")?.as_array()?;
    Some(
        roots
            .iter()
            .filter_map(|root| Some(root.get("uri")?.as_str()?.to_owned()))
            .collect(),
    )
}

fn list_roots(asker: &Asker, _: &str) -> Result<Value, BoxError> {
    match roots_of(asker, "client_roots") {
        Some(roots) => Ok(text(format!("Roots: {}", roots.join(", ")))),
        None => ask(
            vec![(
                "client_roots",
                InputRequest::protocol("roots/list", json!({})),
            )],
            None,
        ),
    }
}

fn request_state(asker: &Asker, tool: &str) -> Result<Value, BoxError> {
    let round = opened(asker, tool)?;
    if let (Some(_), Some(_)) = (round, accepted(asker, "confirm")) {
        return Ok(text(
            "state-ok: the confirmation came back with the state sealed for it".to_owned(),
        ));
    }
    let state = seal(
        tool,
        &Round {
            round: 1,
            name: None,
        },
    )?;
    ask(
        vec![("confirm", question("Please confirm", "ok", "boolean"))],
        Some(state),
    )
}

fn multiple_inputs(asker: &Asker, tool: &str) -> Result<Value, BoxError> {
    let round = opened(asker, tool)?;
    let name = accepted_text(asker, "user_name", "name");
    let greeting = asker
        .response("greeting")
        .and_then(|said| Some(said["content"]["text"].as_str()?.to_owned()));
    let roots = roots_of(asker, "client_roots");
    if let (Some(_), Some(name), Some(greeting), Some(roots)) = (round, &name, &greeting, &roots) {
        return Ok(text(format!(
            "Name: {name}; Greeting: {greeting}; Roots: {}",
            roots.len()
        )));
    }
    let state = seal(
        tool,
        &Round {
            round: 1,
            name: None,
        },
    )?;
    ask(
        vec![
            (
                "user_name",
                question("What is your name?", "name", "string"),
            ),
            ("greeting", sample("Generate a greeting", 50)),
            (
                "client_roots",
                InputRequest::protocol("roots/list", json!({})),
            ),
        ],
        Some(state),
    )
}

fn multi_round(asker: &Asker, tool: &str) -> Result<Value, BoxError> {
    match opened(asker, tool)? {
        Some(Round { round: 1, .. }) => {
            if let Some(name) = accepted_text(asker, "step1", "name") {
                let state = seal(
                    tool,
                    &Round {
                        round: 2,
                        name: Some(name),
                    },
                )?;
                return ask(
                    vec![(
                        "step2",
                        question("Step 2: What is your favorite color?", "color", "string"),
                    )],
                    Some(state),
                );
            }
        }
        Some(Round { round: 2, name }) => {
            let color = accepted_text(asker, "step2", "color");
            if let (Some(name), Some(color)) = (name, color) {
                return Ok(text(format!("{name} likes {color}")));
            }
        }
        _ => {}
    }
    let state = seal(
        tool,
        &Round {
            round: 1,
            name: None,
        },
    )?;
    ask(
        vec![(
            "step1",
            question("Step 1: What is your name?", "name", "string"),
        )],
        Some(state),
    )
}

fn tampered_state(asker: &Asker, tool: &str) -> Result<Value, BoxError> {
    if opened(asker, tool)?.is_some() && accepted(asker, "confirm").is_some() {
        return Ok(text("The state was the one sealed for it".to_owned()));
    }
    let state = seal(
        tool,
        &Round {
            round: 1,
            name: None,
        },
    )?;
    ask(
        vec![("confirm", question("Please confirm", "ok", "boolean"))],
        Some(state),
    )
}

fn capabilities(asker: &Asker, _: &str) -> Result<Value, BoxError> {
    if asker.response("name").is_some() || asker.response("capital").is_some() {
        return Ok(text("Asked only what the client can answer".to_owned()));
    }
    let wanted = [
        ("name", question("What is your name?", "name", "string")),
        ("capital", sample("What is the capital of France?", 100)),
    ];
    let asked: Vec<_> = wanted
        .into_iter()
        .filter(|(_, request)| asker.can_answer(request))
        .collect();
    if asked.is_empty() {
        return Ok(text(
            "The client can answer nothing this tool would ask".to_owned(),
        ));
    }
    ask(asked, None)
}
