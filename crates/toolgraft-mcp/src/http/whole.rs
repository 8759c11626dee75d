//! Replies sent whole: a `POST` whose event stream would carry nothing but its
//! reply is answered with that reply as one `application/json` body.
//!
//! rmcp answers every request of a session with an event stream: a priming event,
//! then the messages, then the end of the stream, each written on its own. The
//! Streamable HTTP transport lets a server answer with one JSON object instead
//! when the client accepts `application/json` (every conforming client does), and
//! for most calls there is nothing else to send. One body is one write for the
//! server and one read for the client, where the stream took three of each.
//!
//! This reads rmcp's answers rather than changing rmcp, so that request handling,
//! the handler's `Peer` and the stream's framing stay rmcp's. What needs a stream
//! keeps it: a first message that is not the reply (progress, a log message, an
//! elicitation or sampling request) sends the stream on from its start, and so
//! does a reply that takes longer than [`HOLD`], so that a long call keeps its
//! keep-alive comments and its event ids for resuming.

use std::ops::Range;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http;
use axum::response::Response;
use futures_util::stream;
use http_body_util::BodyExt;
use tokio::time::sleep;

/// How long a reply is held back to be sent whole. A call answered later has its
/// stream, as it would without this layer.
pub(crate) const HOLD: Duration = Duration::from_secs(1);

const JSON: &str = "application/json";
const EVENT_STREAM: &[u8] = b"text/event-stream";

/// Whether `request` may be answered with a reply sent whole: a `POST` from a
/// client that accepts JSON.
pub(crate) fn wants_whole(request: &Request) -> bool {
    request.method() == http::Method::POST && accepts_json(request.headers())
}

/// `response`, its event stream's lone reply sent whole: see the
/// [module docs](self). Anything but a `200` event stream is left as it is.
pub(crate) async fn send_whole(response: Response) -> Response {
    if !is_event_stream(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    match first_message(body).await {
        First::Reply(reply) => {
            parts.headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(JSON),
            );
            Response::from_parts(parts, Body::from(reply))
        }
        First::Stream { seen, rest } => Response::from_parts(parts, replay(seen, rest)),
    }
}

/// What the stream's first message turned out to be.
enum First {
    /// The reply, the stream's only message: its JSON text.
    Reply(Bytes),
    /// Anything else, or nothing yet within [`HOLD`]: the stream goes out from its
    /// first byte (`seen`, then `rest`).
    Stream {
        seen: Vec<Bytes>,
        rest: Option<Body>,
    },
}

async fn first_message(mut body: Body) -> First {
    let deadline = sleep(HOLD);
    tokio::pin!(deadline);
    let mut seen: Vec<Bytes> = Vec::new();
    // An event cut across frames: its start, until the frame that ends it.
    let mut partial: Vec<u8> = Vec::new();
    loop {
        let frame = tokio::select! {
            biased;
            frame = body.frame() => frame,
            () = &mut deadline => return First::Stream { seen, rest: Some(body) },
        };
        let data = match frame {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                // Trailers in an event stream: not ours to judge.
                Err(_) => {
                    return First::Stream {
                        seen,
                        rest: Some(body),
                    };
                }
            },
            // The stream ended, or broke, before its first message: the client
            // sees it as it was.
            Some(Err(_)) | None => return First::Stream { seen, rest: None },
        };
        seen.push(data.clone());
        let chunk = if partial.is_empty() {
            data
        } else {
            partial.extend_from_slice(&data);
            Bytes::from(std::mem::take(&mut partial))
        };
        match scan(&chunk) {
            Scan::Reply(range) => return First::Reply(chunk.slice(range)),
            Scan::Other => {
                return First::Stream {
                    seen,
                    rest: Some(body),
                };
            }
            Scan::Incomplete { from } => partial.extend_from_slice(&chunk[from..]),
        }
    }
}

/// The stream as rmcp made it: the frames already read, then the rest.
fn replay(seen: Vec<Bytes>, rest: Option<Body>) -> Body {
    let seen = stream::iter(seen.into_iter().map(Ok::<_, axum::Error>));
    match rest {
        Some(rest) => Body::from_stream(futures_util::StreamExt::chain(
            seen,
            rest.into_data_stream(),
        )),
        None => Body::from_stream(seen),
    }
}

