//! The request an HTTP upstream's log message came within.
//!
//! Over Streamable HTTP a server sends what belongs to a request on that
//! request's response stream. rmcp marks the upstream's *requests* with the
//! stream they came on (`InboundStreamOrigin`), not its notifications, so a
//! log message could only be given to the one call in flight, and was given to
//! none while another call was in flight or had just ended. This client marks
//! them: each `notifications/message` gets the `_meta` key [`ORIGIN`] naming the
//! request whose stream it came on (`null` on the session's own stream),
//! written over whatever the upstream put there, so an upstream cannot name a
//! call of its choosing. [`Listener`](super::client::Listener) reads it on the links this client
//! serves only (a stdio upstream's mark would be its own).

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    ClientJsonRpcMessage, GetMeta as _, RequestId, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde_json::Value;
use sse_stream::Sse;

use super::client::ORIGIN;

/// The method marked: the only notification that names no call of its own
/// (progress names its token).
const LOG_MESSAGE: &str = "notifications/message";

/// An HTTP client whose event streams mark their log messages.
#[derive(Clone)]
pub(super) struct Marking<C>(pub(super) C);

type Events = BoxStream<'static, Result<Sse, SseError>>;

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Marking<C> {
    type Error = C::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
    + Send
    + '_ {
        let request = request_of(&message);
        marked_post(
            request,
            self.0
                .post_message(uri, message, session_id, auth_header, custom_headers),
        )
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
    + Send
    + '_ {
        let request = request_of(&message);
        marked_post(
            request,
            self.0.post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            ),
        )
    }

    fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
    + Send
    + '_ {
        let request = request_of(&message);
        marked_post(
            request,
            self.0.post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            ),
        )
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
        let events = self
            .0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await?;
        Ok(marked(events, None))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
        let events = self
            .0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(marked(events, None))
    }
}

/// The id of `message` if it is a request: what its response stream carries
/// is that request's.
fn request_of(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

/// The response of `post`, sent as `request`, with its log messages marked:
/// each way of posting (the inner client's own, with its limits) is wrapped
/// the same.
async fn marked_post<E>(
    request: Option<RequestId>,
    post: impl Future<Output = Result<StreamableHttpPostResponse, E>>,
) -> Result<StreamableHttpPostResponse, E> {
    post.await
        .map(|response| marked_response(response, request))
}

fn marked_response(
    response: StreamableHttpPostResponse,
    request: Option<RequestId>,
) -> StreamableHttpPostResponse {
    match response {
        StreamableHttpPostResponse::Sse(events, session) => {
            StreamableHttpPostResponse::Sse(marked(events, request), session)
        }
        // rmcp hands a JSON body to the handler whatever it is, so a log
        // message there would keep the mark the upstream wrote.
        StreamableHttpPostResponse::Json(mut message, session) => {
            mark_message(&mut message, &mark_of(request));
            StreamableHttpPostResponse::Json(message, session)
        }
        other => other,
    }
}

/// The mark naming `request` (`None`: the session's own stream, or a
/// response stream of no request).
fn mark_of(request: Option<RequestId>) -> Value {
    request.map_or(Value::Null, |id| match id {
        RequestId::Number(number) => Value::from(number),
        RequestId::String(text) => Value::from(text.to_string()),
    })
}

/// Marks `message` as `origin`'s if it is a log message.
fn mark_message(message: &mut ServerJsonRpcMessage, origin: &Value) {
    if let ServerJsonRpcMessage::Notification(notification) = message
        && matches!(
            notification.notification,
            ServerNotification::LoggingMessageNotification(_)
        )
    {
        notification
            .notification
            .get_meta_mut()
            .0
            .0
            .insert(ORIGIN.to_owned(), origin.clone());
    }
}

/// `events` with each log message marked as `request`'s (`None`: the
/// session's own stream, or a response stream of no request).
fn marked(events: Events, request: Option<RequestId>) -> Events {
    let origin = mark_of(request);
    events
        .map(move |event| {
            event.map(|mut event| {
                if let Some(data) = &mut event.data {
                    mark(data, &origin);
                }
                event
            })
        })
        .boxed()
}

/// Marks `data` as `origin`'s if it is a log message. Other events (answers,
/// whatever their size) are searched for the method's name (or an escape) and
/// left as they are.
fn mark(data: &mut String, origin: &Value) {
    if !may_name_log_message(data.as_bytes()) {
        return;
    }
    // An answer that holds an escape (any non-ASCII text a Python server
    // writes) is only scanned, not built, to learn it is none.
    match serde_json::from_str::<Head<'_>>(data) {
        Ok(head) if head.method.as_deref() == Some(LOG_MESSAGE) => {}
        _ => return,
    }
    let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(data) else {
        return;
    };
    if message.contains_key("id") || message.get("method") != Some(&Value::from(LOG_MESSAGE)) {
        return;
    }
    let Some(Value::Object(params)) = message.get_mut("params") else {
        return;
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    // A `_meta` that is not an object fails rmcp's reading of the message,
    // as it would unmarked.
    let Value::Object(meta) = meta else {
        return;
    };
    meta.insert(ORIGIN.to_owned(), origin.clone());
    if let Ok(text) = serde_json::to_string(&message) {
        *data = text;
    }
}

/// A JSON-RPC message's method, the rest read past.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
}

