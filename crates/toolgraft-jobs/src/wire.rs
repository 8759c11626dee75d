//! Errors across the process boundary: a worker's [`ToolError`] as data, in its
//! reply (the job and the reply themselves are in `job`), and the caller's
//! [`RemoteFailure`] for a body's error from another process.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use toolgraft::error::{ArgsErrorKind, Detailed, Transient};
use toolgraft::ext::chain::{ChainError, ChainErrorKind};
#[cfg(feature = "output-schema")]
use toolgraft::ext::output_schema::OutputSchemaError;
use toolgraft::{Name, ToolError};

/// A [`ToolError`] as data. Sources do not cross a process boundary; their
/// messages do.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub(crate) enum WireError {
    UnknownTool {
        name: String,
    },
    InvalidArguments {
        tool: String,
        field: Option<String>,
        kind: ArgsErrorKind,
        problem: String,
    },
    Body {
        tool: String,
        message: String,
        /// Marked [`Transient`]: `retry` in the caller makes the call again.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        transient: bool,
        /// A [`Detailed`] error, which crosses whole (its `data`, and no
        /// worker's name added to its message).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        detailed: bool,
        #[serde(default, skip_serializing_if = "Value::is_null")]
        data: Value,
    },
    Panicked {
        tool: String,
        message: String,
    },
    Refused {
        tool: String,
        extension: String,
        reason: String,
    },
    Relocation {
        tool: String,
        backend: String,
        reason: String,
    },
    OutputMismatch {
        tool: String,
        path: String,
        value: Value,
        problem: String,
    },
    Chain {
        tool: String,
        kind: ChainErrorKind,
        problem: String,
    },
    TimedOut {
        tool: String,
        backend: String,
        #[serde(default)]
        job: Option<String>,
        after_ms: u64,
    },
    /// A limit's refusal (`rate_limit`, `concurrency`), with when to retry.
    Overloaded {
        tool: String,
        extension: String,
        reason: String,
        #[serde(default)]
        retry_after_ms: Option<u64>,
    },
    Reported {
        message: String,
    },
    /// Anything else, by its message.
    Other {
        tool: String,
        message: String,
    },
    /// Cancelled while it ran: the reply a cancel writes, which the job keeps
    /// (the first reply stays), so a body that answers after it is not heard.
    Cancelled {
        tool: String,
    },
}

