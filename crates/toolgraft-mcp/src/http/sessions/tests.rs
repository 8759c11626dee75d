//! The routing table driven by hand: the test plays rmcp's service loop on the
//! transport (`receive`, `send`) and its HTTP handlers on the manager.

use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};

use rmcp::model::{GetExtensions, RequestId};
use rmcp::service::OriginatingRequestId;

use super::*;

fn client(value: Value) -> ClientJsonRpcMessage {
    serde_json::from_value(value).unwrap()
}

fn server(value: Value) -> ServerJsonRpcMessage {
    serde_json::from_value(value).unwrap()
}

fn call(id: u64, token: Option<&str>) -> ClientJsonRpcMessage {
    let mut params = json!({"name": "t", "arguments": {}});
    if let Some(token) = token {
        params["_meta"] = json!({"progressToken": token});
    }
    client(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
}

fn reply(id: u64) -> ServerJsonRpcMessage {
    server(json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}))
}

fn progress(token: &str, step: u64) -> ServerJsonRpcMessage {
    server(json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": token, "progress": step}}))
}

fn list_changed() -> ServerJsonRpcMessage {
    server(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))
}

fn cancelled(id: u64) -> ClientJsonRpcMessage {
    client(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id}}),
    )
}

/// A session past its handshake, as rmcp's `handle_post` and `serve_server` leave it.
async fn open(sessions: &DirectSessions) -> (SessionId, DirectTransport) {
    let (id, mut transport) = sessions.create_session().await.unwrap();
    let init = client(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}),
    );
    let serve = async {
        let request = transport.receive().await.unwrap();
        assert!(matches!(request, ClientJsonRpcMessage::Request(_)));
        let response = server(json!({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "serverInfo": {"name": "test", "version": "0"}}}));
        transport.send(response).await.unwrap();
    };
    let (response, ()) = tokio::join!(sessions.initialize_session(&id, init), serve);
    assert_eq!(serde_json::to_value(response.unwrap()).unwrap()["id"], 0);
    (id, transport)
}

/// An event as `(id, message)`, `message` null for a priming event.
type Event = (Option<String>, Value);

/// What a stream holds right now, and whether it has ended (outside tokio's
/// budget, which would call a long stream pending part way).
fn drain(stream: &mut (impl Stream<Item = ServerSseMessage> + Unpin)) -> (Vec<Event>, bool) {
    let mut events = Vec::new();
    loop {
        match tokio::task::unconstrained(stream.next()).now_or_never() {
            Some(Some(event)) => {
                let message = event.message.map_or(Value::Null, |message| {
                    serde_json::to_value(&*message).unwrap()
                });
                events.push((event.event_id, message));
            }
            Some(None) => return (events, true),
            None => return (events, false),
        }
    }
}

fn ids(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .map(|(id, _)| id.as_deref().unwrap_or("-"))
        .collect()
}

#[tokio::test]
async fn a_reply_and_its_progress_ride_the_requests_own_stream() {
    let sessions = DirectSessions::default();
    let (id, mut transport) = open(&sessions).await;
    let mut stream = Box::pin(
        sessions
            .create_stream(&id, call(1, Some("p1")))
            .await
            .unwrap(),
    );
    let received = serde_json::to_value(transport.receive().await.unwrap()).unwrap();
    assert_eq!(received["method"], "tools/call");

    transport.send(progress("p1", 1)).await.unwrap();
    transport.send(progress("other", 1)).await.unwrap();
    transport.send(reply(1)).await.unwrap();
    let (events, ended) = drain(&mut stream);
    assert_eq!(ids(&events), ["0/0", "1/0", "2/0"]);
    assert_eq!(events[0].1, Value::Null, "priming first");
    assert_eq!(events[1].1["params"]["progressToken"], "p1");
    assert_eq!(events[2].1["id"], 1);
    assert!(ended, "the reply ends the stream");

    // The unknown token went to the GET stream, which replays it when it opens;
    // so does the done request's token now.
    transport.send(progress("p1", 2)).await.unwrap();
    let mut get = Box::pin(sessions.create_standalone_stream(&id).await.unwrap());
    let (events, ended) = drain(&mut get);
    assert_eq!(ids(&events), ["1", "2"]);
    assert_eq!(events[0].1["params"]["progressToken"], "other");
    assert!(!ended);
}

