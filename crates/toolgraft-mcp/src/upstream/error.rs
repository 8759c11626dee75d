//! What goes wrong with an upstream: the whole connection, or one of its tools.

use std::fmt;

/// An upstream that cannot be used: its config, or connecting to it.
///
/// ```
/// let error = toolgraft_mcp::upstream::UpstreamError::Config { field: "namespace", problem: "empty".into() };
/// assert_eq!(error.to_string(), "upstream config: `namespace`: empty");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum UpstreamError {
    /// A field of the [`UpstreamConfig`](super::UpstreamConfig) is wrong.
    Config {
        /// The field.
        field: &'static str,
        /// What is wrong, and what it takes.
        problem: String,
    },
    /// The server could not be reached, or did not complete MCP's handshake
    /// or its first `tools/list`, within the connect timeout or at all.
    Connect {
        /// The endpoint (program or URL; never a token).
        endpoint: String,
        /// Why.
        problem: String,
    },
    /// The endpoint needs a feature of this crate that is off.
    Unsupported {
        /// The endpoint.
        endpoint: String,
        /// The feature.
        feature: &'static str,
    },
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config { field, problem } => write!(f, "upstream config: `{field}`: {problem}"),
            Self::Connect { endpoint, problem } => {
                write!(f, "cannot connect to the upstream {endpoint}: {problem}")
            }
            Self::Unsupported { endpoint, feature } => write!(
                f,
                "the upstream {endpoint} needs toolgraft-mcp's feature `{feature}`"
            ),
        }
    }
}

impl std::error::Error for UpstreamError {}

/// A tool of an upstream that is not taken (the others are): reported, never
/// bound.
///
/// ```
/// let refused = toolgraft_mcp::upstream::Refused { tool: "a b".into(), problem: "not a name".into() };
/// assert_eq!(refused.to_string(), "upstream tool `a b` not taken: not a name");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The tool's name upstream (at most 128 characters of it).
    pub tool: String,
    /// Why it is not taken.
    pub problem: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "upstream tool `{}` not taken: {}",
            self.tool, self.problem
        )
    }
}

impl std::error::Error for Refused {}

/// `error` with each of its causes, each once: rmcp's errors say what failed
/// (a request) and keep why (a certificate refused, a connection reset)
/// further down.
pub(super) fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut said = error.to_string();
    let mut cause = cause_of(error);
    while let Some(source) = cause {
        let because = source.to_string();
        if !said.contains(&because) {
            said = format!("{said}: {because}");
        }
        cause = cause_of(source);
    }
    said
}

/// What caused `error`: its source, or the error rmcp keeps in a field it does
/// not name as one.
fn cause_of<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    use rmcp::service::ClientInitializeError;
    if let Some(ClientInitializeError::TransportError { error, .. }) = error.downcast_ref() {
        return Some(error);
    }
    #[cfg(feature = "upstream-http")]
    if let Some(rmcp::transport::streamable_http_client::StreamableHttpError::Client(error)) =
        error.downcast_ref::<rmcp::transport::streamable_http_client::StreamableHttpError<
            reqwest::Error,
        >>()
    {
        return Some(error);
    }
    error.source()
}