impl WireError {
    /// The error's kind, as its tag on the wire says it (`body`, `refused`,
    /// `timed_out`...): few values, what a trace's `error.type` is.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::UnknownTool { .. } => "unknown_tool",
            Self::InvalidArguments { .. } => "invalid_arguments",
            Self::Body { .. } => "body",
            Self::Panicked { .. } => "panicked",
            Self::Refused { .. } => "refused",
            Self::Relocation { .. } => "relocation",
            Self::OutputMismatch { .. } => "output_mismatch",
            Self::Chain { .. } => "chain",
            Self::TimedOut { .. } => "timed_out",
            Self::Overloaded { .. } => "overloaded",
            Self::Reported { .. } => "reported",
            Self::Other { .. } => "other",
            Self::Cancelled { .. } => "cancelled",
        }
    }

    /// The error as the worker saw it.
    pub(crate) fn from_tool_error(error: &ToolError, tool: &str) -> Self {
        let text = |name: &Name| name.to_string();
        match error {
            ToolError::UnknownTool { name } => Self::UnknownTool { name: name.clone() },
            ToolError::InvalidArguments {
                tool,
                field,
                kind,
                problem,
            } => Self::InvalidArguments {
                tool: text(tool),
                field: field.clone(),
                kind: *kind,
                problem: problem.clone(),
            },
            ToolError::Body { tool, source } => {
                let detailed = detailed(source.as_ref());
                Self::Body {
                    tool: text(tool),
                    message: detailed.map_or_else(
                        || source.to_string(),
                        |detailed| detailed.message().to_owned(),
                    ),
                    transient: error.is_transient(),
                    detailed: detailed.is_some(),
                    data: detailed.map_or(Value::Null, |detailed| detailed.data().clone()),
                }
            }
            ToolError::Panicked { tool, message } => Self::Panicked {
                tool: text(tool),
                message: message.clone(),
            },
            ToolError::Refused {
                tool,
                extension,
                reason,
            } => Self::Refused {
                tool: text(tool),
                extension: text(extension),
                reason: reason.clone(),
            },
            ToolError::Relocation {
                tool,
                backend,
                reason,
            } => Self::Relocation {
                tool: text(tool),
                backend: text(backend),
                reason: reason.clone(),
            },
            ToolError::Extension { error: inner, .. } => {
                #[cfg(feature = "output-schema")]
                if let Some(mismatch) = inner.downcast_ref::<OutputSchemaError>() {
                    return Self::OutputMismatch {
                        tool: text(&mismatch.tool),
                        path: mismatch.path.clone(),
                        value: Value::clone(&mismatch.value),
                        problem: mismatch.problem.clone(),
                    };
                }
                if let Some(stopped) = inner.downcast_ref::<ChainError>() {
                    Self::Chain {
                        tool: text(&stopped.tool),
                        kind: stopped.kind,
                        problem: stopped.problem.clone(),
                    }
                } else {
                    Self::Other {
                        tool: tool.to_owned(),
                        message: error.to_string(),
                    }
                }
            }
            ToolError::TimedOut {
                tool,
                extension: backend,
                job,
                after,
            } => Self::TimedOut {
                tool: text(tool),
                backend: text(backend),
                job: job.clone(),
                after_ms: after.as_millis().try_into().unwrap_or(u64::MAX),
            },
            ToolError::Overloaded {
                tool,
                extension,
                reason,
                retry_after,
            } => Self::Overloaded {
                tool: text(tool),
                extension: text(extension),
                reason: reason.clone(),
                // Rounded up: a retry at the time given is never early.
                retry_after_ms: retry_after.map(|after| {
                    after
                        .as_nanos()
                        .div_ceil(1_000_000)
                        .try_into()
                        .unwrap_or(u64::MAX)
                }),
            },
            ToolError::Reported { message } => Self::Reported {
                message: message.clone(),
            },
            // `Output`, and variants newer than this crate; another extension's
            // error crosses as its message.
            _ => Self::Other {
                tool: tool.to_owned(),
                message: error.to_string(),
            },
        }
    }

    /// The error the caller sees. `below` is the layer the job ran and `backend`
    /// the backend that sent it; `worker` names the process.
    pub(crate) fn into_tool_error(self, below: &Name, backend: &Name, worker: &str) -> ToolError {
        // Names were valid in the worker, which binds the same tools and extensions.
        // Names were valid in the worker, which binds the same tools and extensions;
        // one that is not (a store written by something else) is shown as near as can be.
        let name = |text: String| Name::lossy(&text);
        match self {
            Self::UnknownTool { name: missing } => ToolError::Relocation {
                tool: below.clone(),
                backend: backend.clone(),
                reason: format!(
                    "worker `{worker}` has no tool `{missing}` bound; bind the same tools and \
                     combos in the worker as in the caller"
                ),
            },
            Self::InvalidArguments {
                tool,
                field,
                kind,
                problem,
            } => ToolError::InvalidArguments {
                tool: name(tool),
                field,
                kind,
                problem,
            },
            Self::Body {
                tool,
                message,
                transient,
                detailed,
                data,
            } => {
                let source: Box<dyn std::error::Error + Send + Sync> = if detailed {
                    Box::new(Detailed::new(message, data))
                } else {
                    Box::new(RemoteFailure {
                        message,
                        worker: worker.to_owned(),
                    })
                };
                ToolError::Body {
                    tool: name(tool),
                    source: if transient {
                        Arc::new(Transient::new(source))
                    } else {
                        Arc::from(source)
                    },
                }
            }
            Self::Panicked { tool, message } => ToolError::Panicked {
                tool: name(tool),
                message,
            },
            Self::Refused {
                tool,
                extension,
                reason,
            } => ToolError::Refused {
                tool: name(tool),
                extension: name(extension),
                reason,
            },
            Self::Relocation {
                tool,
                backend,
                reason,
            } => ToolError::Relocation {
                tool: name(tool),
                backend: name(backend),
                reason,
            },
            #[cfg(feature = "output-schema")]
            Self::OutputMismatch {
                tool,
                path,
                value,
                problem,
            } => OutputSchemaError::new(name(tool), path, Arc::new(value), problem).into(),
            // A caller built without `output_schema` reads a worker's mismatch as
            // its words.
            #[cfg(not(feature = "output-schema"))]
            Self::OutputMismatch {
                tool,
                path,
                problem,
                ..
            } => ToolError::Reported {
                message: format!(
                    "the result of `{tool}` does not match its output schema at `{path}`: {problem}"
                ),
            },
            Self::Chain {
                tool,
                kind,
                problem,
            } => ChainError::new(name(tool), kind, problem).into(),
            Self::TimedOut {
                tool,
                backend,
                job,
                after_ms,
            } => ToolError::TimedOut {
                tool: name(tool),
                extension: name(backend),
                job,
                after: std::time::Duration::from_millis(after_ms),
            },
            Self::Overloaded {
                tool,
                extension,
                reason,
                retry_after_ms,
            } => ToolError::Overloaded {
                tool: name(tool),
                extension: name(extension),
                reason,
                retry_after: retry_after_ms.map(std::time::Duration::from_millis),
            },
            Self::Reported { message } => ToolError::Reported { message },
            Self::Cancelled { .. } => ToolError::Relocation {
                tool: below.clone(),
                backend: backend.clone(),
                reason: "the job was cancelled while it ran".to_owned(),
            },
            Self::Other { message, .. } => ToolError::Relocation {
                tool: below.clone(),
                backend: backend.clone(),
                reason: format!("on worker `{worker}`: {message}"),
            },
        }
    }
}

