//! The W3C trace context entry: what `parse` keeps and what it ignores (every
//! kind of malformed, oversized and hostile input), and how it crosses to a
//! worker thread and, serialized, to a worker process.

use serde_json::json;
use toolgraft::Name;
use toolgraft::context::{
    self, MAX_TRACESTATE_LEN, MAX_TRACESTATE_MEMBERS, TraceContext, ZeroSpanId,
};
use toolgraft::relocation::{Departure, WireContext};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn a_valid_traceparent_reads_as_it_was_sent() {
    let trace = TraceContext::parse(VALID, None).unwrap();
    assert_eq!(trace.trace_id(), TRACE_ID);
    assert_eq!(trace.parent_id(), PARENT_ID);
    assert!(trace.sampled());
    assert_eq!(trace.traceparent(), VALID);
    assert_eq!(trace.tracestate(), "");

    let unsampled = TraceContext::parse(&format!("00-{TRACE_ID}-{PARENT_ID}-00"), None).unwrap();
    assert!(!unsampled.sampled());
    // Flags the W3C does not define are not sent on.
    let unknown = TraceContext::parse(&format!("00-{TRACE_ID}-{PARENT_ID}-09"), None).unwrap();
    assert_eq!(unknown.traceparent(), VALID);
    // A later version is read by its version-00 fields and sent on as 00.
    for later in [
        format!("01-{TRACE_ID}-{PARENT_ID}-01"),
        format!("cc-{TRACE_ID}-{PARENT_ID}-01-what-comes-next"),
    ] {
        let trace = TraceContext::parse(&later, None).unwrap();
        assert_eq!(trace.traceparent(), VALID, "{later}");
    }
}

#[test]
fn a_malformed_traceparent_is_ignored() {
    let megabyte = format!("00-{TRACE_ID}-{PARENT_ID}-01{}", "0".repeat(1 << 20));
    let table = [
        ("empty", String::new()),
        ("too short", VALID[..54].to_owned()),
        ("extra field in version 00", format!("{VALID}-01")),
        ("extra character in version 00", format!("{VALID}0")),
        ("uppercase trace-id", VALID.replace("4bf92f", "4BF92F")),
        ("uppercase parent-id", VALID.replace("00f067aa", "00F067AA")),
        ("uppercase version", format!("0A-{TRACE_ID}-{PARENT_ID}-01")),
        ("uppercase flags", format!("00-{TRACE_ID}-{PARENT_ID}-0A")),
        ("non-hex trace-id", VALID.replace("4bf92f", "4bg92f")),
        ("non-hex flags", format!("00-{TRACE_ID}-{PARENT_ID}-0x")),
        (
            "zero trace-id",
            format!("00-{}-{PARENT_ID}-01", "0".repeat(32)),
        ),
        (
            "zero parent-id",
            format!("00-{TRACE_ID}-{}-01", "0".repeat(16)),
        ),
        ("version ff", format!("ff-{TRACE_ID}-{PARENT_ID}-01")),
        (
            "later version, no dash after",
            format!("01-{TRACE_ID}-{PARENT_ID}-01x"),
        ),
        ("underscores for dashes", VALID.replace('-', "_")),
        ("spaces around", format!(" {VALID} ")),
        ("non-ASCII", VALID.replace("4b", "é")),
        (
            "trace-id one short",
            format!("00-{}-{PARENT_ID}-001", &TRACE_ID[1..]),
        ),
        ("1 MB", megabyte),
    ];
    for (what, header) in table {
        assert_eq!(TraceContext::parse(&header, Some("a=1")), None, "{what}");
    }
}