#[tokio::test]
async fn list_changed_goes_to_the_get_stream_and_a_second_get_idles() {
    let sessions = DirectSessions::default();
    let (id, mut transport) = open(&sessions).await;
    let mut post = Box::pin(sessions.create_stream(&id, call(1, None)).await.unwrap());
    let mut first = Box::pin(sessions.create_standalone_stream(&id).await.unwrap());
    transport.send(list_changed()).await.unwrap();
    let mut second = Box::pin(sessions.create_standalone_stream(&id).await.unwrap());
    transport.send(list_changed()).await.unwrap();

    let (events, _) = drain(&mut first);
    assert_eq!(ids(&events), ["1", "2"]);
    assert_eq!(events[0].1["method"], "notifications/tools/list_changed");
    assert_eq!(drain(&mut second), (vec![], false), "idle, kept open");
    assert_eq!(ids(&drain(&mut post).0), ["0/0"], "priming only");

    // The primary gone, the idle GET still open takes its place.
    drop(first);
    transport.send(list_changed()).await.unwrap();
    assert_eq!(ids(&drain(&mut second).0), ["3"]);
    // Both gone, the next GET takes their place with what the buffer holds.
    drop(second);
    transport.send(list_changed()).await.unwrap();
    let mut third = Box::pin(sessions.create_standalone_stream(&id).await.unwrap());
    assert_eq!(ids(&drain(&mut third).0), ["1", "2", "3", "4"]);
}

#[tokio::test]
async fn a_cancelled_requests_route_is_removed() {
    let sessions = DirectSessions::default();
    let (id, mut transport) = open(&sessions).await;
    let mut stream = Box::pin(
        sessions
            .create_stream(&id, call(1, Some("p1")))
            .await
            .unwrap(),
    );
    transport.receive().await.unwrap();
    sessions.accept_message(&id, cancelled(1)).await.unwrap();
    let received = serde_json::to_value(transport.receive().await.unwrap()).unwrap();
    assert_eq!(
        received["method"], "notifications/cancelled",
        "the service hears it"
    );
    let (events, ended) = drain(&mut stream);
    assert_eq!((ids(&events), ended), (vec!["0/0"], true));

    transport.send(progress("p1", 1)).await.unwrap();
    let mut get = Box::pin(sessions.create_standalone_stream(&id).await.unwrap());
    assert_eq!(
        ids(&drain(&mut get).0),
        ["1"],
        "late progress is no longer routed"
    );
}