/// The [`Detailed`] error a body failed with, marked [`Transient`] or not.
fn detailed<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a Detailed> {
    match error.downcast_ref::<Transient>() {
        Some(marked) => marked.error().downcast_ref::<Detailed>(),
        None => error.downcast_ref::<Detailed>(),
    }
}

/// A body's error from another process: its message, and where it happened
/// (inside a [`Transient`] when the body marked it so; a [`Detailed`] error
/// crosses as itself instead).
#[derive(Debug, thiserror::Error)]
#[error("{message} (on worker `{worker}`)")]
pub struct RemoteFailure {
    /// The body error's message.
    pub message: String,
    /// The worker process that ran the body (`<name>-<pid>`).
    pub worker: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(error: ToolError) -> ToolError {
        let wire = WireError::from_tool_error(&error, "shout");
        let text = serde_json::to_string(&wire).unwrap();
        let back: WireError = serde_json::from_str(&text).unwrap();
        let below = Name::new("shout").unwrap();
        back.into_tool_error(&below, &Name::new("remote").unwrap(), "toolgraft-7")
    }

    #[test]
    fn errors_cross_as_the_same_variant_with_their_message() {
        let name = Name::new("shout").unwrap();
        let body = round_trip(ToolError::Body {
            tool: name.clone(),
            source: Arc::new(std::io::Error::other("disk full")),
        });
        assert_eq!(
            body.to_string(),
            "tool `shout` failed: disk full (on worker `toolgraft-7`)"
        );
        let panicked = round_trip(ToolError::Panicked {
            tool: name.clone(),
            message: "oops".into(),
        });
        assert!(matches!(panicked, ToolError::Panicked { message, .. } if message == "oops"));
        let invalid = round_trip(ToolError::InvalidArguments {
            tool: name.clone(),
            field: Some("text".into()),
            kind: ArgsErrorKind::MissingField,
            problem: "missing field `text`".into(),
        });
        assert!(matches!(
            invalid,
            ToolError::InvalidArguments { kind: ArgsErrorKind::MissingField, field: Some(f), .. } if f == "text"
        ));
        #[cfg(feature = "output-schema")]
        let mismatch = round_trip(
            OutputSchemaError::new(
                name.clone(),
                "/name",
                Arc::new(Value::from("Al")),
                "too short",
            )
            .into(),
        );
        #[cfg(feature = "output-schema")]
        {
            let mismatch = mismatch.downcast_ref::<OutputSchemaError>();
            assert!(matches!(mismatch, Some(mismatch) if *mismatch.value == "Al"));
        }
        let stopped = round_trip(ChainError::new(name, ChainErrorKind::TooDeep, "too deep").into());
        assert_eq!(
            stopped.downcast_ref::<ChainError>().map(|e| e.kind),
            Some(ChainErrorKind::TooDeep)
        );
    }

