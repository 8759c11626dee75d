//! The three systems, each serving the same `repeat` tool in process (over a
//! `tokio::io::duplex` pipe, to rmcp's client) and over Streamable HTTP.

pub mod rmcp;
pub mod toolgraft;
pub mod tower_mcp;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use ::rmcp::service::RunningService;
use ::rmcp::{RoleClient, ServiceExt};
use axum::serve::ListenerExt;
use tokio::net::TcpListener;

/// A system under measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    /// toolgraft-mcp's `ToolsetServer` / `McpHttp`.
    Toolgraft,
    /// rmcp alone.
    Rmcp,
    /// tower-mcp.
    TowerMcp,
}

impl System {
    /// Every system, in the order of round 0.
    pub const ALL: [System; 3] = [System::Toolgraft, System::Rmcp, System::TowerMcp];

    /// The name on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            System::Toolgraft => "toolgraft",
            System::Rmcp => "rmcp",
            System::TowerMcp => "tower-mcp",
        }
    }

    /// The system named `name`.
    pub fn parse(name: &str) -> Option<System> {
        System::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// How toolgraft is served over HTTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolgraftHttp {
    /// `McpHttp::serve`, as shipped (it sets TCP_NODELAY now; at 0be0cca it
    /// did not).
    Shipped,
    /// `McpHttp::router()` on plain `axum::serve`, no TCP_NODELAY.
    RouterPlain,
    /// `McpHttp::router()` on `axum::serve` with TCP_NODELAY set by the bench.
    RouterNoDelay,
}

impl fmt::Display for ToolgraftHttp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolgraftHttp::Shipped => "McpHttp::serve",
            ToolgraftHttp::RouterPlain => "router, no NODELAY",
            ToolgraftHttp::RouterNoDelay => "router + NODELAY",
        })
    }
}

/// Which tools a server has.
#[derive(Clone, Copy, Debug)]
pub enum Tools {
    /// `repeat`.
    Repeat,
    /// `repeat` and, for toolgraft, its 4-layer branch (the others: `repeat`).
    Layered,
    /// `n` tools `t0000`..., each with `repeat`'s input.
    List(usize),
}

/// rmcp's client connected in process to `system` serving `tools`.
pub async fn connect(system: System, tools: Tools) -> RunningService<RoleClient, ()> {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    match system {
        System::Toolgraft => tokio::spawn(toolgraft::serve_io(server_io, tools)),
        System::Rmcp => tokio::spawn(rmcp::serve_io(server_io, tools)),
        System::TowerMcp => tokio::spawn(tower_mcp::serve_io(server_io, tools)),
    };
    ().serve(client_io).await.expect("initialize in process")
}

/// `system` serving `repeat` over Streamable HTTP on `127.0.0.1:port` (0: any).
pub async fn serve_http(system: System, port: u16, mode: ToolgraftHttp) -> Served {
    match system {
        System::Toolgraft => toolgraft::serve_http(port, mode).await,
        System::Rmcp => rmcp::serve_http(port).await,
        System::TowerMcp => tower_mcp::serve_http(port).await,
    }
}

type Stop = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A running HTTP server: its MCP endpoint and how to stop it.
pub struct Served {
    /// The MCP endpoint, e.g. `http://127.0.0.1:41234/mcp`.
    pub url: String,
    stop: Stop,
}

impl Served {
    fn new(url: String, stop: impl Future<Output = ()> + Send + 'static) -> Self {
        Self {
            url,
            stop: Box::pin(stop),
        }
    }

    /// Stops the server (graceful: connections still open are waited for).
    pub async fn stop(self) {
        self.stop.await;
    }
}

/// `router` on `axum::serve` at `127.0.0.1:port`, with or without TCP_NODELAY.
pub async fn serve_axum(router: axum::Router, port: u16, nodelay: bool, path: &str) -> Served {
    let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    let addr = listener.local_addr().expect("local address");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = rx.await;
    };
    let task = if nodelay {
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await;
        })
    } else {
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await;
        })
    };
    Served::new(format!("http://{addr}{path}"), async move {
        let _ = tx.send(());
        let _ = task.await;
    })
}
