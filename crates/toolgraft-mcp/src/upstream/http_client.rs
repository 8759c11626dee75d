//! The HTTP client of an upstream's links: one per link, keeping its
//! connections open between calls.
//!
//! rmcp's own client keeps no idle connection (it avoids a stall that Delayed
//! ACK causes when a connection is reused before the last answer's body was
//! read to its end), so each request would open a TCP connection: about a
//! third of a call's time on loopback. Here every answer's body is read to its
//! end before the next request (a JSON reply whole; an event stream until its
//! answer, then drained), and Nagle's algorithm is off (`TCP_NODELAY`), so a
//! kept connection is reused without that stall.
//!
//! `https://` endpoints are reached with reqwest's TLS (feature
//! `upstream-tls`, or the application's reqwest features), trusting the
//! system's roots and, with `upstream-tls`, the endpoint's `ca_file`.

use std::time::Duration;

/// How long an idle connection is kept: past a typical server's own
/// keep-alive (5 s for hyper's, 60 s for nginx's) it would be closed under
/// the next request anyway.
const IDLE: Duration = Duration::from_secs(4);

/// Redirects followed at most, each to the same origin with the method and
/// body kept (307, 308).
const MAX_REDIRECTS: usize = 10;

/// The client for one link: connecting within `connect_timeout`, trusting
/// the system's roots and `ca_file`'s certificates over TLS.
pub(super) async fn http_client(
    connect_timeout: Duration,
    ca_file: Option<&str>,
) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(IDLE)
        .connect_timeout(connect_timeout)
        .redirect(same_origin_redirects());
    if let Some(path) = ca_file {
        builder = trusting(builder, path).await?;
    }
    builder
        .build()
        .map_err(|error| format!("cannot make an HTTP client: {error}"))
}

/// Follows a redirect only where it keeps the request whole and to whom it
/// goes: a 307 or 308 to the same origin (a 301, 302 or 303 turns a POST into
/// a GET without its message; another origin would be sent the session and the
/// credentials). Any other redirect is the answer, which fails the request.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_the_request = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_the_request || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

/// The longest `ca_file` read: a system's whole bundle of roots is about
/// 200 KiB.
#[cfg(feature = "upstream-tls")]
const MAX_CA_FILE_BYTES: u64 = 16 << 20;

/// The certificates of the PEM file `path`, trusted beside the system's roots.
#[cfg(feature = "upstream-tls")]
async fn trusting(
    builder: reqwest::ClientBuilder,
    path: &str,
) -> Result<reqwest::ClientBuilder, String> {
    use std::io::Read as _;
    let unreadable = |problem: String| format!("`ca_file` {path}: {problem}");
    // Read up to the bound only: a device (`/dev/zero`) or a wrong file would
    // otherwise be held whole. On a thread of its own: a FIFO would block the
    // runtime's, where `connect_timeout_ms` could not end the wait.
    let file = path.to_owned();
    let pem = tokio::task::spawn_blocking(move || {
        let mut pem = Vec::new();
        std::fs::File::open(file)
            .and_then(|file| file.take(MAX_CA_FILE_BYTES + 1).read_to_end(&mut pem))
            .map(|_| pem)
    })
    .await
    .map_err(|error| unreadable(error.to_string()))?
    .map_err(|error| unreadable(error.to_string()))?;
    if pem.len() as u64 > MAX_CA_FILE_BYTES {
        return Err(unreadable(format!(
            "larger than {MAX_CA_FILE_BYTES} bytes: not a file of certificates"
        )));
    }
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|error| unreadable(format!("not PEM certificates: {error}")))?;
    if certificates.is_empty() {
        return Err(unreadable("holds no certificate".to_owned()));
    }
    Ok(builder.tls_certs_merge(certificates))
}

#[cfg(not(feature = "upstream-tls"))]
async fn trusting(_: reqwest::ClientBuilder, path: &str) -> Result<reqwest::ClientBuilder, String> {
    Err(format!(
        "`ca_file` {path}: trusting a CA of one's own needs toolgraft-mcp's feature `upstream-tls`"
    ))
}
