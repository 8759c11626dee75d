//! One trace from an MCP client to a worker process (feature `otel`), on every
//! tier: a client sends `traceparent` in a request's `_meta` over Streamable
//! HTTP to a server process (`server_process`), whose `[proxy, remote, retry,
//! timeout]` runs the body on a worker process; both export their spans over
//! OTLP/HTTP to a loopback receiver this test starts (`otlp_receiver`, the
//! OpenTelemetry project's protocol types), and the test reads the trace back.

use std::collections::HashMap;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use rmcp::transport::StreamableHttpClientTransport;

use crate::otlp::ENDPOINT;
use crate::otlp_receiver::{ReceivedSpan, Receiver};
use crate::support::*;

on_every_tier!(a_workers_spans_continue_the_clients_trace_over_otlp);

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
const LAYERED: &str = "steps_proxy_remote_retry_timeout";

/// The processes' environment: export to `receiver`, in batches sent every 50
/// ms (the processes are killed, not stopped, at the end).
fn exporting(receiver: &Receiver) -> [(&'static str, String); 2] {
    [
        (ENDPOINT, receiver.endpoint()),
        ("OTEL_BSP_SCHEDULE_DELAY", "50".to_owned()),
    ]
}

async fn a_workers_spans_continue_the_clients_trace_over_otlp(env: Env) {
    let receiver = Receiver::start(0, |_| {}).await.unwrap();
    let vars = exporting(&receiver);
    let vars: Vec<(&str, &str)> = vars
        .iter()
        .map(|(key, value)| (*key, value.as_str()))
        .collect();
    let worker = WorkerProcess::spawn(&env, "worker_process", &vars);
    let server = WorkerProcess::spawn(&env, "otel::server_process", &vars);
    let line = server
        .wait_for_line(&["otel server: MCP over HTTP at "])
        .await;
    let url = line.rsplit(' ').next().unwrap().to_owned();
    let client = ().serve(StreamableHttpClientTransport::from_uri(url)).await.unwrap();

    // The client's span is `CLIENT_SPAN` of trace `TRACE_ID`; it listens for
    // progress, so the body's reports go back (and onto the job's span).
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let answer = client
        .call_tool(call(
            json!({"traceparent": traceparent, "progressToken": 1}),
        ))
        .await
        .unwrap();
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    let job_span = |spans: &[ReceivedSpan], trace: &str| {
        spans
            .iter()
            .find(|span| span.trace_id == trace && span.name == format!("process {}", env.queue))
            .cloned()
    };
    // The processes send their batches apart: the server's spans (which end
    // after the worker's) may come later.
    let spans = receiver
        .wait_for(Duration::from_secs(20), |spans| {
            job_span(spans, TRACE_ID).is_some()
                && spans
                    .iter()
                    .any(|span| span.name == format!("wait {}", env.queue))
                && whole(spans, TRACE_ID)
        })
        .await
        .unwrap_or_else(|| {
            panic!(
                "no job span and queue wait: {:#?}\n{}",
                receiver.spans(),
                worker.log_text()
            )
        });
    print_tree(&spans, TRACE_ID);

    // Every span the worker sent is in the client's trace, and descends from
    // the client's span: through the server's spans where it sends them (the
    // backend layer's is the job's parent), else straight from it.
    let by_id: HashMap<&str, &ReceivedSpan> = spans
        .iter()
        .map(|span| (span.span_id.as_str(), span))
        .collect();
    let workers: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|span| span.service == "toolgraft-jobs-worker")
        .collect();
    assert!(workers.len() >= 2, "{workers:#?}");
    for span in &workers {
        assert_eq!(span.trace_id, TRACE_ID, "{span:#?}");
        assert!(
            descends(span, CLIENT_SPAN, &by_id),
            "{span:#?} is not under the client's span"
        );
    }
    // The server's spans, where the core and toolgraft-mcp make them: the
    // job's parent is the `remote` layer's span, under the request's.
    if let Some(parent) = by_id.get(job_span(&spans, TRACE_ID).unwrap().parent_span_id.as_str()) {
        assert_eq!(parent.service, "toolgraft-jobs-server", "{parent:#?}");
        let server = spans
            .iter()
            .find(|span| span.trace_id == TRACE_ID && span.kind == "server")
            .expect("the request's server span");
        assert_eq!(server.parent_span_id, CLIENT_SPAN, "{server:#?}");
        assert!(descends(parent, &server.span_id, &by_id), "{parent:#?}");
    }

    let job = job_span(&spans, TRACE_ID).unwrap();
    assert_eq!(job.kind, "consumer");
    assert_eq!(
        job.attributes["messaging.destination.name"],
        json!(env.queue)
    );
    assert_eq!(job.attributes["messaging.operation.type"], json!("process"));
    assert_eq!(job.attributes["toolgraft.job.tool"], json!("steps_proxy"));
    let wait = spans
        .iter()
        .find(|span| span.trace_id == TRACE_ID && span.name == format!("wait {}", env.queue))
        .unwrap();
    assert_eq!(
        wait.parent_span_id, job.parent_span_id,
        "the wait and the run: one parent"
    );
    assert_eq!(
        wait.attributes["messaging.message.id"],
        job.attributes["messaging.message.id"]
    );
    assert!(
        wait.start_unix_nano <= job.start_unix_nano,
        "{wait:#?}\n{job:#?}"
    );
    assert!(
        wait.end_unix_nano <= job.start_unix_nano,
        "picked up, then run"
    );
    // The layer the worker runs (`proxy`, inside `remote`) is the job's child.
    let inside = spans
        .iter()
        .find(|span| span.parent_span_id == job.span_id && span.name.ends_with(" proxy"))
        .unwrap_or_else(|| panic!("no span of the worker's `proxy` under the job's: {spans:#?}"));
    assert_eq!(inside.service, "toolgraft-jobs-worker");
    let progress: Vec<&Value> = job
        .events
        .iter()
        .filter(|event| event.name == "toolgraft.job.progress")
        .map(|event| &event.attributes["toolgraft.progress"])
        .collect();
    assert!(!progress.is_empty(), "no progress event: {:#?}", job.events);
    assert_eq!(
        progress.last(),
        Some(&&json!(3.0)),
        "the last report is never folded away"
    );

    // A malformed traceparent: the call succeeds, and its job starts a trace
    // of its own.
    let malformed = traceparent.to_uppercase();
    let answer = client
        .call_tool(call(json!({"traceparent": malformed})))
        .await
        .unwrap();
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    let spans = receiver
        .wait_for(Duration::from_secs(20), |spans| {
            spans
                .iter()
                .filter(|span| span.name == format!("process {}", env.queue))
                .count()
                >= 2
        })
        .await
        .expect("the second job's span");
    let fresh = spans
        .iter()
        .filter(|span| span.name == format!("process {}", env.queue))
        .find(|span| span.trace_id != TRACE_ID)
        .expect("a job span in a trace of its own");
    assert_ne!(fresh.trace_id, "0".repeat(32));
    assert_ne!(fresh.parent_span_id, CLIENT_SPAN);
    client.cancel().await.unwrap();

    // A caller that stops waiting withdraws its job: the worker stops the
    // body, and says so on the job's span.
    const WITHDRAWN_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
    let trace =
        context::TraceContext::parse(&format!("00-{WITHDRAWN_TRACE}-b7ad6b7169203331-01"), None)
            .unwrap();
    let toolset = toolset(&env.remote());
    let call = context::with(trace, toolset.call("slow_remote", json!({"ms": 20_000})));
    assert!(
        tokio::time::timeout(Duration::from_millis(500), call)
            .await
            .is_err()
    );
    let spans = receiver
        .wait_for(Duration::from_secs(20), |spans| {
            job_span(spans, WITHDRAWN_TRACE).is_some()
        })
        .await
        .unwrap_or_else(|| panic!("no span of the withdrawn job: {}", worker.log_text()));
    let withdrawn = job_span(&spans, WITHDRAWN_TRACE).unwrap();
    let event = withdrawn
        .events
        .iter()
        .find(|event| event.name == "toolgraft.job.withdrawn")
        .unwrap_or_else(|| panic!("{withdrawn:#?}"));
    assert!(
        event.attributes.contains_key("toolgraft.job.ran_ms"),
        "{event:#?}"
    );
    assert!(
        withdrawn.duration() < Duration::from_secs(10),
        "the body stopped"
    );

    // A body's error: the job's span says its kind and its message.
    const FAILED_TRACE: &str = "11f7651916cd43dd8448eb211c80319c";
    let trace =
        context::TraceContext::parse(&format!("00-{FAILED_TRACE}-b7ad6b7169203331-01"), None)
            .unwrap();
    let failed = context::with(trace, toolset.call("fail_remote", json!({}))).await;
    assert!(matches!(failed, Err(ToolError::Body { .. })), "{failed:?}");
    let spans = receiver
        .wait_for(Duration::from_secs(20), |spans| {
            job_span(spans, FAILED_TRACE).is_some()
        })
        .await
        .expect("the failed job's span");
    let failed = job_span(&spans, FAILED_TRACE).unwrap();
    assert_eq!(
        failed.attributes["error.type"],
        json!("body"),
        "{failed:#?}"
    );
    assert_eq!(failed.status.0, "error");
    assert!(
        failed.status.1.contains("the body failed on purpose"),
        "{failed:#?}"
    );
}

