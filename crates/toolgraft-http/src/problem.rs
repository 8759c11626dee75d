//! Refusals as the API sends them: a status and `{"error": ..., "rule": ...}`.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use toolgraft::BindError;
use toolgraft::rulebook::Rule;

/// A refused request.
#[derive(Debug, Serialize)]
pub(crate) struct Problem {
    #[serde(skip)]
    pub status: StatusCode,
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<Rule>,
}

impl Problem {
    pub fn new(status: StatusCode, error: impl Into<String>) -> Self {
        Self {
            status,
            error: error.into(),
            rule: None,
        }
    }

    pub fn bad_request(error: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, error)
    }

    /// The rule that refused it, when one did.
    pub fn with_rule(mut self, rule: impl Into<Option<Rule>>) -> Self {
        self.rule = rule.into();
        self
    }
}

impl From<BindError> for Problem {
    /// 404 for a tool that is not bound; 409 for what conflicts with the tool's
    /// current combos or another tool's names; 400 for a combo the rules refuse.
    fn from(err: BindError) -> Self {
        let status = match &err {
            BindError::UnknownTool { .. } => StatusCode::NOT_FOUND,
            BindError::AlreadyAttached { .. }
            | BindError::NotAttached { .. }
            | BindError::NameClash { .. }
            | BindError::NameTaken { .. } => StatusCode::CONFLICT,
            _ => StatusCode::BAD_REQUEST,
        };
        Self {
            status,
            error: err.to_string(),
            rule: err.rule(),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = serde_json::to_string(&self)
            .unwrap_or_else(|_| r#"{"error":"the error could not be written"}"#.to_owned());
        (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}
