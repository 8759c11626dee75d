//! The issuer's keys: fetched once for many requests, refreshed for a new key at
//! most once per interval, and kept when the issuer fails.

use std::time::{Duration, Instant};

use jsonwebtoken::Algorithm;
use toolgraft_guard::{Guard, GuardError, Reason};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_requests_for_an_unknown_kid_make_one_fetch() {
    let issuer = Issuer::start().await;
    issuer.set_mode(Mode::Lagging);
    // A zero interval: only the single flight keeps the fetches to one (the
    // requests all arrive while the first fetch is under way).
    let server = issuer.server().with_refresh_interval(Duration::ZERO);
    let app = app(&Guard::oauth(server));
    let token = sign(
        &rsa_b(),
        Algorithm::RS256,
        Some("unknown-kid"),
        &claims(issuer.url()),
    );
    let calls = (0..50).map(|_| {
        let (app, token) = (app.clone(), token.clone());
        tokio::spawn(async move { call(&app, Some(&token)).await })
    });
    for answer in futures_join(calls).await {
        assert_invalid(&answer, "the token could not be verified");
        assert!(!answer.body.contains("unknown-kid"));
    }
    assert_eq!(issuer.jwks_hits(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_first_requests_share_the_first_fetch() {
    let issuer = Issuer::start().await;
    let app = app(&Guard::oauth(issuer.server()));
    let token = good_token(issuer.url());
    let calls = (0..50).map(|_| {
        let (app, token) = (app.clone(), token.clone());
        tokio::spawn(async move { call(&app, Some(&token)).await })
    });
    for answer in futures_join(calls).await {
        assert_eq!(answer.status, 200);
    }
    assert_eq!(issuer.jwks_hits(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_kids_cost_one_fetch_per_interval() {
    let issuer = Issuer::start().await;
    let app = app(&Guard::oauth(issuer.server())); // 30 s interval
    for i in 0..20 {
        let kid = format!("random-{i}");
        let token = sign(
            &rsa_b(),
            Algorithm::RS256,
            Some(&kid),
            &claims(issuer.url()),
        );
        assert_invalid(
            &call(&app, Some(&token)).await,
            "the token could not be verified",
        );
    }
    assert_eq!(issuer.jwks_hits(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_key_is_fetched_when_a_token_names_it() {
    let issuer = Issuer::start().await;
    let server = issuer.server().with_refresh_interval(Duration::ZERO);
    let app = app(&Guard::oauth(server));
    assert_eq!(
        call(&app, Some(&good_token(issuer.url()))).await.status,
        200
    );
    // The issuer rotates: key B appears, key A goes.
    issuer.set_keys(vec![jwk(&rsa_b(), Algorithm::RS256, "rsa-b")]);
    let token = sign(
        &rsa_b(),
        Algorithm::RS256,
        Some("rsa-b"),
        &claims(issuer.url()),
    );
    assert_eq!(call(&app, Some(&token)).await.status, 200);
    assert_eq!(issuer.jwks_hits(), 2);
    // A's tokens go with A: the fetched set replaced the old one.
    assert_invalid(
        &call(&app, Some(&good_token(issuer.url()))).await,
        "the token could not be verified",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_fetched_keep_serving_when_the_issuer_is_down() {
    let issuer = Issuer::start().await;
    let server = issuer.server().with_refresh_interval(Duration::ZERO);
    let app = app(&Guard::oauth(server));
    assert_eq!(
        call(&app, Some(&good_token(issuer.url()))).await.status,
        200
    );
    for mode in [Mode::Down, Mode::Garbage, Mode::Slow] {
        issuer.set_mode(mode);
        let answer = call(&app, Some(&good_token(issuer.url()))).await;
        assert_eq!(answer.status, 200, "{mode:?}");
        // A token that needs a key not fetched: the issuer is at fault, not it.
        let token = sign(
            &rsa_b(),
            Algorithm::RS256,
            Some("rsa-b"),
            &claims(issuer.url()),
        );
        let started = Instant::now();
        assert_unavailable(&call(&app, Some(&token)).await);
        // The fetch timeout (300 ms) holds against a slow issuer.
        assert!(started.elapsed() < Duration::from_secs(2), "{mode:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issuer_down_from_the_start_gets_503_then_recovers() {
    let issuer = Issuer::start().await;
    issuer.set_mode(Mode::Garbage);
    let server = issuer.server().with_refresh_interval(Duration::ZERO);
    let app = app(&Guard::oauth(server.clone()));
    assert_unavailable(&call(&app, Some(&good_token(issuer.url()))).await);
    let error = server.warm().await.unwrap_err();
    assert!(
        matches!(error, GuardError::KeysUnavailable { .. }),
        "{error}"
    );
    issuer.set_mode(Mode::Up);
    assert_eq!(
        call(&app, Some(&good_token(issuer.url()))).await.status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_fetches_ahead_and_check_uses_the_keys_at_hand() {
    let issuer = Issuer::start().await;
    let server = issuer
        .server()
        .with_jwks_uri(format!("{}/jwks", issuer.url()))
        .unwrap();
    let guard = Guard::oauth(server.clone());
    let request = |token: &str| {
        http::Request::get("/mcp")
            .header("host", "localhost")
            .header("authorization", format!("Bearer {token}"))
            .body(())
            .unwrap()
    };
    let token = good_token(issuer.url());
    // Nothing fetched yet: `check` cannot wait for it.
    let refusal = guard.check(&request(&token)).unwrap_err();
    assert_eq!(refusal.reason(), &Reason::NotCheckedHere);
    assert_eq!(refusal.status(), 503);
    assert_eq!(server.warm().await.unwrap(), 3);
    assert!(guard.check(&request(&token)).is_ok());
    let who = guard.authenticate(&request(&token)).await.unwrap().unwrap();
    assert_eq!(who.subject(), "alice");
    assert_eq!(issuer.jwks_hits(), 1);
}

async fn futures_join<T: Send + 'static>(
    handles: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let mut all = Vec::new();
    for handle in handles.collect::<Vec<_>>() {
        all.push(handle.await.unwrap());
    }
    all
}