    #[test]
    fn a_nested_timeout_an_overload_and_a_reported_error_keep_their_variant() {
        let timed_out = round_trip(ToolError::TimedOut {
            tool: Name::new("slow").unwrap(),
            extension: Name::new("remote").unwrap(),
            job: Some("01J".into()),
            after: std::time::Duration::from_millis(250),
        });
        assert!(matches!(
            timed_out,
            ToolError::TimedOut { job, after, .. }
                if job.as_deref() == Some("01J") && after == std::time::Duration::from_millis(250)
        ));
        let overloaded = round_trip(ToolError::Overloaded {
            tool: Name::new("shout_rate_limit").unwrap(),
            extension: Name::new("rate_limit").unwrap(),
            reason: "over 5 calls per 1s (burst 1)".into(),
            retry_after: Some(std::time::Duration::from_micros(199_500)),
        });
        assert!(overloaded.is_transient());
        assert_eq!(
            overloaded.to_string(),
            "`rate_limit` refused the call to `shout_rate_limit`: over 5 calls per 1s (burst 1); retry after 200 ms"
        );
        assert!(matches!(
            overloaded,
            ToolError::Overloaded { retry_after: Some(after), .. } if after == std::time::Duration::from_millis(200)
        ));
        let reported = round_trip(ToolError::Reported {
            message: "item 2 failed".into(),
        });
        assert_eq!(reported.to_string(), "item 2 failed");
    }

    #[test]
    fn a_transient_body_error_stays_transient_and_a_detailed_one_crosses_whole() {
        let name = Name::new("shout").unwrap();
        let busy = round_trip(ToolError::Body {
            tool: name.clone(),
            source: Arc::new(Transient::new("the database is busy")),
        });
        assert!(busy.is_transient(), "{busy:?}");
        assert_eq!(
            busy.to_string(),
            "tool `shout` failed: the database is busy (on worker `toolgraft-7`)"
        );
        let data = serde_json::json!({"jsonrpcError": {"code": -32603, "message": "gone"}});
        let detailed = ToolError::Body {
            tool: name.clone(),
            source: Arc::new(Detailed::new("gone", data.clone())),
        };
        let crossed = round_trip(detailed.clone());
        assert_eq!(crossed.to_string(), detailed.to_string(), "no worker added");
        assert!(!crossed.is_transient());
        let ToolError::Body { source, .. } = &crossed else {
            panic!("{crossed:?}")
        };
        assert_eq!(
            source.downcast_ref::<Detailed>(),
            Some(&Detailed::new("gone", data))
        );
        let marked = round_trip(ToolError::Body {
            tool: name,
            source: Arc::new(Transient::new(Detailed::new("busy", Value::Null))),
        });
        assert!(marked.is_transient());
        let ToolError::Body { source, .. } = &marked else {
            panic!("{marked:?}")
        };
        let inner = source.downcast_ref::<Transient>().unwrap().error();
        assert_eq!(
            inner.downcast_ref::<Detailed>(),
            Some(&Detailed::new("busy", Value::Null))
        );
    }

    #[test]
    fn an_unknown_name_in_the_worker_says_to_bind_the_same_tools() {
        let error = round_trip(ToolError::UnknownTool {
            name: "shout".into(),
        });
        assert!(matches!(error, ToolError::Relocation { .. }));
        assert!(
            error
                .to_string()
                .contains("worker `toolgraft-7` has no tool `shout` bound"),
            "{error}"
        );
    }
}
