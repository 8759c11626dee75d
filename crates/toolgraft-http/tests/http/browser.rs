//! The page in a real headless Chromium, driven over the DevTools protocol: sign
//! in, add a combo and see its new branch names, add a forbidden one and see the
//! rule's message in place, remove a combo. Screenshots go to cargo's temporary
//! directory for tests (printed).
//!
//! Chromium is found as `TOOLGRAFT_CHROMIUM`, else `chromium` (Debian's package),
//! `chromium-browser` or `google-chrome` on the `PATH`; `scripts/test` installs
//! Debian's when it is missing. Without one the test fails, saying so.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::common::{JSON_MANIFEST, TOKEN, server, temp_dir};

/// How long the page may take to show what a step waits for (a bound, not a
/// measurement: a step normally takes milliseconds).
const PATIENCE: Duration = Duration::from_secs(30);

fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("TOOLGRAFT_CHROMIUM") {
        return path.into();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "the browser test needs Chromium: run scripts/test (which installs Debian's `chromium`), \
         install it (`apt-get install chromium`), or set TOOLGRAFT_CHROMIUM to a Chromium or Chrome binary"
    );
}

/// A page session over the DevTools protocol.
struct Page {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    session: Option<String>,
    next: u64,
}

impl Page {
    async fn call(&mut self, method: &str, params: Value) -> Value {
        let reply = self.send(method, params).await;
        assert!(reply.get("error").is_none(), "{method} failed: {reply}");
        reply["result"].clone()
    }

