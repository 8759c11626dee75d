//! A toolset loaded from a manifest file, as an operator's server has it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use serde_json::Value;
use toolgraft::error::BoxError;
use toolgraft::ext::{Batch, Cache, Pool, Proxy, Trace, proxy};
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;
use toolgraft::{Registry, Tool, Toolset};
use toolgraft_http::{Authoring, Guard};
use tower::ServiceExt;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
pub struct City {
    /// City name, e.g. "Lisbon".
    pub city: String,
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
pub struct Translate {
    pub text: String,
    pub to: String,
}

pub const JSON_MANIFEST: &str = r#"{
  "tools": {
    "weather": [
      ["trace", "cache"],
      [{ "name": "batch", "config": { "max_items": 10 } }, "pool"]
    ],
    "translate": [["proxy", "pool"]]
  }
}
"#;

pub const TOML_MANIFEST: &str = r#"# Combos of the weather service.
[tools]
weather = [
    ["trace", "cache"],
    [{ name = "batch", config = { max_items = 10 } }, "pool"],
]
# Translation goes out through the EU route.
translate = [["proxy", "pool"]]
"#;

pub const TOKEN: &str = "test-token-0123456789abcdef";

pub fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .and_then(|r| r.register(Configured::new(Cache::default())))
        .and_then(|r| r.register(Configured::new(Batch::default())))
        .and_then(|r| r.register(Configured::new(Proxy::allow(["egress-eu", "egress-us"]))))
        .expect("registering the built-ins");
    registry
        .register(Pool::new(2).expect("a pool"))
        .expect("registering pool");
    registry
}

pub fn bases() -> BaseTools {
    let weather = Tool::builder()
        .name("weather")
        .description("Tomorrow's weather for a city.")
        .read_only()
        .body(|input: City| async move {
            let route = proxy::current_route().unwrap_or_else(|| "direct".into());
            Ok::<_, BoxError>(format!("sunny in {} via {route}", input.city))
        })
        .build()
        .expect("weather");
    let translate = Tool::builder()
        .name("translate")
        .description("Translate a text.")
        .read_only()
        .body(|input: Translate| async move {
            Ok::<_, BoxError>(format!("[{}] {}", input.to, input.text))
        })
        .build()
        .expect("translate");
    BaseTools::new().with(&weather).with(&translate)
}

/// A fresh directory under cargo's temporary directory for tests.
pub fn temp_dir(label: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "toolgraft-http-{label}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// What a server has: the toolset bound from the file, and the router over it.
pub struct Server {
    pub toolset: Toolset,
    pub manifest: PathBuf,
    pub router: Router,
}

/// Binds the tools from a manifest file written with `text` (`ext` is `json` or
/// `toml`), the way a server starts, and builds the router.
pub fn server(ext: &str, text: &str, token: Option<&str>) -> Server {
    let dir = temp_dir(ext);
    let manifest = dir.join(format!("combos.{ext}"));
    std::fs::write(&manifest, text).expect("writing the manifest");
    let toolset = restart(&manifest);
    let authoring = Authoring::new(toolset.clone(), registry()).with_manifest_file(&manifest);
    let guard = match token {
        Some(token) => Guard::bearer(token).expect("a good token"),
        None => Guard::off(),
    };
    let router = authoring.with_guard(guard).router().expect("the router");
    Server {
        toolset,
        manifest,
        router,
    }
}

/// A toolset bound from the manifest file as it is now, as after a restart.
pub fn restart(manifest: &Path) -> Toolset {
    let toolset = Toolset::new();
    let loaded = Manifest::load(manifest).expect("the manifest loads");
    for (tool, outcome) in toolset.bind_manifest(&registry(), &bases(), &loaded) {
        outcome.unwrap_or_else(|err| panic!("{tool} does not bind: {err}"));
    }
    toolset
}

/// A response: status, headers, and the body as JSON (or as text in `Value::String`).
pub struct Answer {
    pub status: u16,
    pub headers: axum::http::HeaderMap,
    pub body: Value,
}

pub async fn send(
    router: &Router,
    method: &str,
    uri: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> Answer {
    let mut request = Request::builder().method(method).uri(uri);
    if body.is_some() {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request
        .body(body.map_or_else(Body::empty, |body| Body::from(body.to_owned())))
        .expect("a request");
    answer(router, request).await
}

/// The router's answer to `request`; one without a `Host` gets `localhost`, as
/// from a browser on the machine (the guard refuses a request naming no host).
pub async fn answer(router: &Router, mut request: Request<Body>) -> Answer {
    if !request.headers().contains_key(header::HOST) {
        let localhost = header::HeaderValue::from_static("localhost");
        request.headers_mut().insert(header::HOST, localhost);
    }
    let response = router
        .clone()
        .oneshot(request)
        .await
        .expect("the router answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("the body");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer {
        status,
        headers,
        body,
    }
}
