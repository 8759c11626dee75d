//! Tokens that pass, and every forgery refused with the right status and a
//! description that names nothing of the token.

use std::time::{Duration, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::json;
use toolgraft_guard::Guard;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_of_each_key_type_pass_and_tell_who_called() {
    let issuer = Issuer::start().await;
    let server = issuer.server();
    let app = app(&Guard::oauth(server.clone()));
    for (key, algorithm, kid) in [
        (rsa_a(), Algorithm::RS256, "rsa-a"),
        (ec(), Algorithm::ES256, "ec"),
        (ed(), Algorithm::EdDSA, "ed"),
    ] {
        let token = sign(&key, algorithm, Some(kid), &claims(issuer.url()));
        let answer = call(&app, Some(&token)).await;
        assert_eq!(answer.status, 200, "{kid}: {}", answer.body);
        assert_eq!(answer.body, r#"alice ["tools:read", "tools:write"]"#);
    }
    assert_eq!(issuer.jwks_hits(), 1);

    let mut claims = claims(issuer.url());
    claims["exp"] = json!(4_000_000_000_i64);
    let token = sign(&rsa_a(), Algorithm::RS256, Some("rsa-a"), &claims);
    let who = server.authenticate(&token).await.unwrap();
    assert_eq!(who.subject(), "alice");
    assert_eq!(who.issuer(), Some(issuer.url()));
    assert_eq!(who.scopes(), ["tools:read", "tools:write"]);
    // Only the claims named to keep.
    assert_eq!(who.claims().len(), 1);
    assert_eq!(who.claims()["tenant"], "acme");
    assert_eq!(
        who.expires_at(),
        Some(UNIX_EPOCH + Duration::from_secs(4_000_000_000))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_gets_the_metadata_and_the_scopes() {
    let issuer = Issuer::start().await;
    let app = app(&Guard::oauth(issuer.server()));
    let answer = call(&app, None).await;
    assert_eq!(answer.status, 401);
    assert_eq!(
        answer.challenge.as_deref(),
        Some(
            &format!(
                r#"Bearer scope="tools:read tools:write", resource_metadata="{METADATA_URL}""#
            )[..]
        )
    );
    assert_eq!(issuer.jwks_hits(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_tokens_are_refused_saying_nothing_of_them() {
    let issuer = Issuer::start().await;
    let app = app(&Guard::oauth(issuer.server()));
    let good = claims(issuer.url());
    let with = |field: &str, value: serde_json::Value| {
        let mut claims = good.clone();
        claims[field] = value;
        claims
    };
    let without = |field: &str| {
        let mut claims = good.clone();
        claims.as_object_mut().unwrap().remove(field);
        claims
    };
    let rs256 =
        |claims: &serde_json::Value| sign(&rsa_a(), Algorithm::RS256, Some("rsa-a"), claims);
    let unverifiable = "the token could not be verified";
    let cases = [
        (
            "alg none",
            raw_token(&json!({"alg": "none", "kid": "rsa-a"}), &good, b""),
            unverifiable,
        ),
        (
            "alg none, no kid",
            raw_token(&json!({"alg": "none"}), &good, b""),
            unverifiable,
        ),
        (
            "signed with another RSA key under rsa-a's kid",
            sign(&rsa_b(), Algorithm::RS256, Some("rsa-a"), &good),
            unverifiable,
        ),
        (
            "HS256 keyed with rsa-a's public key",
            sign(
                &EncodingKey::from_secret(rsa_a_public_pem()).unwrap(),
                Algorithm::HS256,
                Some("rsa-a"),
                &good,
            ),
            unverifiable,
        ),
        (
            "RS256 naming the EC key",
            sign(&rsa_a(), Algorithm::RS256, Some("ec"), &good),
            unverifiable,
        ),
        (
            "PS256 with the key whose JWK says RS256",
            sign(&rsa_a(), Algorithm::PS256, Some("rsa-a"), &good),
            unverifiable,
        ),
        (
            "a header with crit",
            raw_token(
                &json!({"alg": "RS256", "kid": "rsa-a", "crit": ["exp"]}),
                &good,
                b"sig",
            ),
            unverifiable,
        ),
        (
            "the signature cut off",
            {
                let token = rs256(&good);
                token[..token.len() - 4].to_owned()
            },
            unverifiable,
        ),
        (
            "the payload swapped",
            {
                let token = rs256(&good);
                let other = rs256(&with("sub", json!("mallory")));
                let parts: Vec<&str> = token.split('.').collect();
                let other: Vec<&str> = other.split('.').collect();
                format!("{}.{}.{}", parts[0], other[1], parts[2])
            },
            unverifiable,
        ),
        ("not base64", "!!!.???.***".to_owned(), unverifiable),
        (
            "expired",
            rs256(&with("exp", json!(now() - 120))),
            "the token has expired",
        ),
        (
            "not yet valid",
            rs256(&with("nbf", json!(now() + 300))),
            "the token is not valid yet",
        ),
        (
            "issued in the future",
            rs256(&with("iat", json!(now() + 300))),
            "the token is not valid yet",
        ),
        (
            "another audience",
            rs256(&with("aud", json!("http://localhost/other"))),
            "the token is not valid for this resource",
        ),
        (
            "audiences without this one",
            rs256(&with(
                "aud",
                json!(["http://a.example", "http://b.example"]),
            )),
            "the token is not valid for this resource",
        ),
        (
            "another issuer",
            rs256(&with("iss", json!("http://evil.example"))),
            "the token is not from this resource's authorization server",
        ),
        (
            "no exp",
            rs256(&without("exp")),
            "the token lacks a required claim",
        ),
        (
            "no aud",
            rs256(&without("aud")),
            "the token lacks a required claim",
        ),
        (
            "no iss",
            rs256(&without("iss")),
            "the token lacks a required claim",
        ),
        (
            "no sub",
            rs256(&without("sub")),
            "the token lacks a required claim",
        ),
        (
            "150 claims (under 8 KiB)",
            rs256(&{
                let mut claims = good.clone();
                for i in 0..150 {
                    claims[format!("c{i}")] = json!(1);
                }
                claims
            }),
            "the token is too large",
        ),
        (
            "10,000 claims",
            rs256(&{
                let mut claims = good.clone();
                for i in 0..10_000 {
                    claims[format!("c{i}")] = json!(1);
                }
                claims
            }),
            "the token is too large",
        ),
        (
            "a 1 MB token",
            "a".repeat(1 << 20),
            "the token is too large",
        ),
        (
            "an opaque token, no introspection",
            "opaque-token-value".to_owned(),
            unverifiable,
        ),
    ];
    for (what, token, description) in cases {
        let answer = call(&app, Some(&token)).await;
        assert_invalid(&answer, description);
        assert!(!answer.body.contains("rsa-a"), "{what}");
    }
    // Within the leeway (30 s): still valid.
    let answer = call(&app, Some(&rs256(&with("exp", json!(now() - 5))))).await;
    assert_eq!(answer.status, 200);
    // An audience array naming this resource among others.
    let answer = call(&app, Some(&rs256(&with("aud", json!(["x", RESOURCE]))))).await;
    assert_eq!(answer.status, 200);
    // One fetch: every forgery was refused with the keys of the first.
    assert_eq!(issuer.jwks_hits(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_algorithm_off_the_allow_list_is_refused() {
    let issuer = Issuer::start().await;
    let server = issuer.server().with_algorithms(["ES256"]).unwrap();
    let app = app(&Guard::oauth(server));
    assert_invalid(
        &call(&app, Some(&good_token(issuer.url()))).await,
        "the token could not be verified",
    );
    let token = sign(&ec(), Algorithm::ES256, Some("ec"), &claims(issuer.url()));
    assert_eq!(call(&app, Some(&token)).await.status, 200);
}