#[tokio::test]
async fn server_requests_ride_their_originating_stream() {
    let sessions = DirectSessions::default();
    let (id, mut transport) = open(&sessions).await;
    let mut get = Box::pin(sessions.create_standalone_stream(&id).await.unwrap());
    let mut stream = Box::pin(sessions.create_stream(&id, call(1, None)).await.unwrap());
    let ping = |id: u64, origin: Option<u64>| {
        let mut message = server(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
        if let (ServerJsonRpcMessage::Request(request), Some(origin)) = (&mut message, origin) {
            let origin = OriginatingRequestId(RequestId::Number(origin as i64));
            request.request.extensions_mut().insert(origin);
        }
        message
    };
    transport.send(ping(7, Some(1))).await.unwrap();
    transport.send(ping(8, None)).await.unwrap();
    transport.send(ping(9, Some(42))).await.unwrap();
    let (events, _) = drain(&mut stream);
    assert_eq!(
        events.iter().map(|e| &e.1["id"]).collect::<Vec<_>>(),
        [&Value::Null, &json!(7)]
    );
    let (events, _) = drain(&mut get);
    assert_eq!(
        events.iter().map(|e| &e.1["id"]).collect::<Vec<_>>(),
        [&json!(8), &json!(9)]
    );
}

#[tokio::test]
async fn close_session_ends_the_service_and_its_streams() {
    let sessions = DirectSessions::default();
    let (id, mut transport) = open(&sessions).await;
    let mut stream = Box::pin(sessions.create_stream(&id, call(1, None)).await.unwrap());
    let mut get = Box::pin(sessions.create_standalone_stream(&id).await.unwrap());
    transport.receive().await.unwrap();
    assert!(sessions.has_session(&id).await.unwrap());

    sessions.close_session(&id).await.unwrap();
    assert!(transport.receive().await.is_none());
    assert!(
        drain(&mut stream).1 && drain(&mut get).1,
        "every stream ends"
    );
    assert!(!sessions.has_session(&id).await.unwrap());
    assert!(sessions.create_stream(&id, call(2, None)).await.is_err());
    assert!(transport.send(reply(1)).await.is_err());
    sessions.close_session(&id).await.unwrap();
}

#[tokio::test]
async fn two_sessions_are_separate() {
    let sessions = DirectSessions::default();
    let (a, mut transport_a) = open(&sessions).await;
    let (b, mut transport_b) = open(&sessions).await;
    assert_ne!(a, b);
    let mut stream_a = Box::pin(
        sessions
            .create_stream(&a, call(1, Some("p")))
            .await
            .unwrap(),
    );
    let mut stream_b = Box::pin(
        sessions
            .create_stream(&b, call(1, Some("p")))
            .await
            .unwrap(),
    );
    let mut get_b = Box::pin(sessions.create_standalone_stream(&b).await.unwrap());
    transport_a.receive().await.unwrap();
    transport_b.receive().await.unwrap();

    transport_a.send(progress("p", 1)).await.unwrap();
    transport_a.send(list_changed()).await.unwrap();
    transport_a.send(reply(1)).await.unwrap();
    assert_eq!(ids(&drain(&mut stream_a).0), ["0/0", "1/0", "2/0"]);
    assert_eq!(
        drain(&mut stream_b),
        (vec![(Some("0/0".into()), Value::Null)], false)
    );
    assert_eq!(drain(&mut get_b), (vec![], false));

    sessions.close_session(&a).await.unwrap();
    assert!(sessions.has_session(&b).await.unwrap());
    transport_b.send(reply(1)).await.unwrap();
    assert!(drain(&mut stream_b).1);
}

#[tokio::test]
async fn a_stream_resumes_after_its_last_event_id() {
    let sessions = DirectSessions::default();
    let (id, mut transport) = open(&sessions).await;
    let stream = sessions
        .create_stream(&id, call(1, Some("p1")))
        .await
        .unwrap();
    transport.receive().await.unwrap();
    drop(stream); // the client's connection dropped mid-call
    transport.send(progress("p1", 1)).await.unwrap();
    transport.send(reply(1)).await.unwrap();

    let mut resumed = Box::pin(sessions.resume(&id, "0/0".into()).await.unwrap());
    let (events, ended) = drain(&mut resumed);
    assert_eq!((ids(&events), ended), (vec!["1/0", "2/0"], true));
    assert_eq!(events[1].1["id"], 1);
    let mut again = Box::pin(sessions.resume(&id, "1/0".into()).await.unwrap());
    assert_eq!(ids(&drain(&mut again).0), ["2/0"]);

    for bad in ["0/9", "x", "1/", "-1", ""] {
        assert!(sessions.resume(&id, bad.into()).await.is_err(), "{bad}");
    }

    // The GET stream resumes the same way, after the id its client last saw.
    let get = sessions.create_standalone_stream(&id).await.unwrap();
    for _ in 0..3 {
        transport.send(list_changed()).await.unwrap();
    }
    drop(get);
    let mut resumed = Box::pin(sessions.resume(&id, "1".into()).await.unwrap());
    assert_eq!(ids(&drain(&mut resumed).0), ["2", "3"]);
}

#[tokio::test(start_paused = true)]
async fn a_finished_stream_is_resumable_for_a_while_only() {
    let sessions = DirectSessions::default();
    let (id, mut transport) = open(&sessions).await;
    drop(sessions.create_stream(&id, call(1, None)).await.unwrap());
    transport.receive().await.unwrap();
    transport.send(reply(1)).await.unwrap();
    tokio::time::advance(COMPLETED_TTL).await;
    // Opening another stream sweeps the finished one.
    drop(sessions.create_stream(&id, call(2, None)).await.unwrap());
    assert!(sessions.resume(&id, "0/0".into()).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn an_idle_session_ends_after_five_minutes() {
    let sessions = DirectSessions::default();
    let start = Instant::now();
    let (id, mut transport) = open(&sessions).await;
    tokio::time::advance(Duration::from_secs(200)).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    sessions
        .accept_message(&id, client(initialized))
        .await
        .unwrap();
    assert!(transport.receive().await.is_some());

    assert!(transport.receive().await.is_none());
    assert!(start.elapsed() >= Duration::from_secs(200) + KEEP_ALIVE);
    assert!(start.elapsed() < Duration::from_secs(201) + KEEP_ALIVE);
    assert!(!sessions.has_session(&id).await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_session_without_initialize_ends_after_a_minute() {
    let sessions = DirectSessions::default();
    let start = Instant::now();
    let (id, mut transport) = sessions.create_session().await.unwrap();
    assert!(transport.receive().await.is_none());
    assert!(start.elapsed() >= INIT_TIMEOUT && start.elapsed() < KEEP_ALIVE);
    assert!(!sessions.has_session(&id).await.unwrap());
}

#[tokio::test]
async fn a_client_that_does_not_read_is_cut_off_not_waited_for() {
    let sessions = DirectSessions::default();
    let (id, mut transport) = open(&sessions).await;
    let mut stream = Box::pin(
        sessions
            .create_stream(&id, call(1, Some("p")))
            .await
            .unwrap(),
    );
    transport.receive().await.unwrap();
    // The priming event holds one place.
    for step in 1..STREAM_CAPACITY as u64 {
        transport.send(progress("p", step)).await.unwrap();
    }
    let overflow = transport.send(progress("p", STREAM_CAPACITY as u64)).await;
    assert!(matches!(overflow, Err(DirectSessionsError::NotReading)));
    transport.send(reply(1)).await.unwrap();
    let (events, ended) = drain(&mut stream);
    assert_eq!((events.len(), ended), (STREAM_CAPACITY, true));

    // What did not fit waits for a resume.
    let last = events.last().and_then(|e| e.0.clone()).unwrap();
    let mut resumed = Box::pin(sessions.resume(&id, last).await.unwrap());
    let (events, ended) = drain(&mut resumed);
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].1["id"], 1);
    assert!(ended);
}

#[tokio::test]
async fn unknown_sessions_and_odd_input_are_errors_not_panics() {
    let sessions = DirectSessions::default();
    let nobody: SessionId = "nobody".into();
    assert!(!sessions.has_session(&nobody).await.unwrap());
    assert!(
        sessions
            .create_stream(&nobody, call(1, None))
            .await
            .is_err()
    );
    assert!(
        sessions
            .accept_message(&nobody, cancelled(1))
            .await
            .is_err()
    );
    assert!(sessions.resume(&nobody, "0".into()).await.is_err());
    sessions.close_session(&nobody).await.unwrap();

    let (id, _transport) = sessions.create_session().await.unwrap();
    let not_a_request = sessions.initialize_session(&id, cancelled(1)).await;
    assert!(matches!(
        not_a_request,
        Err(DirectSessionsError::NotARequest)
    ));
}

fn initialized() -> ClientJsonRpcMessage {
    client(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
}

#[tokio::test]
async fn a_post_that_leaves_before_its_request_is_queued_leaves_no_route() {
    let sessions = DirectSessions::default();
    let (id, _transport) = open(&sessions).await;
    // The service loop is busy: its queue is full.
    for _ in 0..INBOUND {
        sessions.accept_message(&id, initialized()).await.unwrap();
    }
    let mut post = Box::pin(sessions.create_stream(&id, call(1, Some("p"))));
    assert!((&mut post).now_or_never().is_none(), "waits for room");
    drop(post); // the client went away meanwhile

    let session = sessions.get(&id).unwrap();
    let state = session.lock();
    assert!(state.streams.is_empty(), "{:?}", state.streams.keys());
    assert!(state.requests.is_empty() && state.progress.is_empty());
}

#[tokio::test]
async fn a_request_id_sent_again_in_flight_ends_the_older_stream() {
    let sessions = DirectSessions::default();
    let (id, mut transport) = open(&sessions).await;
    let mut older = Box::pin(sessions.create_stream(&id, call(1, None)).await.unwrap());
    transport.receive().await.unwrap();
    let mut newer = Box::pin(sessions.create_stream(&id, call(1, None)).await.unwrap());
    transport.receive().await.unwrap();
    // rmcp's service answers an id once, however often it came.
    transport.send(reply(1)).await.unwrap();

    let (events, ended) = drain(&mut newer);
    assert_eq!((ids(&events), ended), (vec!["0/1", "1/1"], true));
    let (events, ended) = drain(&mut older);
    assert_eq!(ids(&events), ["0/0"]);
    assert!(ended, "the older stream ends instead of waiting for ever");
}

#[tokio::test(start_paused = true)]
async fn broadcasts_nobody_reads_do_not_keep_a_session_alive() {
    /// `list_changed` every minute for twenty minutes, as a toolset under edit sends it.
    async fn broadcast(session: Arc<Session>) {
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_secs(60)).await;
            let _ = session.lock().route(list_changed());
        }
    }
    let sessions = DirectSessions::default();

    // Nobody reads the GET stream: the session ends while the broadcasts go on.
    let (_, mut transport) = open(&sessions).await;
    let session = transport.session.clone();
    tokio::select! {
        end = transport.receive() => assert!(end.is_none()),
        () = broadcast(session) => panic!("twenty idle minutes, the session still open"),
    }

    // A client reads them: the session is in use.
    let (id, mut transport) = open(&sessions).await;
    let _get = sessions.create_standalone_stream(&id).await.unwrap();
    let session = transport.session.clone();
    tokio::select! {
        _ = transport.receive() => panic!("ended while its GET stream was read"),
        () = broadcast(session) => {}
    }
}

#[tokio::test]
async fn finished_streams_kept_for_a_resume_are_few() {
    let sessions = DirectSessions::default();
    let (id, mut transport) = open(&sessions).await;
    let calls = MAX_COMPLETED as u64 + 1;
    for call_id in 1..=calls {
        // Each client leaves before its (perhaps large) answer.
        drop(
            sessions
                .create_stream(&id, call(call_id, None))
                .await
                .unwrap(),
        );
        transport.receive().await.unwrap();
        transport.send(reply(call_id)).await.unwrap();
    }
    assert!(
        sessions.resume(&id, "0/0".into()).await.is_err(),
        "the oldest went"
    );
    let last = format!("0/{}", calls - 1);
    assert!(sessions.resume(&id, last).await.is_ok());
    assert_eq!(
        sessions.get(&id).unwrap().lock().streams.len(),
        MAX_COMPLETED
    );
}

#[tokio::test]
async fn gets_that_came_and_went_do_not_push_out_an_idle_one_still_open() {
    let sessions = DirectSessions::default();
    let (id, _transport) = open(&sessions).await;
    let _primary = sessions.create_standalone_stream(&id).await.unwrap();
    let mut kept = Box::pin(sessions.create_standalone_stream(&id).await.unwrap());
    for _ in 0..MAX_SHADOWS {
        drop(sessions.create_standalone_stream(&id).await.unwrap());
    }
    assert_eq!(drain(&mut kept), (vec![], false), "still open");
}

#[tokio::test]
async fn an_idle_get_takes_over_when_the_primary_goes_away() {
    // A client that reconnects its GET before the old connection is seen to drop:
    // the new one idles while the old one looks alive, then carries on from the
    // first event the old one was not handed.
    let sessions = DirectSessions::default();
    let (id, mut transport) = open(&sessions).await;
    let mut first = Box::pin(sessions.create_standalone_stream(&id).await.unwrap());
    transport.send(list_changed()).await.unwrap();
    let mut second = Box::pin(sessions.create_standalone_stream(&id).await.unwrap());
    assert_eq!(ids(&drain(&mut first).0), ["1"]);
    assert_eq!(drain(&mut second), (vec![], false));

    drop(first);
    transport.send(list_changed()).await.unwrap();
    transport.send(list_changed()).await.unwrap();
    let (events, ended) = drain(&mut second);
    assert_eq!(ids(&events), ["2", "3"], "nothing lost, nothing twice");
    assert!(!ended);
}
