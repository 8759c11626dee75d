//! The caller's W3C trace context on a worker process: a body there continues
//! the caller's trace (and sends on its `tracestate`), on every tier.

use crate::support::*;
use toolgraft::context::TraceContext;

on_every_tier!(the_callers_trace_reaches_the_worker_as_it_was);

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACESTATE: &str = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";

async fn the_callers_trace_reaches_the_worker_as_it_was(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let trace = TraceContext::parse(TRACEPARENT, Some(TRACESTATE)).unwrap();
    let call = toolset.call("whereami_remote", json!({"city": "Tromsø"}));
    let answer = report(context::with(trace, call).await.unwrap());
    assert_eq!(answer.pid, worker.pid(), "the body ran in the worker");
    assert_eq!(
        answer.trace,
        Some((TRACEPARENT.to_owned(), TRACESTATE.to_owned())),
        "{}",
        worker.log_text()
    );

    // A call in no trace arrives in none: nothing is made up on the way.
    let untraced = report(
        toolset
            .call("whereami_remote", json!({"city": "Bodø"}))
            .await
            .unwrap(),
    );
    assert_eq!(untraced.trace, None);
}