/// What a run of event-stream text holds, read up to its first message.
#[derive(Debug, PartialEq, Eq)]
enum Scan {
    /// The first message is a reply, at this range of the text.
    Reply(Range<usize>),
    /// The first message is something else, or the text is not what rmcp writes.
    Other,
    /// Only events without a message (priming, comments) so far; an event still
    /// open starts at `from`.
    Incomplete { from: usize },
}

/// Reads whole events (each ends with an empty line) until the first one with
/// data. rmcp writes a message as one `data:` line of JSON; anything else (two
/// data lines, `\r` line ends) is left to the stream.
fn scan(text: &[u8]) -> Scan {
    let mut event_start = 0;
    let mut line_start = 0;
    // The data of the event being read, as a range of `text`.
    let mut data: Option<Range<usize>> = None;
    for end in memchr::memchr_iter(b'\n', text) {
        let (start, line) = (line_start, &text[line_start..end]);
        line_start = end + 1;
        if line.is_empty() {
            match data.take() {
                None => {}                            // a comment, or ids alone
                Some(range) if range.is_empty() => {} // a priming event
                Some(range) if is_reply(&text[range.clone()]) => return Scan::Reply(range),
                Some(_) => return Scan::Other,
            }
            event_start = line_start;
            continue;
        }
        if memchr::memchr(b'\r', line).is_some() {
            return Scan::Other;
        }
        let Some(value) = line.strip_prefix(b"data:") else {
            continue; // `id:`, `retry:`, `event:`, or a `:` comment
        };
        if data.is_some() {
            return Scan::Other;
        }
        let skip = 5 + usize::from(value.first() == Some(&b' '));
        data = Some(start + skip..end);
    }
    if memchr::memchr(b'\r', &text[line_start..]).is_some() {
        return Scan::Other;
    }
    Scan::Incomplete { from: event_start }
}

/// Whether `json` is a JSON-RPC response or error: an object whose members
/// include `result` or `error` before any `method`. Reads members only until it
/// knows; anything it cannot read is not a reply (and keeps its stream).
fn is_reply(json: &[u8]) -> bool {
    let mut reader = Reader { json, at: 0 };
    if !reader.eat(b'{') {
        return false;
    }
    loop {
        let Some(key) = reader.key() else {
            return false;
        };
        match key {
            b"result" | b"error" => return true,
            b"method" => return false,
            _ => {}
        }
        if !reader.skip_value() {
            return false;
        }
        if !reader.eat(b',') {
            return false;
        }
    }
}

/// Just enough of a JSON reader to walk an object's members.
struct Reader<'a> {
    json: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn peek(&mut self) -> Option<u8> {
        while let Some(&byte) = self.json.get(self.at) {
            if !matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
                return Some(byte);
            }
            self.at += 1;
        }
        None
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        self.at += usize::from(found);
        found
    }

    /// A member's name and its `:`. A name with an escape is returned as written
    /// (it matches none of the names looked for, which have none).
    fn key(&mut self) -> Option<&'a [u8]> {
        let start = self.at_string()?;
        let key = &self.json[start..self.at - 1];
        self.eat(b':').then_some(key)
    }

    /// Skips a string whose opening quote is next; returns where its text starts.
    fn at_string(&mut self) -> Option<usize> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.at;
        while let Some(&byte) = self.json.get(self.at) {
            self.at += 1;
            match byte {
                b'"' => return Some(start),
                b'\\' => self.at += 1,
                _ => {}
            }
        }
        None
    }

    fn skip_value(&mut self) -> bool {
        match self.peek() {
            Some(b'"') => self.at_string().is_some(),
            Some(b'{' | b'[') => self.skip_nested(),
            Some(_) => {
                // A number, `true`, `false` or `null`: up to the next delimiter.
                let rest = &self.json[self.at..];
                let length = rest
                    .iter()
                    .position(|byte| {
                        matches!(byte, b',' | b'}' | b']' | b' ' | b'\n' | b'\t' | b'\r')
                    })
                    .unwrap_or(rest.len());
                self.at += length;
                length > 0
            }
            None => false,
        }
    }

    /// Skips an object or array, strings inside it included.
    fn skip_nested(&mut self) -> bool {
        let mut depth = 0usize;
        while let Some(&byte) = self.json.get(self.at) {
            match byte {
                b'"' => {
                    if self.at_string().is_none() {
                        return false;
                    }
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.at += 1;
                        return true;
                    }
                }
                _ => {}
            }
            self.at += 1;
        }
        false
    }
}