/// A `tools/call` of the layered `steps` with `_meta` = `meta`.
fn call(meta: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(LAYERED)
        .with_arguments(json!({"steps": 3, "ms": 30}).as_object().unwrap().clone());
    let Value::Object(meta) = meta else {
        unreachable!()
    };
    params.meta = Some(RequestMetaObject::from(meta));
    params
}

/// Whether each span of `trace` has its parent received, or the client's.
fn whole(spans: &[ReceivedSpan], trace: &str) -> bool {
    let ids: Vec<&str> = spans.iter().map(|span| span.span_id.as_str()).collect();
    spans
        .iter()
        .filter(|span| span.trace_id == trace)
        .all(|span| {
            span.parent_span_id == CLIENT_SPAN || ids.contains(&span.parent_span_id.as_str())
        })
}

/// Whether `ancestor` is `span`'s parent, or its parent's, and so on.
fn descends(span: &ReceivedSpan, ancestor: &str, by_id: &HashMap<&str, &ReceivedSpan>) -> bool {
    let mut parent = span.parent_span_id.as_str();
    for _ in 0..by_id.len() + 1 {
        if parent == ancestor {
            return true;
        }
        match by_id.get(parent) {
            Some(next) => parent = &next.parent_span_id,
            None => return false,
        }
    }
    false
}

