//! Serves the authoring API and page for a weather toolset whose combos come from a
//! manifest file; every change is applied live and written back to the file.
//!
//! ```sh
//! TOOLGRAFT_TOKEN=$(openssl rand -hex 16) cargo run -p toolgraft-http --example authoring
//! cargo run -p toolgraft-http --example authoring -- --manifest combos.toml --port 8080 --no-auth
//! ```
//!
//! Without `--manifest` it writes a copy of its built-in manifest to the temporary
//! directory and uses that. It listens on 127.0.0.1 (`--port 0`, the default, picks
//! a free port) and prints the address, then the page is at `http://127.0.0.1:PORT/`.
//! The token comes from `TOOLGRAFT_TOKEN`; without one, `--no-auth` must say so
//! (`Guard::off()`). Either way the guard's Host and Origin allow-lists name only
//! the loopback addresses.
//!
//! An embedding server mounts the router beside its own routes, and beside MCP over
//! HTTP behind the same guard: `McpHttp::new(server, guard.clone()).router()` (from
//! `toolgraft_mcp::http`) merged with it, `authoring_router.merge(mcp_router)`, or
//! `.nest("/authoring", authoring_router)` to keep the page under a prefix (open it
//! as `/authoring/`, with the slash). An MCP server over the same `Toolset`
//! announces each change with `notifications/tools/list_changed`.

use std::path::PathBuf;

use toolgraft::error::BoxError;
use toolgraft::ext::{Batch, Cache, Pool, Proxy, Trace, proxy};
use toolgraft::runtime::Configured;
use toolgraft::runtime::NameTable;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;
use toolgraft::{Registry, Tool, Toolset};
use toolgraft_http::{Authoring, Guard};

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct City {
    /// City name, e.g. "Lisbon".
    city: String,
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Translate {
    text: String,
    to: String,
}

const MANIFEST: &str = r#"{
  "tools": {
    "weather": [
      ["trace", "cache"],
      [{ "name": "batch", "config": { "max_items": 10 } }, "pool"]
    ],
    "translate": [["proxy", "pool"]]
  }
}
"#;

struct Options {
    manifest: Option<PathBuf>,
    port: u16,
    no_auth: bool,
}

fn options() -> Result<Options, String> {
    let usage = "usage: authoring [--manifest <file.json|file.toml>] [--port <port>] [--no-auth]";
    let mut options = Options {
        manifest: None,
        port: 0,
        no_auth: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--manifest" => options.manifest = Some(args.next().ok_or(usage)?.into()),
            "--port" => {
                let port = args.next().ok_or(usage)?;
                options.port = port
                    .parse()
                    .map_err(|_| format!("bad port {port}; {usage}"))?;
            }
            "--no-auth" => options.no_auth = true,
            _ => return Err(usage.to_owned()),
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = options()?;
    let manifest = match options.manifest {
        Some(path) => path,
        None => {
            let path = std::env::temp_dir()
                .join(format!("toolgraft-authoring-{}.json", std::process::id()));
            std::fs::write(&path, MANIFEST)?;
            path
        }
    };

    let weather = Tool::builder()
        .name("weather")
        .description("Tomorrow's weather for a city.")
        .read_only()
        .body(|input: City| async move {
            let route = proxy::current_route().unwrap_or_else(|| "direct".into());
            Ok::<_, BoxError>(format!("sunny in {} via {route}", input.city))
        })
        .build()?;
    let translate = Tool::builder()
        .name("translate")
        .description("Translate a text.")
        .read_only()
        .body(|input: Translate| async move {
            Ok::<_, BoxError>(format!("[{}] {}", input.to, input.text))
        })
        .build()?;
    let mut registry = Registry::new();
    registry
        .register(Trace)?
        .register(Configured::new(Cache::default()))?
        .register(Configured::new(Batch::default()))?
        .register(Configured::new(Proxy::allow(["egress-eu", "egress-us"])))?
        .register(Pool::new(2)?)?;

    let toolset = Toolset::new();
    let bases = BaseTools::new().with(&weather).with(&translate);
    for (tool, outcome) in toolset.bind_manifest(&registry, &bases, &Manifest::load(&manifest)?) {
        if let Err(err) = outcome {
            eprintln!("{tool} refused: {err}");
        }
    }
    eprint!("{}", NameTable(&toolset.tools()));

    let authoring = Authoring::new(toolset, registry).with_manifest_file(&manifest);
    let guard = match (std::env::var("TOOLGRAFT_TOKEN"), options.no_auth) {
        (Ok(token), false) => Guard::bearer(token)?,
        (Err(_), true) => Guard::off(),
        (Ok(_), true) => return Err("both TOOLGRAFT_TOKEN and --no-auth; choose one".into()),
        (Err(_), false) => {
            return Err(
                "set TOOLGRAFT_TOKEN to a secret of 16 bytes or more, or pass --no-auth".into(),
            );
        }
    };
    let router = authoring.with_guard(guard).router()?;

    let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port)).await?;
    eprintln!("manifest: {}", manifest.display());
    // The address on stdout, alone, for scripts that start the example.
    println!("http://{}/", listener.local_addr()?);
    axum::serve(listener, router).await?;
    Ok(())
}
