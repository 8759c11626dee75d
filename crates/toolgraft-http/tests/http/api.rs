//! Every endpoint, its refusals in the documented order, and write-back.

use axum::body::Body;
use axum::http::{Request, header};
use serde_json::json;
use toolgraft::runtime::manifest::Manifest;

use crate::common::{JSON_MANIFEST, TOKEN, TOML_MANIFEST, restart, send, server};

fn names(toolset: &toolgraft::Toolset) -> Vec<String> {
    toolset.names().iter().map(ToString::to_string).collect()
}

fn combos_path(tool: &str) -> String {
    format!("/tools/{tool}/extensions/combos")
}

#[tokio::test]
async fn get_tools_lists_bases_layers_sites_and_schemas() {
    let server = server("json", JSON_MANIFEST, None);
    let answer = send(&server.router, "GET", "/tools", None, None).await;
    assert_eq!(answer.status, 200);
    let tools = answer.body.as_array().expect("a list");
    let listed: Vec<&str> = tools
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, names(&server.toolset));
    let cached = tools
        .iter()
        .find(|tool| tool["name"] == "weather_trace_cache")
        .unwrap();
    assert_eq!(cached["base"], "weather");
    assert_eq!(cached["branch"], true);
    assert_eq!(
        cached["layers"][0],
        json!({"extension": "trace", "kind": "wrapper", "runs": "caller"})
    );
    assert_eq!(cached["layers"][1]["extension"], "cache");
    assert_eq!(cached["body_runs"], "caller");
    assert!(cached["input_schema"]["properties"]["exp"].is_object());
    assert!(cached["input_schema"]["properties"]["city"].is_object());
    let pooled = tools
        .iter()
        .find(|tool| tool["name"] == "weather_batch_pool")
        .unwrap();
    assert_eq!(
        pooled["layers"][0]["runs"],
        json!({"relocated": {"by": "pool"}})
    );
    assert_eq!(pooled["layers"][0]["config"]["max_items"], 10);
    assert_eq!(pooled["layers"][1]["runs"], "caller");
    assert_eq!(pooled["body_runs"], json!({"relocated": {"by": "pool"}}));
    let base = tools.iter().find(|tool| tool["name"] == "weather").unwrap();
    assert_eq!(
        (base["branch"].clone(), base["layers"].clone()),
        (json!(false), json!([]))
    );
}

#[tokio::test]
async fn get_extensions_gives_the_combos_names_and_catalogue() {
    let server = server("json", JSON_MANIFEST, None);
    let answer = send(
        &server.router,
        "GET",
        "/tools/weather/extensions",
        None,
        None,
    )
    .await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["tool"], "weather");
    assert_eq!(
        answer.body["combos"],
        json!([["trace", "cache"], [{"name": "batch", "config": {"max_items": 10}}, "pool"]])
    );
    assert_eq!(
        answer.body["names"],
        json!([
            "weather",
            "weather_batch",
            "weather_batch_pool",
            "weather_trace",
            "weather_trace_cache"
        ])
    );
    assert_eq!(
        answer.body["catalogue"],
        json!([
            {"name": "batch", "kind": "transformer"},
            {"name": "cache", "kind": "wrapper"},
            {"name": "pool", "kind": "backend"},
            {"name": "proxy", "kind": "wrapper"},
            {"name": "trace", "kind": "wrapper"}
        ])
    );
}

#[tokio::test]
async fn adding_a_combo_applies_live_and_writes_only_its_tool_back() {
    let server = server("json", JSON_MANIFEST, None);
    let mut changes = server.toolset.changes();
    changes.mark_unchanged();
    let body = r#"{"add": [["proxy", "pool"]]}"#;
    let answer = send(
        &server.router,
        "POST",
        &combos_path("weather"),
        Some(body),
        None,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer.body["names"]
            .as_array()
            .unwrap()
            .contains(&json!("weather_proxy_pool"))
    );
    // Live: callable now, and whoever serves the list (MCP's list_changed) is told.
    assert!(changes.has_changed().unwrap());
    let out = server
        .toolset
        .call(
            "weather_proxy_pool",
            json!({"city": "Oslo", "proxies": ["egress-us"]}),
        )
        .await
        .unwrap();
    assert_eq!(out, json!("sunny in Oslo via egress-us"));
    // Written back: the weather entry gains the combo, in the file's layout; the
    // rest of the file, the combos it had included, is untouched byte for byte.
    let text = std::fs::read_to_string(&server.manifest).unwrap();
    let expected = JSON_MANIFEST.replace(
        r#""pool"]
    ],"#,
        r#""pool"],
      ["proxy", "pool"]
    ],"#,
    );
    assert_eq!(text, expected);
    // A restart binds the same names.
    assert_eq!(names(&restart(&server.manifest)), names(&server.toolset));
}