#[test]
fn tracestate_keeps_valid_members_within_the_limits() {
    let state = |header: &str| {
        TraceContext::parse(VALID, Some(header))
            .unwrap()
            .tracestate()
            .to_owned()
    };
    assert_eq!(
        state("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
        "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
    );
    assert_eq!(state(" a=1 ,\t,b=2 "), "a=1,b=2");
    assert_eq!(state("tenant1@sys=x,t@a-b=y"), "tenant1@sys=x,t@a-b=y");
    // Each kind of bad member is dropped, the rest kept.
    for bad in [
        "Upper=1",  // uppercase key
        "1abc=1",   // simple key starting with a digit
        "a b=1",    // space in a key
        "novalue",  // no `=`
        "a=",       // empty value
        "a=b=c",    // `=` in a value
        "@sys=1",   // empty tenant
        "t@=1",     // empty system
        "t@1sys=1", // system starting with a digit
        "t@systemistoolong=1",
        "a=\u{7f}",
        "a=é",
    ] {
        assert_eq!(state(&format!("k=1,{bad},z=2")), "k=1,z=2", "{bad:?}");
    }
    // A key is kept once, its first member.
    assert_eq!(state("a=1,b=2,a=3"), "a=1,b=2");
    // A key or a value of the longest length is valid; one longer is not.
    let long_key = format!("a{}", "b".repeat(255));
    assert_eq!(state(&format!("{long_key}=1")).len(), 258);
    assert_eq!(state(&format!("{long_key}b=1,c=1")), "c=1");
}

#[test]
fn tracestate_is_bounded_whatever_is_sent() {
    // 10,000 members: 32 kept.
    let many: Vec<String> = (0..10_000).map(|i| format!("k{i}=v")).collect();
    let trace = TraceContext::parse(VALID, Some(&many.join(","))).unwrap();
    let kept: Vec<&str> = trace.tracestate().split(',').collect();
    assert_eq!(kept.len(), MAX_TRACESTATE_MEMBERS);
    assert_eq!(kept, many[..MAX_TRACESTATE_MEMBERS]);

    // 1 MB of valid members: at most 512 characters kept, whole members only.
    let long: Vec<String> = (0..20_000)
        .map(|i| format!("k{i}={}", "v".repeat(40)))
        .collect();
    let trace = TraceContext::parse(VALID, Some(&long.join(","))).unwrap();
    assert!(trace.tracestate().len() <= MAX_TRACESTATE_LEN);
    for member in trace.tracestate().split(',') {
        assert!(long.iter().any(|sent| sent == member), "{member}");
    }

    // One 1 MB member: dropped, the call keeps its trace.
    let huge = format!("a={}", "v".repeat(1 << 20));
    let trace = TraceContext::parse(VALID, Some(&huge)).unwrap();
    assert_eq!(
        (trace.trace_id(), trace.tracestate()),
        (TRACE_ID.to_owned(), "")
    );
}

#[test]
fn a_child_continues_the_trace() {
    let trace = TraceContext::parse(VALID, Some("a=1")).unwrap();
    let child = trace
        .with_parent(*b"\x01\x02\x03\x04\x05\x06\x07\x08")
        .unwrap();
    assert_eq!(child.trace_id(), TRACE_ID);
    assert_eq!(child.parent_id(), "0102030405060708");
    assert_eq!(child.tracestate(), "a=1");
    assert!(child.sampled());
    assert_eq!(trace.with_parent([0; 8]), Err(ZeroSpanId));
}

#[tokio::test]
async fn the_trace_context_crosses_to_a_worker_process_and_is_checked_there() {
    let trace = TraceContext::parse(VALID, Some("rojo=1")).unwrap();
    let below = Name::new("fetch").unwrap();
    let wire = context::with(trace.clone(), async {
        Departure::new("remote", &below).unwrap().to_wire()
    })
    .await
    .unwrap();
    let sent = serde_json::to_value(&wire).unwrap();
    assert_eq!(
        sent,
        json!([{"name": "toolgraft.trace_context", "value": {"traceparent": VALID, "tracestate": "rojo=1"}}])
    );
    let wire: WireContext = serde_json::from_value(sent).unwrap();
    assert_eq!(
        wire.arrive(async { context::get::<TraceContext>() }).await,
        Some(trace)
    );

    // A job is input too: what does not read as a trace context arrives as none,
    // and a tracestate arrives bounded.
    let many: Vec<String> = (0..10_000).map(|i| format!("k{i}=v")).collect();
    for (value, expected) in [
        (json!({"traceparent": VALID.to_uppercase()}), None),
        (json!({"traceparent": format!("{VALID}-extra")}), None),
        (json!("00"), None),
        (
            json!({"traceparent": VALID, "tracestate": many.join(",")}),
            Some(MAX_TRACESTATE_MEMBERS),
        ),
    ] {
        let wire: WireContext =
            serde_json::from_value(json!([{"name": "toolgraft.trace_context", "value": value}]))
                .unwrap();
        let arrived = wire.arrive(async { context::get::<TraceContext>() }).await;
        let members = arrived.map(|trace| trace.tracestate().split(',').count());
        assert_eq!(members, expected, "{value}");
    }
}

#[cfg(feature = "pool")]
#[tokio::test]
async fn a_pool_thread_reads_the_callers_trace_context() {
    use toolgraft::ext::Pool;
    use toolgraft::prelude::*;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Empty {}

    let traced = Tool::builder()
        .name("traced")
        .description("Say which trace the body runs in, and on which thread.")
        .body(|_: Empty| async {
            let trace = context::get::<TraceContext>();
            let thread = std::thread::current().name().map(str::to_owned);
            Ok(json!({
                "trace_id": trace.as_ref().map(TraceContext::trace_id),
                "tracestate": trace.as_ref().map(|trace| trace.tracestate().to_owned()),
                "thread": thread,
            }))
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((traced.combo().with(Pool::new(1).unwrap()),))
        .unwrap();
    let trace = TraceContext::parse(VALID, Some("rojo=1")).unwrap();
    let out = context::with(trace, toolset.call("traced_pool", json!({})))
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"trace_id": TRACE_ID, "tracestate": "rojo=1", "thread": "toolgraft-pool"})
    );
    let none = toolset.call("traced_pool", json!({})).await.unwrap();
    assert_eq!(none["trace_id"], json!(null));
}