    /// Sends one command and returns Chromium's whole reply, an error included.
    async fn send(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::Text(message.to_string().into()))
            .await
            .expect("sending to Chromium");
        loop {
            let reply = tokio::time::timeout(PATIENCE, self.socket.next())
                .await
                .unwrap_or_else(|_| panic!("Chromium did not answer {method}"))
                .expect("Chromium closed the connection")
                .expect("reading from Chromium");
            let Message::Text(text) = reply else { continue };
            let reply: Value = serde_json::from_str(text.as_str()).expect("Chromium sends JSON");
            if reply["id"] == id {
                return reply;
            }
        }
    }

    /// Evaluates `expression` in the page (awaiting a promise), by value.
    async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(
            result.get("exceptionDetails").is_none(),
            "{expression} threw: {result}"
        );
        result["result"]["value"].clone()
    }

    /// Evaluates `condition`; `false` while the page is between documents (a form
    /// that navigates, a reload): Chromium then answers that the context it was
    /// asked to evaluate in is gone, which is a "not yet", not a failure.
    async fn holds(&mut self, condition: &str) -> bool {
        let reply = self
            .send(
                "Runtime.evaluate",
                json!({"expression": condition, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        if let Some(error) = reply.get("error") {
            let message = error["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("navigated or closed") || message.contains("context"),
                "Runtime.evaluate failed: {reply}"
            );
            return false;
        }
        let result = &reply["result"];
        assert!(
            result.get("exceptionDetails").is_none(),
            "{condition} threw: {result}"
        );
        result["result"]["value"] == json!(true)
    }

    /// Waits until `condition` is true in the page.
    async fn until(&mut self, condition: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.holds(condition).await {
            if Instant::now() > deadline {
                let text = self
                    .eval("document.body ? document.body.innerText : ''")
                    .await;
                panic!("the page never showed `{condition}`; it shows:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn screenshot(&mut self, path: &Path) {
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("base64");
        assert!(png.starts_with(b"\x89PNG"));
        std::fs::write(path, png).expect("writing the screenshot");
        println!("screenshot: {}", path.display());
    }
}

/// Starts Chromium with a fresh profile and a DevTools port it picks itself.
async fn launch(profile: &Path) -> (tokio::process::Child, Page) {
    let child = tokio::process::Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("starting Chromium");
    let port_file = profile.join("DevToolsActivePort");
    let deadline = Instant::now() + PATIENCE;
    let (port, path) = loop {
        if let Ok(text) = std::fs::read_to_string(&port_file)
            && let Some((port, path)) = text.split_once('\n')
            && !path.trim().is_empty()
        {
            break (port.trim().to_owned(), path.trim().to_owned());
        }
        assert!(
            Instant::now() < deadline,
            "Chromium did not open its DevTools port"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (socket, _) = tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}{path}"))
        .await
        .expect("connecting to Chromium's DevTools");
    let mut page = Page {
        socket,
        session: None,
        next: 0,
    };
    let target = page
        .call("Target.createTarget", json!({"url": "about:blank"}))
        .await;
    let attached = page
        .call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        )
        .await;
    page.session = Some(
        attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_owned(),
    );
    page.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    (child, page)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_adds_a_combo_and_shows_a_refusal_in_place() {
    let server = server("json", JSON_MANIFEST, Some(TOKEN));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = server.router.clone();
    let serving = tokio::spawn(async move { axum::serve(listener, router).await });

    let profile = temp_dir("chromium-profile");
    let (mut chromium, mut page) = launch(&profile).await;

    // Sign in with the token.
    page.call(
        "Page.navigate",
        json!({"url": format!("http://{address}/")}),
    )
    .await;
    page.until("!!document.getElementById('token')").await;
    page.eval(&format!(
        "document.getElementById('token').value = {}; document.querySelector('form').submit(); true",
        json!(TOKEN)
    ))
    .await;
    page.until("!!document.getElementById('add') && document.readyState === 'complete'")
        .await;
    assert_eq!(
        page.eval("!!document.querySelector('#bound tr[data-name=\"weather_proxy_pool\"]')")
            .await,
        json!(false)
    );

    // Add `proxy, pool` to weather: the new branch names appear in the table.
    page.eval(
        "document.getElementById('add-tool').value = 'weather';
         document.getElementById('add-combo').value = 'proxy, pool';
         document.getElementById('add').requestSubmit(); true",
    )
    .await;
    page.until("!!document.querySelector('#bound tr[data-name=\"weather_proxy_pool\"]')")
        .await;
    page.until("document.getElementById('add-status').textContent !== ''")
        .await;
    let status = page
        .eval("document.getElementById('add-status').textContent")
        .await;
    assert_eq!(
        status,
        json!("Added to weather; new names: weather_proxy, weather_proxy_pool.")
    );
    let new_rows = page
        .eval("[...document.querySelectorAll('#bound tr.new')].map(row => row.dataset.name)")
        .await;
    assert_eq!(new_rows, json!(["weather_proxy", "weather_proxy_pool"]));
    assert!(server.toolset.contains("weather_proxy_pool"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    page.screenshot(&dir.join("toolgraft-http-page-added.png"))
        .await;

    // A forbidden one: the rule's message, in place; nothing changes.
    page.eval(
        "document.getElementById('add-combo').value = 'pool, proxy';
         document.getElementById('add').requestSubmit(); true",
    )
    .await;
    page.until("!document.getElementById('add-error').hidden")
        .await;
    let error = page
        .eval("document.getElementById('add-error').innerText")
        .await;
    let error = error.as_str().unwrap();
    assert!(
        error.contains(
            "on `weather`, `proxy` needs to run beside the tool body but sits outside `pool`"
        ) && error.contains("place `proxy` before `pool`")
            && error.ends_with("rule: locality-inside-relocation"),
        "{error}"
    );
    assert!(!server.toolset.contains("weather_pool_proxy"));
    page.screenshot(&dir.join("toolgraft-http-page-refused.png"))
        .await;

    // Remove the added combo with its button: its names leave the table.
    page.eval("document.querySelector('button.remove[data-tool=\"weather\"][data-combo=\\'[\"proxy\",\"pool\"]\\']').click(); true")
        .await;
    page.until("!document.querySelector('#bound tr[data-name=\"weather_proxy_pool\"]')")
        .await;
    assert!(!server.toolset.contains("weather_proxy_pool"));
    assert_eq!(
        std::fs::read_to_string(&server.manifest).unwrap(),
        JSON_MANIFEST
    );

    let _ = page.call("Browser.close", json!({})).await;
    let _ = tokio::time::timeout(PATIENCE, chromium.wait()).await;
    let _ = chromium.kill().await;
    serving.abort();
    let _ = std::fs::remove_dir_all(&profile);
}