#[tokio::test]
async fn add_and_remove_in_one_change_put_replaces_delete_clears() {
    let server = server("json", JSON_MANIFEST, None);
    let body = r#"{"remove": [["trace", "cache"]], "add": ["trace"]}"#;
    let answer = send(
        &server.router,
        "POST",
        &combos_path("weather"),
        Some(body),
        None,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.body["combos"],
        json!([[{"name": "batch", "config": {"max_items": 10}}, "pool"], ["trace"]])
    );
    assert!(!server.toolset.contains("weather_trace_cache"));

    let body = r#"{"combos": [[{"name": "cache", "config": {"default_ttl_secs": 30}}], ["proxy", "pool"]]}"#;
    let answer = send(
        &server.router,
        "PUT",
        "/tools/translate/extensions",
        Some(body),
        None,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.body["names"],
        json!([
            "translate",
            "translate_cache",
            "translate_proxy",
            "translate_proxy_pool"
        ])
    );

    let answer = send(
        &server.router,
        "DELETE",
        "/tools/weather/extensions",
        None,
        None,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["combos"], json!([]));
    assert_eq!(answer.body["names"], json!(["weather"]));
    // A tool without combos has no key in the file (a manifest refuses an empty list).
    let text = std::fs::read_to_string(&server.manifest).unwrap();
    assert_eq!(
        text,
        "{\n  \"tools\": {\n    \"translate\": [[{\"name\": \"cache\", \"config\": {\"default_ttl_secs\": 30}}], [\"proxy\", \"pool\"]]\n  }\n}\n"
    );
    assert_eq!(names(&restart(&server.manifest)), names(&server.toolset));

    // And back: a tool with no key gets one.
    let answer = send(
        &server.router,
        "POST",
        &combos_path("weather"),
        Some(r#"{"add": [["trace"]]}"#),
        None,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let manifest = Manifest::load(&server.manifest).unwrap();
    assert_eq!(manifest.tools.last().unwrap().0, "weather");
    assert_eq!(names(&restart(&server.manifest)), names(&server.toolset));
}

/// A request, and the status, rule and words of its refusal.
type Refusal<'a> = (
    &'a str,
    &'a str,
    Option<&'a str>,
    u16,
    Option<&'a str>,
    &'a str,
);

/// Each refusal: its status, its rule, its words; and nothing changed, live or on
/// disk.
#[tokio::test]
async fn refusals_change_nothing_and_come_in_order() {
    let server = server("json", JSON_MANIFEST, None);
    let before = names(&server.toolset);
    let cases: &[Refusal] = &[
        // The body's shape first, even for an unknown tool.
        (
            "POST",
            "/tools/ghost/extensions/combos",
            Some("{"),
            400,
            None,
            "the body is not JSON",
        ),
        (
            "POST",
            "/tools/weather/extensions/combos",
            Some("[1]"),
            400,
            None,
            "must be a JSON object",
        ),
        (
            "POST",
            "/tools/weather/extensions/combos",
            Some(r#"{"add": [["trace"]], "drop": []}"#),
            400,
            None,
            "unexpected key `drop`",
        ),
        (
            "POST",
            "/tools/weather/extensions/combos",
            Some("{}"),
            400,
            None,
            "nothing to change",
        ),
        (
            "POST",
            "/tools/ghost/extensions/combos",
            Some(r#"{"add": [[]]}"#),
            400,
            Some("manifest-shape"),
            "combo 1 is empty",
        ),
        (
            "POST",
            "/tools/weather/extensions/combos",
            Some(r#"{"add": "trace"}"#),
            400,
            Some("manifest-shape"),
            "expected a list of combos",
        ),
        (
            "PUT",
            "/tools/weather/extensions",
            Some(r#"{"add": []}"#),
            400,
            None,
            "unexpected key `add`",
        ),
        (
            "PUT",
            "/tools/weather/extensions",
            Some("{}"),
            400,
            None,
            "has no `combos`",
        ),
        // Then the tool.
        (
            "POST",
            "/tools/ghost/extensions/combos",
            Some(r#"{"add": [["trace"]]}"#),
            404,
            None,
            "no base tool `ghost`",
        ),
        (
            "DELETE",
            "/tools/ghost/extensions",
            None,
            404,
            None,
            "no base tool `ghost`",
        ),
        (
            "GET",
            "/tools/ghost/extensions",
            None,
            404,
            None,
            "no base tool `ghost`",
        ),
        (
            "POST",
            "/tools/weather_trace/extensions/combos",
            Some(r#"{"add": [["cache"]]}"#),
            400,
            Some("branch-bookkeeping"),
            "attach the combo to `weather` instead",
        ),
        (
            "GET",
            "/tools/weather_trace/extensions",
            None,
            400,
            Some("branch-bookkeeping"),
            "is a branch of `weather`",
        ),
        // Then membership, before any combo is bound.
        (
            "POST",
            "/tools/weather/extensions/combos",
            Some(r#"{"add": [["trace", "cache"]]}"#),
            409,
            None,
            "[trace, cache] is already attached to `weather`",
        ),
        (
            "POST",
            "/tools/weather/extensions/combos",
            Some(r#"{"remove": [["pool"]], "add": [["pool", "proxy"]]}"#),
            409,
            None,
            "[pool] is not attached to `weather`",
        ),
        (
            "POST",
            "/tools/weather/extensions/combos",
            Some(r#"{"add": [["trace"], ["trace"]]}"#),
            409,
            None,
            "[trace] is already attached",
        ),
        // Then every combo through the binding engine.
        (
            "POST",
            "/tools/weather/extensions/combos",
            Some(r#"{"add": [["pool", "proxy"]]}"#),
            400,
            Some("locality-inside-relocation"),
            "place `proxy` before `pool`",
        ),
        (
            "POST",
            "/tools/weather/extensions/combos",
            Some(r#"{"add": [["trace"], ["pool", "pool"]]}"#),
            400,
            Some("cardinality"),
            "holds more than one backend: [pool, pool]",
        ),
        (
            "POST",
            "/tools/weather/extensions/combos",
            Some(r#"{"add": [["trace", "gzip", "auth"]]}"#),
            400,
            Some("unknown-extension"),
            "unknown extensions `auth`, `gzip`",
        ),
        (
            "POST",
            "/tools/weather/extensions/combos",
            Some(r#"{"add": [[{"name": "trace", "config": {"level": 1}}]]}"#),
            400,
            Some("config"),
            "does not accept config",
        ),
        (
            "PUT",
            "/tools/weather/extensions",
            Some(r#"{"combos": [[{"name": "cache", "config": {"capacity": 0}}]]}"#),
            400,
            Some("config"),
            "invalid at `capacity`",
        ),
        (
            "PUT",
            "/tools/weather/extensions",
            Some(r#"{"combos": [["trace"], ["trace"]]}"#),
            409,
            None,
            "[trace] is already attached",
        ),
        ("GET", "/nowhere", None, 404, None, "no such endpoint"),
    ];
    for (method, uri, body, status, rule, words) in cases {
        let answer = send(&server.router, method, uri, *body, None).await;
        let case = format!("{method} {uri} {body:?}: {}", answer.body);
        assert_eq!(answer.status, *status, "{case}");
        assert!(
            answer.body["error"].as_str().unwrap().contains(words),
            "{case}"
        );
        assert_eq!(answer.body["rule"].as_str(), *rule, "{case}");
        assert_eq!(
            answer.headers[header::CONTENT_TYPE],
            "application/json",
            "{case}"
        );
        assert_eq!(names(&server.toolset), before, "{case}");
        assert_eq!(
            std::fs::read_to_string(&server.manifest).unwrap(),
            JSON_MANIFEST,
            "{case}"
        );
    }
}

#[tokio::test]
async fn hostile_requests_get_typed_refusals() {
    let server = server("json", JSON_MANIFEST, None);
    // Not JSON by content type: a cross-site form cannot send JSON.
    let request = Request::post(combos_path("weather"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("add=trace"))
        .unwrap();
    let answer = crate::common::answer(&server.router, request).await;
    assert_eq!(answer.status, 415);
    // Too big.
    let huge = format!(
        r#"{{"add": [["{}"]]}}"#,
        "x".repeat(toolgraft_http::MAX_BODY)
    );
    let answer = send(
        &server.router,
        "POST",
        &combos_path("weather"),
        Some(&huge),
        None,
    )
    .await;
    assert_eq!(answer.status, 413, "{}", answer.body);
    // Too deep for the parser.
    let deep = format!(r#"{{"add": {}{}}}"#, "[".repeat(10_000), "]".repeat(10_000));
    let answer = send(
        &server.router,
        "POST",
        &combos_path("weather"),
        Some(&deep),
        None,
    )
    .await;
    assert_eq!(answer.status, 400);
    // A long unknown name is quoted shortened.
    let long = "w".repeat(5_000);
    let answer = send(
        &server.router,
        "GET",
        &format!("/tools/{long}/extensions"),
        None,
        None,
    )
    .await;
    assert_eq!(answer.status, 404);
    assert!(answer.body["error"].as_str().unwrap().len() < 600);
    // A long unknown extension too.
    let body = format!(r#"{{"add": [["{}"]]}}"#, "e".repeat(5_000));
    let answer = send(
        &server.router,
        "POST",
        &combos_path("weather"),
        Some(&body),
        None,
    )
    .await;
    assert_eq!(answer.status, 400);
    assert!(
        answer.body["error"].as_str().unwrap().len() < 1_000,
        "{}",
        answer.body
    );
    assert_eq!(
        std::fs::read_to_string(&server.manifest).unwrap(),
        JSON_MANIFEST
    );
}

#[tokio::test]
async fn toml_manifests_keep_their_comments_and_layout() {
    let server = server("toml", TOML_MANIFEST, None);
    let body = r#"{"add": [[{"name": "batch", "config": {"max_items": 3}}]]}"#;
    let answer = send(
        &server.router,
        "POST",
        "/tools/translate/extensions/combos",
        Some(body),
        None,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let text = std::fs::read_to_string(&server.manifest).unwrap();
    assert_eq!(
        text,
        TOML_MANIFEST.replace(
            r#"translate = [["proxy", "pool"]]"#,
            r#"translate = [["proxy", "pool"], [{ name = "batch", config = { max_items = 3 } }]]"#
        )
    );
    let answer = send(
        &server.router,
        "POST",
        "/tools/weather/extensions/combos",
        Some(r#"{"remove": [["trace", "cache"]]}"#),
        None,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let text = std::fs::read_to_string(&server.manifest).unwrap();
    assert!(
        text.starts_with("# Combos of the weather service.\n[tools]\nweather = [\n    [{ name = \"batch\", config = { max_items = 10 } }, \"pool\"],\n]\n# Translation"),
        "{text}"
    );
    assert_eq!(names(&restart(&server.manifest)), names(&server.toolset));
    // TOML has no null: refused before anything changes.
    let body = r#"{"add": [[{"name": "cache", "config": {"default_ttl_secs": null}}]]}"#;
    let answer = send(
        &server.router,
        "POST",
        "/tools/weather/extensions/combos",
        Some(body),
        None,
    )
    .await;
    assert_eq!(answer.status, 400);
    assert!(
        answer.body["error"]
            .as_str()
            .unwrap()
            .contains("TOML has no `null`")
    );
    assert_eq!(std::fs::read_to_string(&server.manifest).unwrap(), text);
}

#[tokio::test]
async fn a_manifest_that_cannot_be_read_refuses_the_change() {
    let server = server("json", JSON_MANIFEST, None);
    let before = names(&server.toolset);
    std::fs::write(&server.manifest, "{ broken").unwrap();
    let answer = send(
        &server.router,
        "POST",
        &combos_path("weather"),
        Some(r#"{"add": [["trace"]]}"#),
        None,
    )
    .await;
    assert_eq!(answer.status, 500);
    let error = answer.body["error"].as_str().unwrap();
    assert!(
        error.contains("cannot be updated") && error.ends_with("nothing changed"),
        "{error}"
    );
    assert_eq!(names(&server.toolset), before);
    assert_eq!(
        std::fs::read_to_string(&server.manifest).unwrap(),
        "{ broken"
    );
}

#[tokio::test]
async fn concurrent_changes_leave_the_file_as_the_live_toolset() {
    let server = server("json", JSON_MANIFEST, None);
    let combos = [
        r#"["trace"]"#,
        r#"["cache"]"#,
        r#"["proxy"]"#,
        r#"["pool"]"#,
        r#"["trace", "pool"]"#,
        r#"["cache", "pool"]"#,
    ];
    let changes = combos.iter().map(|combo| {
        let router = server.router.clone();
        let body = format!(r#"{{"add": [{combo}]}}"#);
        tokio::spawn(async move {
            send(
                &router,
                "POST",
                "/tools/translate/extensions/combos",
                Some(&body),
                None,
            )
            .await
            .status
        })
    });
    for change in changes {
        assert_eq!(change.await.unwrap(), 200);
    }
    assert_eq!(server.toolset.combos("translate").unwrap().len(), 7);
    assert_eq!(names(&restart(&server.manifest)), names(&server.toolset));
}

#[tokio::test]
async fn a_token_guards_every_route_and_the_page_signs_in() {
    let server = server("json", JSON_MANIFEST, Some(TOKEN));
    for (method, uri) in [
        ("GET", "/tools"),
        ("GET", "/tools/weather/extensions"),
        ("DELETE", "/tools/weather/extensions"),
    ] {
        let answer = send(&server.router, method, uri, None, None).await;
        assert_eq!(answer.status, 401, "{method} {uri}");
        let challenge = answer.headers[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert!(challenge.starts_with("Bearer"), "{challenge}");
        assert!(
            answer.body["error"]
                .as_str()
                .unwrap()
                .contains("Authorization: Bearer")
        );
        let wrong = send(
            &server.router,
            method,
            uri,
            None,
            Some("test-token-0123456789abcdeX"),
        )
        .await;
        assert_eq!(wrong.status, 401);
    }
    assert_eq!(server.toolset.combos("weather").unwrap().len(), 2);
    let answer = send(&server.router, "GET", "/tools", None, Some(TOKEN)).await;
    assert_eq!(answer.status, 200);
    // The scheme's case does not matter (RFC 9110).
    let request = Request::get("/tools")
        .header(header::AUTHORIZATION, format!("bearer {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        crate::common::answer(&server.router, request).await.status,
        200
    );

    // The page: a sign-in form, then a cookie.
    let answer = send(&server.router, "GET", "/", None, None).await;
    assert_eq!(answer.status, 401);
    assert!(
        answer
            .body
            .as_str()
            .unwrap()
            .contains(r#"<form method="post" action="login">"#)
    );
    let sign_in = |token: &str| {
        Request::post("/login")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("token={token}")))
            .unwrap()
    };
    // Only the sign-in route skips the token: another path ending in `/login`
    // is checked as any other (it used to reach the fallback unchecked).
    for path in [
        "/tools/login",
        "/tools/weather/extensions/login",
        "/no/such/login",
    ] {
        for method in ["POST", "GET", "DELETE"] {
            let request = Request::builder()
                .method(method)
                .uri(path)
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(format!("token={TOKEN}")))
                .unwrap();
            let answer = crate::common::answer(&server.router, request).await;
            assert_eq!(answer.status, 401, "{method} {path}");
        }
    }
    let refused = crate::common::answer(&server.router, sign_in("nope")).await;
    assert_eq!(refused.status, 401);
    assert!(refused.headers.get(header::SET_COOKIE).is_none());
    let signed = crate::common::answer(&server.router, sign_in(TOKEN)).await;
    assert_eq!(signed.status, 303);
    let cookie = signed.headers[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let page = Request::get("/")
        .header(header::COOKIE, &pair)
        .body(Body::empty())
        .unwrap();
    let page = crate::common::answer(&server.router, page).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .as_str()
            .unwrap()
            .contains(r#"<tr data-name="weather_trace_cache""#)
    );

    // Short tokens are refused when the guard is made, before any router.
    let err = toolgraft_http::Guard::bearer("short").unwrap_err();
    assert!(
        matches!(err, toolgraft_http::GuardError::BadToken { .. }),
        "{err}"
    );
}

/// A request with `headers`, as a browser on another site (or a rebound name) sends it.
fn from(method: &str, uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Body::empty()).unwrap()
}

#[tokio::test]
async fn foreign_hosts_and_origins_get_403_on_every_route_with_or_without_a_token() {
    for token in [None, Some(TOKEN)] {
        let server = server("json", JSON_MANIFEST, token);
        let bearer = format!("Bearer {TOKEN}");
        let with_token = |mut headers: Vec<(&'static str, String)>| {
            headers.push(("authorization", bearer.clone()));
            headers
        };
        for (method, uri) in [
            ("GET", "/"),
            ("GET", "/tools"),
            ("GET", "/tools/weather/extensions"),
            ("DELETE", "/tools/weather/extensions"),
            ("POST", "/tools/weather/extensions/combos"),
            ("POST", "/login"),
            ("GET", "/no/such/route"),
        ] {
            for headers in [
                // DNS rebinding: evil.example re-pointed at the server's address.
                vec![("host", "evil.example:8080".to_owned())],
                vec![("origin", "http://evil.example".to_owned())],
                vec![
                    ("host", "evil.example".to_owned()),
                    ("origin", "http://evil.example".to_owned()),
                ],
                vec![("origin", "null".to_owned())],
            ] {
                let headers = with_token(headers);
                let pairs: Vec<(&str, &str)> =
                    headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
                let answer = crate::common::answer(&server.router, from(method, uri, &pairs)).await;
                assert_eq!(answer.status, 403, "{method} {uri} {pairs:?} {token:?}");
                let error = answer.body["error"].as_str().unwrap();
                assert!(error.contains("allow-list"), "{error}");
            }
        }
        // Nothing changed, and loopback pages are let through.
        assert_eq!(server.toolset.combos("weather").unwrap().len(), 2);
        let local = with_token(vec![
            ("host", "127.0.0.1:8080".to_owned()),
            ("origin", "http://127.0.0.1:8080".to_owned()),
        ]);
        let pairs: Vec<(&str, &str)> = local.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let answer = crate::common::answer(&server.router, from("GET", "/tools", &pairs)).await;
        assert_eq!(answer.status, 200, "{token:?}");
    }
}

#[tokio::test]
async fn the_operator_sets_the_lists_and_hostile_headers_get_400() {
    let (toolset, manifest) = {
        let server = server("json", JSON_MANIFEST, None);
        (server.toolset, server.manifest)
    };
    let guard = toolgraft_http::Guard::bearer(TOKEN)
        .and_then(|guard| guard.allow_hosts(["authoring.example.com"]))
        .and_then(|guard| guard.allow_origins(["https://authoring.example.com"]))
        .unwrap();
    let router = toolgraft_http::Authoring::new(toolset, crate::common::registry())
        .with_manifest_file(&manifest)
        .with_guard(guard)
        .router()
        .unwrap();
    let bearer = format!("Bearer {TOKEN}");
    let site = [
        ("host", "authoring.example.com"),
        ("origin", "https://authoring.example.com"),
        ("authorization", bearer.as_str()),
    ];
    let answer = crate::common::answer(&router, from("GET", "/tools", &site)).await;
    assert_eq!(answer.status, 200);
    // The loopback names are no longer on the lists.
    let local = [("host", "localhost"), ("authorization", bearer.as_str())];
    let answer = crate::common::answer(&router, from("GET", "/tools", &local)).await;
    assert_eq!(answer.status, 403);

    let twice = [
        ("host", "authoring.example.com"),
        ("authorization", bearer.as_str()),
        ("authorization", bearer.as_str()),
    ];
    let answer = crate::common::answer(&router, from("GET", "/tools", &twice)).await;
    assert_eq!(answer.status, 400);
    assert!(answer.headers.contains_key(header::WWW_AUTHENTICATE));
    let mut unreadable = from("GET", "/tools", &[]);
    unreadable.headers_mut().insert(
        header::HOST,
        header::HeaderValue::from_bytes(b"authoring\xff.example.com").unwrap(),
    );
    assert_eq!(crate::common::answer(&router, unreadable).await.status, 400);
}

#[tokio::test]
async fn the_page_renders_the_table_combos_forms_and_catalogue() {
    let server = server("json", JSON_MANIFEST, None);
    let answer = send(&server.router, "GET", "/", None, None).await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.headers[header::CONTENT_TYPE],
        "text/html; charset=utf-8"
    );
    let page = answer.body.as_str().unwrap();
    for name in names(&server.toolset) {
        assert!(
            page.contains(&format!(r#"<tr data-name="{name}""#)),
            "{name}"
        );
    }
    // Layers with kinds and where each runs; input with optional params marked.
    assert!(page.contains(r#"<code>batch{&quot;max_items&quot;:10}</code> <span class="kind">transformer</span> › <code>pool</code> <span class="kind">backend</span>"#));
    assert!(
        page.contains(
            "batch: via <code>pool</code><br>pool: caller<br>body: via <code>pool</code>"
        )
    );
    assert!(page.contains("<code>city</code>, <code>exp?</code>"));
    // A layer that must run somewhere says so beside where it runs.
    let body = r#"{"add": [["proxy", "pool"]]}"#;
    let added = send(
        &server.router,
        "POST",
        &combos_path("weather"),
        Some(body),
        None,
    )
    .await;
    assert_eq!(added.status, 200, "{}", added.body);
    let after = send(&server.router, "GET", "/", None, None).await.body;
    assert!(after.as_str().unwrap().contains(
        r#"proxy: via <code>pool</code> <span class="placement">(must run beside the body)</span><br>pool: caller<br>body: via <code>pool</code>"#
    ));
    // A remove button per combo, carrying the combo as JSON.
    assert!(
        page.contains(r#"data-tool="weather" data-combo="[&quot;trace&quot;,&quot;cache&quot;]""#)
    );
    assert!(
        page.contains(r#"<form id="add">"#)
            && page.contains(r#"<label for="add-combo">Combo</label>"#)
    );
    assert!(page.contains(r#"<th scope="row"><code>pool</code></th><td>backend</td>"#));
}

/// A writer killed mid-write leaves its temporary file beside the manifest; the
/// next server removes it when it starts, and keeps what is not one (its own
/// process's, a live process's, other files).
#[test]
fn a_server_starting_removes_the_temporary_files_a_killed_writer_left() {
    let dir = crate::common::temp_dir("leftovers");
    let manifest = dir.join("combos.json");
    std::fs::write(&manifest, JSON_MANIFEST).unwrap();
    // No process runs with the largest pid the kernel can give (2^22) plus one.
    let dead = dir.join(".combos.json.4194305.7.tmp");
    let own = dir.join(format!(".combos.json.{}.0.tmp", std::process::id()));
    let live = dir.join(".combos.json.1.0.tmp");
    let other = [
        dir.join(".other.json.4194305.0.tmp"),
        dir.join(".combos.json.x.tmp"),
    ];
    for file in [&dead, &own, &live].into_iter().chain(&other) {
        std::fs::write(file, "{\"half\": ").unwrap();
    }
    let toolset = restart(&manifest);
    let _router = toolgraft_http::Authoring::new(toolset, crate::common::registry())
        .with_manifest_file(&manifest)
        .with_guard(toolgraft_http::Guard::off())
        .router()
        .unwrap();
    assert!(!dead.exists(), "a dead writer's leftover is removed");
    assert!(own.exists(), "this process's own is kept");
    if std::path::Path::new("/proc/1").exists() {
        assert!(live.exists(), "pid 1 runs: its file is kept");
    }
    for file in &other {
        assert!(
            file.exists(),
            "{} is not a leftover of this manifest",
            file.display()
        );
    }
    assert!(manifest.exists());
}
