//! toolgraft-mcp's tests, one binary: the helpers every module shares
//! (`support`), then serving a toolset (`serve`), toolgraft inside a server of
//! one's own (`embed`, `merge`), MCP tasks (`tasks`), Streamable HTTP
//! (`http`, feature `http`), access policies (`access`), the W3C trace
//! context a client sends (`trace`), OpenTelemetry (`otel`, feature `otel`), and
//! tools of other MCP servers as bases (`upstream`, and `reference` against
//! servers no one here wrote; features `upstream-http` and `http`).

mod support;

mod access;
mod embed;
#[cfg(feature = "http")]
mod http;
mod merge;
#[cfg(feature = "otel")]
mod otel;
mod serve;
mod tasks;
mod trace;
#[cfg(all(feature = "upstream-http", feature = "http"))]
mod hostile;
#[cfg(all(feature = "upstream-http", feature = "http"))]
mod reference;
#[cfg(all(feature = "upstream-http", feature = "http"))]
mod upstream;
#[cfg(all(feature = "upstream-tls", feature = "http"))]
mod upstream_tls;