/// The trace as the receiver stored it, for a reader of the test's output.
fn print_tree(spans: &[ReceivedSpan], trace: &str) {
    fn walk(spans: &[ReceivedSpan], trace: &str, parent: &str, depth: usize) {
        for span in spans
            .iter()
            .filter(|span| span.trace_id == trace && span.parent_span_id == parent)
        {
            let events: Vec<&str> = span
                .events
                .iter()
                .map(|event| event.name.as_str())
                .collect();
            eprintln!(
                "{:indent$}{} [{}, {}] {} {:?} {events:?}",
                "",
                span.name,
                span.service,
                span.kind,
                span.span_id,
                span.duration(),
                indent = depth * 2
            );
            walk(spans, trace, &span.span_id, depth + 1);
        }
    }
    eprintln!("trace {trace}, under the client's span {CLIENT_SPAN}:");
    walk(spans, trace, CLIENT_SPAN, 1);
}

/// The MCP server process the test starts: this binary, run as
/// `jobs --exact otel::server_process --ignored`, serving the support toolset
/// over Streamable HTTP, and exporting its spans where the test says.
#[test]
#[ignore = "an MCP server process: the otel tests start it"]
fn server_process() {
    let (Ok(url), Ok(queue)) = (std::env::var(WORKER_URL), std::env::var(WORKER_QUEUE)) else {
        return;
    };
    let _otel = crate::otlp::init("toolgraft-jobs-server").unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let remote = Remote::new(url)
            .unwrap()
            .with_queue(queue)
            .unwrap()
            .with_timeout(Duration::from_secs(30));
        let mcp = toolgraft_mcp::http::McpHttp::new(
            toolgraft_mcp::ToolsetServer::new(toolset(&remote)),
            toolgraft_mcp::http::Guard::off(),
        );
        let serving = mcp.serve(([127, 0, 0, 1], 0)).await.unwrap();
        eprintln!("otel server: MCP over HTTP at {}", serving.url());
        serving.wait().await.unwrap();
    });
}