/// Whether the client's `Accept` names `application/json` with a weight above
/// zero (`;q=0` says "not this").
fn accepts_json(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|media| {
            let mut parts = media.split(';');
            let essence = parts.next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case(JSON)
                && !parts.any(|param| {
                    let (name, weight) = param.split_once('=').unwrap_or_default();
                    name.trim().eq_ignore_ascii_case("q")
                        && weight.trim().parse::<f32>().is_ok_and(|q| q <= 0.0)
                })
        })
}

fn is_event_stream(response: &Response) -> bool {
    response.status() == http::StatusCode::OK
        && response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|value| value.as_bytes().starts_with(EVENT_STREAM))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(data: &serde_json::Value) -> String {
        format!("data: {data}\nid: 0/1\n\n")
    }

    #[test]
    fn replies_are_told_from_requests_and_notifications() {
        let reply = json!({"jsonrpc": "2.0", "id": 3, "result": {"content": []}});
        let error =
            json!({"jsonrpc": "2.0", "id": "a\"b", "error": {"code": -32602, "message": "x"}});
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"result": 1, "progressToken": "t"}});
        let elicit = json!({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create",
            "params": {"message": "ok?", "result": {}}});
        let nested = json!({"jsonrpc": "2.0", "id": {"result": [1, "]"]}, "method": "m"});
        for (message, expected) in [
            (&reply, true),
            (&error, true),
            (&progress, false),
            (&elicit, false),
            (&nested, false),
        ] {
            let text = serde_json::to_vec(message).unwrap();
            assert_eq!(is_reply(&text), expected, "{message}");
        }
        for broken in [
            &b""[..],
            b"[]",
            b"{\"id\":",
            b"{\"id\" 1}",
            b"{\"jsonrpc\":\"2.0\"}",
            b"\"result\"",
        ] {
            assert!(!is_reply(broken), "{}", String::from_utf8_lossy(broken));
        }
    }

    #[test]
    fn json_is_accepted_unless_weighed_zero() {
        let accepts = |value: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(http::header::ACCEPT, value.parse().unwrap());
            accepts_json(&headers)
        };
        assert!(accepts("application/json, text/event-stream"));
        assert!(accepts("text/event-stream,Application/JSON;q=0.5"));
        assert!(accepts("application/json; charset=utf-8"));
        assert!(!accepts("text/event-stream"));
        assert!(!accepts("application/json;q=0, text/event-stream"));
        assert!(!accepts("application/json; Q=0.000"));
        assert!(!accepts("application/jsonx"));
    }

    #[test]
    fn a_stream_is_read_up_to_its_first_message() {
        let reply = json!({"jsonrpc": "2.0", "id": 3, "result": {"text": "a\n\nb"}});
        let text = format!(
            "data:\nid: 0\nretry: 3000\n\n: keep-alive\n\n{}",
            event(&reply)
        );
        let Scan::Reply(range) = scan(text.as_bytes()) else {
            panic!("no reply in {text:?}");
        };
        let sent: serde_json::Value = serde_json::from_slice(&text.as_bytes()[range]).unwrap();
        assert_eq!(sent, reply);

        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}});
        assert_eq!(scan(event(&progress).as_bytes()), Scan::Other);
        assert_eq!(scan(b"data: {\"id\":1,\"result\":{}}\r\n\r\n"), Scan::Other);
        assert_eq!(scan(b"data: {\"id\":1,\r\n\n"), Scan::Other);
        assert_eq!(
            scan(b"data: {\"id\":1,\ndata: \"result\":{}}\n\n"),
            Scan::Other
        );
        assert_eq!(
            scan(b"data:\n\ndata: {\"id\""),
            Scan::Incomplete { from: 7 }
        );
    }

    mod middleware {
        use std::convert::Infallible;
        use std::time::Duration;

        use axum::Router;
        use axum::body::{Body, Bytes};
        use axum::http::{Request, Response};
        use axum::routing::any;
        use futures_util::StreamExt;
        use tower::ServiceExt;

        const REPLY: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"content":[]}}"#;
        const PROGRESS: &str =
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#;

        /// An event stream of `frames`, each sent after its delay, as rmcp sends one.
        fn stream_of(frames: Vec<(u64, String)>) -> Response<Body> {
            let frames = futures_util::stream::iter(frames).then(|(delay, frame)| async move {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                Ok::<_, Infallible>(Bytes::from(frame))
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .header("mcp-session-id", "s-1")
                .body(Body::from_stream(frames))
                .unwrap()
        }

        async fn through(
            frames: Vec<(u64, String)>,
            method: &str,
            accept: &str,
        ) -> (String, String, String) {
            let app = Router::new()
                .route(
                    "/mcp",
                    any(move || {
                        let frames = frames.clone();
                        async move { stream_of(frames) }
                    }),
                )
                .route_layer(axum::middleware::from_fn(
                    |request: axum::extract::Request, next: axum::middleware::Next| async move {
                        let wants = super::super::wants_whole(&request);
                        let response = next.run(request).await;
                        if wants {
                            super::super::send_whole(response).await
                        } else {
                            response
                        }
                    },
                ));
            let request = Request::builder()
                .method(method)
                .uri("/mcp")
                .header("accept", accept)
                .body(Body::empty())
                .unwrap();
            let response = app.oneshot(request).await.unwrap();
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default()
            };
            let (content_type, session) = (header("content-type"), header("mcp-session-id"));
            let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            (
                content_type,
                session,
                String::from_utf8(body.to_vec()).unwrap(),
            )
        }

        const BOTH: &str = "application/json, text/event-stream";
        const PRIMING: &str = "data:\nid: 0\nretry: 3000\n\n";

        #[tokio::test(start_paused = true)]
        async fn a_lone_reply_is_sent_whole_with_the_streams_headers() {
            let frames = vec![
                (0, PRIMING.to_owned()),
                (5, format!("data: {REPLY}\nid: 1\n\n")),
            ];
            let (content_type, session, body) = through(frames, "POST", BOTH).await;
            assert_eq!(content_type, "application/json");
            assert_eq!(session, "s-1");
            assert_eq!(body, REPLY);
            // Cut anywhere, across frames.
            let whole = format!("{PRIMING}data: {REPLY}\nid: 1\n\n");
            for cut in [1, 9, PRIMING.len() + 3, whole.len() - 1] {
                let frames = vec![(0, whole[..cut].to_owned()), (1, whole[cut..].to_owned())];
                let (content_type, _, body) = through(frames, "POST", BOTH).await;
                assert_eq!(
                    (content_type.as_str(), body.as_str()),
                    ("application/json", REPLY),
                    "cut at {cut}"
                );
            }
        }

        #[tokio::test(start_paused = true)]
        async fn what_needs_a_stream_keeps_it_byte_for_byte() {
            let progress_first = vec![
                (0, PRIMING.to_owned()),
                (5, format!("data: {PROGRESS}\nid: 1\n\n")),
                (5, format!("data: {REPLY}\nid: 2\n\n")),
            ];
            let late_reply = vec![
                (0, PRIMING.to_owned()),
                (2_000, format!("data: {REPLY}\nid: 1\n\n")),
            ];
            let not_rmcp = vec![(0, format!("data: {REPLY}\r\n\r\n"))];
            for (case, frames, method, accept) in [
                (
                    "progress before the reply",
                    progress_first.clone(),
                    "POST",
                    BOTH,
                ),
                ("a reply after the hold", late_reply.clone(), "POST", BOTH),
                ("CRLF lines", not_rmcp.clone(), "POST", BOTH),
                (
                    "a client that takes only streams",
                    progress_first.clone(),
                    "POST",
                    "text/event-stream",
                ),
                ("a GET stream", late_reply.clone(), "GET", BOTH),
            ] {
                let sent: String = frames.iter().map(|(_, frame)| frame.as_str()).collect();
                let (content_type, session, body) = through(frames, method, accept).await;
                assert_eq!(content_type, "text/event-stream", "{case}");
                assert_eq!(session, "s-1", "{case}");
                assert_eq!(body, sent, "{case}");
            }
        }

        #[tokio::test(start_paused = true)]
        async fn a_stream_that_ends_without_a_message_ends_as_it_was() {
            let (content_type, _, body) =
                through(vec![(0, PRIMING.to_owned())], "POST", BOTH).await;
            assert_eq!(
                (content_type.as_str(), body.as_str()),
                ("text/event-stream", PRIMING)
            );
        }
    }
}
