//! An upstream reached over HTTPS (feature `upstream-tls`): the toolgraft
//! server of `upstream.rs` behind a TLS front whose certificate a CA of the
//! tests' own signed (`tls/`). Trusted through the endpoint's `ca_file`; not
//! trusted without it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use toolgraft::prelude::*;
use toolgraft_mcp::ToolsetServer;
use toolgraft_mcp::http::{Guard, McpHttp};
use toolgraft_mcp::upstream::{Endpoint, Upstream, UpstreamConfig, UpstreamError};

use crate::support::within;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Said {
    over: String,
}

fn tls_file(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp/tls")
        .join(name)
        .display()
        .to_string()
}

/// A TLS front on a loopback port: each connection's TLS ended here, and its
/// bytes carried to `backend` and back.
async fn tls_in_front_of(backend: SocketAddr) -> SocketAddr {
    let certificates = CertificateDer::pem_file_iter(tls_file("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(tls_file("server.key")).unwrap();
    #[allow(deprecated)] // No post-quantum key exchange: a test's front.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certificates, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake.
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let mut plain = TcpStream::connect(backend).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    front
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_upstream_is_reached_trusting_its_ca_file_and_refused_without() {
    let echo = Tool::builder()
        .name("echo")
        .description("Say it back.")
        .read_only()
        .body(|said: Said| async move { Ok(said) })
        .build()
        .unwrap();
    let served = Toolset::new();
    served.bind((echo.combo(),)).unwrap();
    let mcp = McpHttp::new(ToolsetServer::new(served), Guard::off());
    let server = within("serve", mcp.serve(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let backend: SocketAddr = server
        .url()
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let front = tls_in_front_of(backend).await;
    let url = format!("https://{front}/mcp");
    let config = |endpoint: Endpoint| {
        let mut config = UpstreamConfig::new("secure", endpoint);
        config.connect_timeout_ms = 5_000;
        config
    };

    let trusted = Endpoint::http(&url).with_ca_file(tls_file("ca.pem"));
    let upstream = within("connect", Upstream::connect(config(trusted)))
        .await
        .expect("trusting the CA, the upstream is reached");
    let gateway = Toolset::new();
    let combos: Vec<_> = upstream.tools().iter().map(|tool| tool.combo()).collect();
    gateway.bind(combos).unwrap();
    let said = within(
        "the call",
        gateway.call("secure_echo", json!({"over": "tls"})),
    )
    .await
    .unwrap();
    assert_eq!(said, json!({"over": "tls"}));

    // The system's roots alone do not cover the tests' CA.
    let untrusted = within("connect", Upstream::connect(config(Endpoint::http(&url)))).await;
    let Err(UpstreamError::Connect { problem, .. }) = untrusted else {
        panic!("an untrusted certificate must fail connecting");
    };
    eprintln!("an untrusted certificate: {problem}");
    assert!(problem.to_lowercase().contains("certificate"), "{problem}");

    // A `ca_file` that holds no certificate is named as such.
    let not_pem = Endpoint::http(&url).with_ca_file(tls_file("README.md"));
    let refused = within("connect", Upstream::connect(config(not_pem))).await;
    let Err(UpstreamError::Connect { problem, .. }) = refused else {
        panic!("a ca_file without certificates must fail connecting");
    };
    assert!(
        problem.contains("`ca_file`") && problem.contains("no certificate"),
        "{problem}"
    );
    drop(upstream);
    server.shutdown().await.unwrap();
}

/// A `ca_file` that is no certificate file fails connecting with an error
/// naming it, whatever it is: missing, a directory, a private key, or a file
/// far larger than any bundle of certificates (read whole, a device such as
/// `/dev/zero` would be read until memory runs out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_file_that_is_no_certificate_file_is_a_typed_error() {
    let huge = std::env::temp_dir().join(format!("toolgraft-huge-ca-{}.pem", std::process::id()));
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    let huge = huge.display().to_string();
    for (ca_file, says) in [
        ("/nonexistent/ca.pem".to_owned(), "No such file"),
        (tls_file(""), "directory"),
        (tls_file("server.key"), "no certificate"),
        (huge.clone(), "larger than"),
    ] {
        let mut config = UpstreamConfig::new(
            "secure",
            Endpoint::http("https://127.0.0.1:1/mcp").with_ca_file(&ca_file),
        );
        config.connect_timeout_ms = 2000;
        let refused = within("connect", Upstream::connect(config)).await;
        let Err(UpstreamError::Connect { problem, .. }) = refused else {
            panic!("{ca_file}: must fail connecting");
        };
        assert!(
            problem.contains("`ca_file`") && problem.contains(says),
            "{ca_file}: {problem}"
        );
    }
    std::fs::remove_file(huge).unwrap();
}

/// A `ca_file` that is a FIFO no one writes to blocks its reader: it is read
/// on a thread of its own, so `connect_timeout_ms` still ends the wait.
#[tokio::test(flavor = "current_thread")]
async fn a_ca_file_that_never_answers_is_bounded_by_the_connect_timeout() {
    let fifo = std::env::temp_dir().join(format!("toolgraft-fifo-ca-{}", std::process::id()));
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let mut config = UpstreamConfig::new(
        "secure",
        Endpoint::http("https://127.0.0.1:1/mcp").with_ca_file(fifo.display().to_string()),
    );
    config.connect_timeout_ms = 500;
    let started = std::time::Instant::now();
    let refused = within("connect", Upstream::connect(config)).await;
    let Err(UpstreamError::Connect { problem, .. }) = refused else {
        panic!("a FIFO for a ca_file must fail connecting");
    };
    assert!(problem.contains("connect_timeout_ms"), "{problem}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // The reader's thread is let go (the runtime waits for it as it ends).
    drop(std::fs::OpenOptions::new().write(true).open(&fifo).unwrap());
    std::fs::remove_file(fifo).unwrap();
}
