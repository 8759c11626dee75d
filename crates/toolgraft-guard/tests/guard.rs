//! The guard in front of an axum router, as both servers use it: what passes, what
//! is refused with which status, and hostile headers answered without a panic.

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::header::{AUTHORIZATION, COOKIE, HOST, ORIGIN, WWW_AUTHENTICATE};
use http::{HeaderValue, Request, StatusCode};
use toolgraft_guard::{Guard, GuardError, Reason, TokenProblem};
use tower::ServiceExt;

const TOKEN: &str = "0123456789abcdef-token";

fn app(guard: &Guard) -> Router {
    Router::new()
        .route("/", get(|| async { "inner" }))
        .layer(guard.layer())
}

/// A `GET /` with `headers` (appended, so a name may repeat).
fn request(headers: &[(http::HeaderName, HeaderValue)]) -> Request<Body> {
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    for (name, value) in headers {
        request.headers_mut().append(name, value.clone());
    }
    request
}

fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap()
}

async fn status(app: &Router, headers: &[(http::HeaderName, HeaderValue)]) -> StatusCode {
    app.clone()
        .oneshot(request(headers))
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn loopback_hosts_and_origins_pass_foreign_ones_get_403() {
    let app = app(&Guard::off());
    for host in [
        "localhost",
        "localhost:8080",
        "127.0.0.1:1",
        "[::1]:9",
        "LOCALHOST",
    ] {
        assert_eq!(status(&app, &[(HOST, value(host))]).await, 200, "{host}");
    }
    for origin in [
        "http://localhost:3000",
        "https://127.0.0.1",
        "http://[::1]:8080",
    ] {
        let headers = [(HOST, value("localhost")), (ORIGIN, value(origin))];
        assert_eq!(status(&app, &headers).await, 200, "{origin}");
    }
    for host in [
        "evil.example",
        "evil.example:8080",
        "127.0.0.2",
        "localhost.",
        "0.0.0.0",
    ] {
        assert_eq!(status(&app, &[(HOST, value(host))]).await, 403, "{host}");
    }
    for origin in [
        "http://evil.example",
        "http://localhost.evil.example",
        "null",
        "not an origin",
        "file://",
        "http://localhost:3000/path",
    ] {
        let headers = [(HOST, value("localhost")), (ORIGIN, value(origin))];
        assert_eq!(status(&app, &headers).await, 403, "{origin}");
    }
}

#[tokio::test]
async fn the_token_is_checked_after_host_and_origin() {
    let app = app(&Guard::bearer(TOKEN).unwrap());
    let host = (HOST, value("localhost"));
    let ok = [
        host.clone(),
        (AUTHORIZATION, value(&format!("Bearer {TOKEN}"))),
    ];
    assert_eq!(status(&app, &ok).await, 200);
    let lower = [
        host.clone(),
        (AUTHORIZATION, value(&format!("bearer  {TOKEN} "))),
    ];
    assert_eq!(status(&app, &lower).await, 200);

    for (authorization, challenge) in [
        (None, r#"Bearer realm="toolgraft""#),
        (
            Some("Bearer wrong"),
            r#"Bearer realm="toolgraft", error="invalid_token""#,
        ),
        (
            Some(&format!("Bearer {TOKEN}x")[..]),
            r#"Bearer realm="toolgraft", error="invalid_token""#,
        ),
        (
            Some("Basic MDEyMzQ1Njc4OWFiY2RlZg=="),
            r#"Bearer realm="toolgraft""#,
        ),
        (Some(TOKEN), r#"Bearer realm="toolgraft""#),
    ] {
        let mut headers = vec![host.clone()];
        headers.extend(authorization.map(|a| (AUTHORIZATION, value(a))));
        let refused = app.clone().oneshot(request(&headers)).await.unwrap();
        assert_eq!(refused.status(), 401, "{authorization:?}");
        assert_eq!(refused.headers()[WWW_AUTHENTICATE], challenge);
        let body = axum::body::to_bytes(refused.into_body(), 1024)
            .await
            .unwrap();
        assert!(body.starts_with(b"Unauthorized: "), "{body:?}");
    }
    // A foreign page with the right token is still refused, as a foreign page.
    let rebound = [
        (HOST, value("evil.example")),
        (AUTHORIZATION, value(&format!("Bearer {TOKEN}"))),
    ];
    assert_eq!(status(&app, &rebound).await, 403);
}

#[tokio::test]
async fn the_cookie_and_the_sign_in_route_are_the_servers_choice() {
    let guard = Guard::bearer(TOKEN).unwrap();
    let app = Router::new()
        .route("/", get(|| async { "inner" }))
        .route("/login", get(|| async { "sign in" }))
        .layer(
            guard
                .layer()
                .with_token_cookie("tok")
                .with_token_skipped_for(|request| request.uri.path() == "/login"),
        );
    let host = (HOST, value("localhost"));
    let cookie = (COOKIE, value(&format!("a=b; tok={TOKEN}")));
    assert_eq!(status(&app, &[host.clone(), cookie]).await, 200);
    let wrong = (COOKIE, value("tok=0123456789abcdef"));
    assert_eq!(status(&app, &[host.clone(), wrong]).await, 401);

    let login = |host: &str| {
        Request::get("/login")
            .header(HOST, host)
            .body(Body::empty())
    };
    let signing_in = app.clone().oneshot(login("localhost").unwrap()).await;
    assert_eq!(signing_in.unwrap().status(), 200);
    let foreign = app.clone().oneshot(login("evil.example").unwrap()).await;
    assert_eq!(foreign.unwrap().status(), 403);
}

#[tokio::test]
async fn hostile_headers_get_400_401_or_403_never_a_panic() {
    let app = app(&Guard::bearer(TOKEN).unwrap());
    let host = (HOST, value("localhost"));
    let bearer = (AUTHORIZATION, value(&format!("Bearer {TOKEN}")));
    let huge = "a".repeat(1 << 20);
    let non_utf8 = HeaderValue::from_bytes(b"local\xffhost").unwrap();
    for (headers, expected) in [
        (vec![], 400),
        (vec![(HOST, non_utf8.clone())], 400),
        (vec![(HOST, value("local host"))], 400),
        (vec![(HOST, value(&huge))], 403),
        (vec![host.clone(), host.clone()], 400),
        (vec![host.clone(), bearer.clone(), bearer.clone()], 400),
        (
            vec![host.clone(), bearer.clone(), (ORIGIN, value("null"))],
            403,
        ),
        (vec![host.clone(), bearer.clone(), (ORIGIN, non_utf8)], 403),
        (
            vec![host.clone(), bearer.clone(), (ORIGIN, value(&huge))],
            403,
        ),
        (
            vec![
                host.clone(),
                bearer.clone(),
                (ORIGIN, value("http://localhost")),
                (ORIGIN, value("http://localhost")),
            ],
            400,
        ),
        (
            vec![
                host.clone(),
                (AUTHORIZATION, value(&format!("Bearer {huge}"))),
            ],
            401,
        ),
        (
            vec![
                host.clone(),
                (
                    AUTHORIZATION,
                    HeaderValue::from_bytes(b"Bearer \xff").unwrap(),
                ),
            ],
            401,
        ),
        (vec![host.clone(), (AUTHORIZATION, value("Bearer"))], 401),
        (vec![host.clone(), (COOKIE, value(&huge))], 401),
    ] {
        let names: Vec<_> = headers.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(status(&app, &headers).await, expected, "{names:?}");
    }
    // Two `Authorization` headers are an invalid request, with a challenge saying so.
    let twice = request(&[host, bearer.clone(), bearer]);
    let refused = app.oneshot(twice).await.unwrap();
    assert_eq!(
        refused.headers()[WWW_AUTHENTICATE],
        r#"Bearer realm="toolgraft", error="invalid_request""#
    );
}

#[test]
fn tokens_and_entries_are_checked_when_configured() {
    for (token, problem) in [
        ("", TokenProblem::Empty),
        ("=", TokenProblem::NotToken68),
        ("two words in this token", TokenProblem::NotToken68),
        ("quote\"0123456789abcdef", TokenProblem::NotToken68),
        ("\u{e9}t\u{e9}0123456789abcdef", TokenProblem::NotToken68),
        ("0123456789abcde", TokenProblem::TooShort { len: 15 }),
        (&"x".repeat(4097), TokenProblem::TooLong { len: 4097 }),
    ] {
        assert_eq!(
            Guard::bearer(token).unwrap_err(),
            GuardError::BadToken { problem },
            "{token}"
        );
    }
    // The token is never quoted.
    let error = Guard::bearer("my secret").unwrap_err().to_string();
    assert!(!error.contains("secret"), "{error}");
    assert!(Guard::bearer("0123456789abcdef==").is_ok());

    let error = Guard::off()
        .allow_hosts([format!("https://{}", "x".repeat(100))])
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains(&format!("https://{}...", "x".repeat(52))),
        "{error}"
    );
}

#[test]
fn check_works_without_tower() {
    let guard = Guard::off().allow_hosts(["tools.example.com"]).unwrap();
    let request = |host: &str| Request::get("/").header(HOST, host).body(()).unwrap();
    assert!(guard.check(&request("tools.example.com:443")).is_ok());
    let refusal = guard.check(&request("localhost")).unwrap_err();
    assert_eq!(refusal.reason(), &Reason::ForeignHost);
}

#[tokio::test]
async fn a_token_table_names_the_caller_and_one_token_names_nobody() {
    use axum::Extension;
    use toolgraft_guard::{Authenticated, TokenTable};

    let table = TokenTable::new()
        .grant(TOKEN, Authenticated::new("ci").with_scopes(["b", "a"]))
        .unwrap()
        .grant("another-token-0123456789", Authenticated::new("alice"))
        .unwrap();
    let who = |guard: &Guard| {
        Router::new()
            .route(
                "/",
                get(|who: Option<Extension<Authenticated>>| async move {
                    who.map_or("nobody".to_owned(), |Extension(who)| {
                        format!("{} {:?}", who.subject(), who.scopes())
                    })
                }),
            )
            .layer(guard.layer())
    };
    let app = who(&Guard::tokens(table));
    let bearer = |token: &str| {
        [
            (HOST, value("localhost")),
            (AUTHORIZATION, value(&format!("Bearer {token}"))),
        ]
    };
    for (token, expected) in [
        (TOKEN, r#"ci ["a", "b"]"#),
        ("another-token-0123456789", "alice []"),
    ] {
        let response = app.clone().oneshot(request(&bearer(token))).await.unwrap();
        assert_eq!(response.status(), 200);
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(body, expected);
    }
    let refused = app
        .clone()
        .oneshot(request(&bearer("not-in-the-table-0123")))
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(
        refused.headers()[WWW_AUTHENTICATE],
        r#"Bearer realm="toolgraft", error="invalid_token""#
    );
    assert_eq!(status(&app, &[(HOST, value("localhost"))]).await, 401);

    // One shared token names nobody: no `Authenticated` is inserted.
    let app = who(&Guard::bearer(TOKEN).unwrap());
    let response = app.oneshot(request(&bearer(TOKEN))).await.unwrap();
    let body = axum::body::to_bytes(response.into_body(), 1024)
        .await
        .unwrap();
    assert_eq!(body, "nobody");
}
