//! Opaque tokens, introspected (RFC 7662) at a local endpoint.

use std::time::Duration;

use toolgraft_guard::Guard;

use crate::support::*;

fn introspecting(issuer: &Issuer) -> Guard {
    let server = issuer
        .server()
        .with_introspection(
            format!("{}/introspect", issuer.url()),
            CLIENT_ID,
            CLIENT_SECRET,
        )
        .unwrap();
    Guard::oauth(server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_token_passes_and_its_answer_is_reused() {
    let issuer = Issuer::start().await;
    let app = app(&introspecting(&issuer));
    for _ in 0..3 {
        let answer = call(&app, Some("active-token")).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.body, r#"svc ["tools:read"]"#);
    }
    assert_eq!(issuer.introspection_hits(), 1);
    // A client-credentials answer names the client.
    assert_eq!(call(&app, Some("client-token")).await.body, "robot []");
    assert_eq!(issuer.jwks_hits(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inactive_expired_and_foreign_tokens_are_refused() {
    let issuer = Issuer::start().await;
    let app = app(&introspecting(&issuer));
    for (token, description) in [
        ("inactive-token", "the token is not active"),
        ("some-unknown-token", "the token is not active"),
        (
            "wrong-aud-token",
            "the token is not valid for this resource",
        ),
        ("expired-token", "the token has expired"),
    ] {
        let answer = call(&app, Some(token)).await;
        assert_invalid(&answer, description);
        assert!(!answer.body.contains(token));
    }
    // Refusals are not cached: each asked again.
    assert_eq!(call(&app, Some("inactive-token")).await.status, 401);
    assert_eq!(issuer.introspection_hits(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_refuses_us_or_is_away_gets_503() {
    let issuer = Issuer::start().await;
    let wrong_secret = issuer
        .server()
        .with_introspection(format!("{}/introspect", issuer.url()), CLIENT_ID, "wrong")
        .unwrap();
    assert_unavailable(&call(&app(&Guard::oauth(wrong_secret)), Some("active-token")).await);
    let away = issuer
        .server()
        .with_introspection("http://127.0.0.1:9/introspect", CLIENT_ID, CLIENT_SECRET)
        .unwrap()
        .with_fetch_timeout(Duration::from_millis(200));
    assert_unavailable(&call(&app(&Guard::oauth(away)), Some("active-token")).await);
}
