//! The W3C trace context a request brings: from its `_meta` (SEP-414), or, over
//! Streamable HTTP, from its `traceparent` and `tracestate` headers. Whatever is
//! malformed is ignored (the call starts a trace of its own), never refused.

use rmcp::RoleServer;
use rmcp::service::RequestContext;
use toolgraft::context::TraceContext;

/// The trace context `request` continues, if it sent a valid one: its `_meta`'s
/// when it has a `traceparent` there (the MCP request's own, nearer the call than
/// the HTTP request it came in), else its HTTP headers'.
pub(crate) fn trace_of(request: &RequestContext<RoleServer>) -> Option<TraceContext> {
    // A `traceparent` in `_meta` that is not a string, or not valid, still says
    // the client meant this request's trace: the headers' (a proxy's, say) would
    // not be its parent.
    if let Some(traceparent) = request.meta.get("traceparent") {
        let traceparent = traceparent.as_str()?;
        return TraceContext::parse(traceparent, request.meta.get_tracestate());
    }
    from_headers(request)
}

#[cfg(feature = "http")]
fn from_headers(request: &RequestContext<RoleServer>) -> Option<TraceContext> {
    let headers = &request
        .extensions
        .get::<axum::http::request::Parts>()?
        .headers;
    // Two `traceparent` fields name two parents: neither is the one.
    let mut traceparents = headers.get_all("traceparent").iter();
    let traceparent = traceparents.next()?.to_str().ok()?;
    if traceparents.next().is_some() {
        return None;
    }
    // Several `tracestate` fields are one list (RFC 9110's combining rule); a
    // value that is not text is none of it. The list is bounded by the server's
    // limit on headers, and what is kept of it by `TraceContext::parse`.
    let mut fields = headers
        .get_all("tracestate")
        .iter()
        .filter_map(|field| field.to_str().ok());
    let first = fields.next();
    let joined;
    let tracestate = match fields.next() {
        None => first,
        Some(second) => {
            joined = [first.unwrap_or_default(), second]
                .into_iter()
                .chain(fields)
                .collect::<Vec<_>>()
                .join(",");
            Some(joined.as_str())
        }
    };
    TraceContext::parse(traceparent, tracestate)
}

#[cfg(not(feature = "http"))]
fn from_headers(_request: &RequestContext<RoleServer>) -> Option<TraceContext> {
    None
}
