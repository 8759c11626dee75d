//! A minimal Streamable HTTP MCP client: one `reqwest::Client` and one session
//! (`initialize`, `notifications/initialized`), then `tools/call`s. It reads
//! either a JSON body or an SSE body (the `data:` event carrying the JSON-RPC
//! response with the request's id; priming and empty events are skipped).

use std::fmt;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use serde_json::{Value, json};

use crate::tool;

/// The protocol version the client asks for.
pub const PROTOCOL: &str = "2025-06-18";

/// Why a request failed.
#[derive(Debug)]
pub enum CallError {
    /// No answer (connection, body).
    Transport(String),
    /// An HTTP status other than the one expected.
    Status(u16, String),
    /// A JSON-RPC error, or a body with no response for the request.
    Rpc(String),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Transport(e) => write!(f, "transport: {e}"),
            CallError::Status(s, body) => write!(f, "HTTP {s}: {body}"),
            CallError::Rpc(e) => write!(f, "JSON-RPC: {e}"),
        }
    }
}

/// What kind of body an answer had (to report what each system sends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// `application/json`.
    Json,
    /// `text/event-stream`.
    Sse,
}

/// One client and its session.
pub struct Session {
    http: reqwest::Client,
    url: String,
    session: Option<HeaderValue>,
    next_id: u64,
    /// The kind of body of the last answer.
    pub last_kind: Option<BodyKind>,
}

impl Session {
    /// A new client (its own connection pool) with a session opened on `url`.
    pub async fn open(url: &str) -> Result<Session, CallError> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(|e| CallError::Transport(e.to_string()))?;
        let mut session = Session {
            http,
            url: url.to_owned(),
            session: None,
            next_id: 1,
            last_kind: None,
        };
        let init = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "peer-bench", "version": "0.0.0"}
            }
        });
        let response = session.post(init.to_string()).await?;
        session.session = response.headers().get("mcp-session-id").cloned();
        session.read(response, 0, 200).await?;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = session.post(initialized.to_string()).await?;
        let status = response.status().as_u16();
        let _ = response.bytes().await;
        if status != 202 && status != 200 {
            return Err(CallError::Status(
                status,
                "notifications/initialized".into(),
            ));
        }
        Ok(session)
    }

    async fn post(&self, body: String) -> Result<reqwest::Response, CallError> {
        let mut request = self
            .http
            .post(&self.url)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .header("mcp-protocol-version", PROTOCOL)
            .body(body);
        if let Some(id) = &self.session {
            request = request.header("mcp-session-id", id.clone());
        }
        request
            .send()
            .await
            .map_err(|e| CallError::Transport(e.to_string()))
    }

    /// The JSON-RPC result answering `id` in `response`, which must have `status`.
    async fn read(
        &mut self,
        response: reqwest::Response,
        id: u64,
        status: u16,
    ) -> Result<Value, CallError> {
        let got = response.status().as_u16();
        let sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = response
            .bytes()
            .await
            .map_err(|e| CallError::Transport(e.to_string()))?;
        if got != status {
            return Err(CallError::Status(
                got,
                String::from_utf8_lossy(&body).into_owned(),
            ));
        }
        self.last_kind = Some(if sse { BodyKind::Sse } else { BodyKind::Json });
        let message = if sse {
            find_event(&body, id)?
        } else {
            serde_json::from_slice(&body).map_err(|e| CallError::Rpc(e.to_string()))?
        };
        if let Some(error) = message.get("error") {
            return Err(CallError::Rpc(error.to_string()));
        }
        match message.get("result") {
            Some(result) if message.get("id") == Some(&json!(id)) => Ok(result.clone()),
            _ => Err(CallError::Rpc(format!("not the answer to {id}: {message}"))),
        }
    }

    /// One `tools/call` of `name` with the bench's arguments; its result.
    pub async fn call(&mut self, name: &str) -> Result<Value, CallError> {
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": tool::call_args()}
        });
        let response = self.post(body.to_string()).await?;
        let result = self.read(response, id, 200).await?;
        if result.get("isError") == Some(&Value::Bool(true)) {
            return Err(CallError::Rpc(format!("isError: {result}")));
        }
        Ok(result)
    }
}

/// Checks a `repeat` result: one text block with the expected text.
pub fn check(result: &Value) -> Result<(), CallError> {
    let text = result.pointer("/content/0/text").and_then(Value::as_str);
    if text == Some(tool::expected().as_str()) {
        Ok(())
    } else {
        Err(CallError::Rpc(format!("unexpected result: {result}")))
    }
}

/// The JSON-RPC message with `id` among the `data:` events of an SSE body.
fn find_event(body: &[u8], id: u64) -> Result<Value, CallError> {
    let text = std::str::from_utf8(body).map_err(|e| CallError::Rpc(e.to_string()))?;
    let text = text.replace("\r\n", "\n");
    for event in text.split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        let data = data.join("\n");
        if data.trim().is_empty() {
            continue;
        }
        let Ok(message) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        if message.get("id") == Some(&json!(id)) {
            return Ok(message);
        }
    }
    Err(CallError::Rpc(format!(
        "no response for id {id} in the event stream: {text}"
    )))
}
