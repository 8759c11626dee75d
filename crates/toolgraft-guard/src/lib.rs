//! The one HTTP guard of toolgraft's servers: a [`Guard`] (bearer token, Host and
//! Origin allow-lists) and the tower layer that applies it, [`GuardLayer`], shared by
//! the MCP endpoint (`toolgraft-mcp`, feature `http`) and the authoring API
//! (`toolgraft-http`), so both check the same things the same way.
//!
//! Every request is checked in this order, and a refused one never reaches the
//! service:
//!
//! 1. **`Host`** (or HTTP/2's `:authority`) on the host allow-list, else `403`;
//!    missing, repeated or unreadable, `400`.
//! 2. **`Origin`**, when there is one, on the origin allow-list, else `403`
//!    (`Origin: null` included, unless listed); repeated, `400`. Clients that are
//!    not browsers send none.
//! 3. **The bearer token**, unless the guard is [`Guard::off`]: one
//!    `Authorization: Bearer <token>`; missing or refused, `401` with a
//!    `WWW-Authenticate: Bearer` challenge; repeated, `400`.
//!
//! The token is checked one of three ways, or not at all:
//!
//! | guard | the token | the service learns |
//! | --- | --- | --- |
//! | [`Guard::off`] | none asked for | nothing |
//! | [`Guard::bearer`] | one token, compared in constant time | nothing: a shared token names nobody |
//! | [`Guard::tokens`] | one of a [`TokenTable`]'s, looked up by its SHA-256 | the holder, an [`Authenticated`] in the request's extensions |
//! | `Guard::oauth` (feature `oauth`) | an OAuth 2.1 access token of one authorization server, issued for this resource: a JWT checked against the issuer's keys, or an opaque token introspected | the caller, an [`Authenticated`] (subject, issuer, scopes, chosen claims, expiry) |
//!
//! With `oauth`, the guard is a resource server as the MCP authorization spec
//! (2025-11-25) has it: a request without a token gets `401` with
//! `WWW-Authenticate: Bearer resource_metadata="..."` pointing at the RFC 9728
//! metadata the `ResourceServer` serves (mounted unguarded), so a client finds the
//! authorization server; a refused token gets `error="invalid_token"` and a fixed
//! description that quotes nothing of it; and the issuer being unreachable gets
//! `503`, never a `401` that would send the client round the authorization flow
//! again.
//!
//! Both lists name only the loopback addresses (`localhost`, `127.0.0.1`, `[::1]`)
//! by default: a page on another site whose name its owner re-points at `127.0.0.1`
//! (DNS rebinding) sends its own `Host` and `Origin`, and is refused. Checking the
//! Host and Origin before the token tells such a page nothing about the token.
//!
//! Why a crate of its own: both servers need it and neither should depend on the
//! other (the MCP one pulls in rmcp, the authoring one a TOML editor), and the core
//! has no HTTP at all; this one depends on `http`, `axum-core` (the body type),
//! tower's two traits, `sha2` and `serde_json` (both compiled by those servers
//! anyway), and, with `oauth`, on jsonwebtoken (RustCrypto), reqwest (no TLS of
//! its own) and tokio's timers and locks. It reports the caller as its own
//! [`Authenticated`], which the servers convert: it does not depend on the core.
//!
//! ```
//! use axum::{Router, body::Body, routing::get};
//! use tower::ServiceExt;
//! use toolgraft_guard::Guard;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let guard = Guard::bearer("0123456789abcdef0123456789abcdef")?; // or Guard::off()
//! let app = Router::new().route("/", get(|| async { "hi" })).layer(guard.layer());
//!
//! // A page on evil.example, its name re-pointed at 127.0.0.1:
//! let rebound = http::Request::get("/")
//!     .header("host", "evil.example:8080")
//!     .header("origin", "http://evil.example:8080")
//!     .body(Body::empty())?;
//! assert_eq!(app.oneshot(rebound).await?.status(), 403);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]

// The modules, bottom to top: each imports only from the ones above it
// (`scripts/module-graph` checks it).
mod error;
mod refusal;
mod authenticated;
mod token;
mod table;
mod allow;
#[cfg(feature = "oauth")]
mod oauth;
mod guard;
mod layer;

pub use authenticated::Authenticated;
pub use error::{AllowList, GuardError, TokenProblem};
pub use error::{MAX_TOKEN_LEN, MIN_TOKEN_LEN};
pub use guard::Guard;
pub use layer::{GuardFuture, GuardLayer, GuardService};
#[cfg(feature = "oauth")]
pub use oauth::{MetadataService, ResourceServer};
pub use refusal::{Invalid, Reason, Refusal};
pub use table::TokenTable;
