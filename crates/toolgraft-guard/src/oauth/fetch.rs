//! HTTP for the resource server: one request, a deadline, a cap on the answer's
//! size. Whatever the issuer answers stays here: its text reaches an operator's
//! error at most, never a client.

use std::fmt;
use std::time::Duration;

use reqwest::RequestBuilder;

/// Why a fetch failed, for the operator.
#[derive(Debug)]
pub(crate) enum FetchError {
    /// Could not connect, or the connection broke (reqwest's message).
    Transport(String),
    /// Not a 2xx answer.
    Status(u16),
    /// More bytes than the cap.
    TooLarge(usize),
    /// No complete answer within the deadline.
    TimedOut(Duration),
    /// An answer that is not what was asked for.
    Garbage(&'static str),
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Transport(error) => write!(f, "{error}"),
            Self::Status(status) => write!(f, "it answered {status}"),
            Self::TooLarge(cap) => write!(f, "its answer is over {cap} bytes"),
            Self::TimedOut(after) => write!(f, "no answer within {after:?}"),
            Self::Garbage(what) => write!(f, "its answer is {what}"),
        }
    }
}

/// Sends `request` and reads the answer's body, at most `cap` bytes, all within
/// `deadline` (a slow trickle of bytes is cut off as surely as a silent server).
pub(crate) async fn send(
    request: RequestBuilder,
    deadline: Duration,
    cap: usize,
) -> Result<Vec<u8>, FetchError> {
    let work = async {
        let transport = |error: reqwest::Error| FetchError::Transport(error.to_string());
        let mut response = request.send().await.map_err(transport)?;
        if !response.status().is_success() {
            return Err(FetchError::Status(response.status().as_u16()));
        }
        if response
            .content_length()
            .is_some_and(|len| len > cap as u64)
        {
            return Err(FetchError::TooLarge(cap));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if body.len() + chunk.len() > cap {
                return Err(FetchError::TooLarge(cap));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    tokio::time::timeout(deadline, work)
        .await
        .map_err(|_| FetchError::TimedOut(deadline))?
}