/// Whether `data` may be a log message: it has the method's name as
/// written, or an escape (`\/`, `\u006e`) that a JSON reader turns into
/// that name; one missed would keep the mark the upstream wrote.
fn may_name_log_message(data: &[u8]) -> bool {
    use memchr::memmem::find;
    find(data, LOG_MESSAGE.as_bytes()).is_some()
        || find(data, br"\/").is_some()
        || find(data, br"\u").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn marking(message: Value, origin: Value) -> Value {
        let mut data = message.to_string();
        mark(&mut data, &origin);
        serde_json::from_str(&data).unwrap()
    }

    #[test]
    fn a_log_message_is_marked_over_what_the_upstream_wrote() {
        let message = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "x", "_meta": {"io.toolgraft/stream": 99, "kept": 1}}});
        let marked = marking(message, json!(7));
        assert_eq!(
            marked["params"]["_meta"],
            json!({"io.toolgraft/stream": 7, "kept": 1})
        );
        let unassociated = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "x"}});
        assert_eq!(
            marking(unassociated, Value::Null)["params"]["_meta"],
            json!({"io.toolgraft/stream": null})
        );
    }

    #[test]
    fn answers_and_other_notifications_are_left_as_they_are() {
        let answer = json!({"jsonrpc": "2.0", "id": 3,
            "result": {"content": [{"type": "text", "text": "notifications/message"}]}});
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1, "message": "notifications/message"}});
        for message in [answer, progress] {
            let text = message.to_string();
            let mut data = text.clone();
            mark(&mut data, &json!(1));
            assert_eq!(data, text);
        }
        // Escapes in an answer: read past, and left as written.
        let escaped = r#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"caf\u00e9 \/"}]}}"#;
        let mut data = escaped.to_owned();
        mark(&mut data, &json!(1));
        assert_eq!(data, escaped);
        let mut junk = "notifications/message {".to_owned();
        mark(&mut junk, &json!(1));
        assert_eq!(junk, "notifications/message {");
    }

    /// What rmcp reads as the mark of `data` once marked as request 7's.
    fn mark_as_rmcp_reads(mut data: String) -> Option<RequestId> {
        use super::super::client::origin_of;
        use rmcp::model::{GetMeta, ServerJsonRpcMessage};
        mark(&mut data, &json!(7));
        let ServerJsonRpcMessage::Notification(notification) = serde_json::from_str(&data).unwrap()
        else {
            panic!("a notification")
        };
        origin_of(notification.notification.get_meta())
    }

    #[test]
    fn a_method_written_with_escapes_is_marked_as_rmcp_reads_it() {
        for method in [r"notifications\/message", r"\u006eotifications/message"] {
            let data = format!(
                r#"{{"jsonrpc":"2.0","method":"{method}","params":{{"level":"info","data":"x","_meta":{{"io.toolgraft/stream":99}}}}}}"#
            );
            assert_eq!(
                mark_as_rmcp_reads(data),
                Some(RequestId::Number(7)),
                "{method}"
            );
        }
    }

    #[test]
    fn no_log_message_rmcp_reads_keeps_the_upstreams_mark() {
        use rmcp::model::{ServerJsonRpcMessage, ServerNotification};
        let spoofs = [
            // Read as a request (of a method rmcp's client does not serve).
            r#"{"jsonrpc":"2.0","id":1,"method":"notifications/message","params":{"level":"info","data":"x","_meta":{"io.toolgraft/stream":99}}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"notifications/message","params":{"level":"info","data":"x","_meta":{"io.toolgraft/stream":99}}}"#,
            // A batch, which rmcp does not read.
            r#"[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x","_meta":{"io.toolgraft/stream":99}}}]"#,
            // Two `_meta`s, two marks, two `params`.
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x","_meta":{"io.toolgraft/stream":99},"_meta":{"io.toolgraft/stream":98}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x","_meta":{"io.toolgraft/stream":99,"io.toolgraft/stream":"98"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x","_meta":{"io.toolgraft/stream":99}},"params":{"level":"info","data":"x","_meta":{"io.toolgraft/stream":98}}}"#,
            // A `_meta` or `params` that is not an object.
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x","_meta":[99]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":[{"_meta":{"io.toolgraft/stream":99}}]}"#,
            // The mark as a string of the number.
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x","_meta":{"io.toolgraft/stream":"99"}}}"#,
        ];
        for spoof in spoofs {
            let mut data = spoof.to_owned();
            mark(&mut data, &json!(7));
            if let Ok(ServerJsonRpcMessage::Notification(notification)) =
                serde_json::from_str(&data)
                && matches!(
                    notification.notification,
                    ServerNotification::LoggingMessageNotification(_)
                )
            {
                assert_eq!(
                    mark_as_rmcp_reads(spoof.to_owned()),
                    Some(RequestId::Number(7)),
                    "{spoof}"
                );
            }
        }
    }

    #[test]
    fn a_log_message_answered_as_json_is_marked_too() {
        use super::super::client::origin_of;
        use rmcp::model::{GetMeta, ServerJsonRpcMessage, ServerNotification};
        let spoofed: ServerJsonRpcMessage = serde_json::from_value(json!({"jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "x", "_meta": {"io.toolgraft/stream": 99}}}))
        .unwrap();
        let response = StreamableHttpPostResponse::Json(spoofed, None);
        let StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Notification(notification), _) =
            marked_response(response, Some(RequestId::Number(7)))
        else {
            panic!("a notification")
        };
        assert!(matches!(
            notification.notification,
            ServerNotification::LoggingMessageNotification(_)
        ));
        assert_eq!(
            origin_of(notification.notification.get_meta()),
            Some(RequestId::Number(7))
        );
    }

    #[test]
    fn a_mark_is_read_as_the_request_it_names() {
        use super::super::client::origin_of;
        use rmcp::model::{GetMeta, ServerJsonRpcMessage};
        // As rmcp reads it: the notification's `_meta` is its context's.
        let read = |origin: Value| {
            let message = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "x"}});
            let marked = marking(message, origin);
            let ServerJsonRpcMessage::Notification(notification) =
                serde_json::from_value(marked).unwrap()
            else {
                panic!("a notification")
            };
            origin_of(notification.notification.get_meta())
        };
        assert_eq!(read(json!(4)), Some(RequestId::Number(4)));
        assert_eq!(read(json!("a")), Some(RequestId::String("a".into())));
        assert_eq!(read(Value::Null), None);
    }
}
