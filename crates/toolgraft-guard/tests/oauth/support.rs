//! What the OAuth tests share: the test keys (PEM fixtures under `keys/`), tokens
//! signed with them, a local authorization server whose JWKS endpoint can be
//! switched down, slow or to garbage and counts its hits, and the guarded app.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use http::{Request, StatusCode};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use toolgraft_guard::{Authenticated, Guard, ResourceServer};
use tower::ServiceExt;

pub const RESOURCE: &str = "http://localhost/mcp";
pub const METADATA_URL: &str = "http://localhost/.well-known/oauth-protected-resource/mcp";

fn der(pem: &str) -> Vec<u8> {
    let body: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    STANDARD.decode(body).unwrap()
}

pub fn rsa_a() -> EncodingKey {
    EncodingKey::from_rsa_der(&der(include_str!("keys/rsa-a.pem")))
}

pub fn rsa_b() -> EncodingKey {
    EncodingKey::from_rsa_der(&der(include_str!("keys/rsa-b.pem")))
}

pub fn ec() -> EncodingKey {
    EncodingKey::from_ec_der(&der(include_str!("keys/ec-p256.pem")))
}

pub fn ed() -> EncodingKey {
    EncodingKey::from_ed_der(&der(include_str!("keys/ed25519.pem")))
}

/// The bytes of RSA key A's public key, as an attacker would find them.
pub fn rsa_a_public_pem() -> &'static [u8] {
    include_bytes!("keys/rsa-a.pub.pem")
}

/// The public JWK of `key`, for `algorithm`, named `kid`.
pub fn jwk(key: &EncodingKey, algorithm: Algorithm, kid: &str) -> Value {
    let mut jwk = Jwk::from_encoding_key(key, algorithm).unwrap();
    jwk.common.key_id = Some(kid.to_owned());
    serde_json::to_value(jwk).unwrap()
}

/// The issuer's usual keys: RSA A (`rsa-a`, RS256), P-256 (`ec`, ES256), Ed25519
/// (`ed`, EdDSA).
pub fn usual_keys() -> Vec<Value> {
    vec![
        jwk(&rsa_a(), Algorithm::RS256, "rsa-a"),
        jwk(&ec(), Algorithm::ES256, "ec"),
        jwk(&ed(), Algorithm::EdDSA, "ed"),
    ]
}

pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Claims that pass, for the issuer at `issuer`.
pub fn claims(issuer: &str) -> Value {
    json!({
        "iss": issuer,
        "sub": "alice",
        "aud": RESOURCE,
        "exp": now() + 600,
        "iat": now(),
        "scope": "tools:write tools:read",
        "tenant": "acme",
        "not_kept": "x",
    })
}

pub fn sign(key: &EncodingKey, algorithm: Algorithm, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(algorithm);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

/// A token as RS256 with key A names it.
pub fn good_token(issuer: &str) -> String {
    sign(&rsa_a(), Algorithm::RS256, Some("rsa-a"), &claims(issuer))
}

/// `header.payload.signature`, each part base64url of what is given.
pub fn raw_token(header: &Value, payload: &Value, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(payload.to_string()),
        URL_SAFE_NO_PAD.encode(signature)
    )
}

/// How the JWKS endpoint answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Up,
    /// `503`.
    Down,
    /// Waits 3 s before answering.
    Slow,
    /// Waits 150 ms, within the fetch timeout: a fetch long enough for many
    /// requests to arrive during it.
    Lagging,
    /// `200` with a body that is not a JWK set.
    Garbage,
}

#[derive(Clone)]
struct Shared {
    url: String,
    mode: Arc<Mutex<Mode>>,
    keys: Arc<Mutex<Vec<Value>>>,
    jwks_hits: Arc<AtomicUsize>,
    introspection_hits: Arc<AtomicUsize>,
}

/// A local authorization server: metadata, JWKS, introspection.
pub struct Issuer {
    shared: Shared,
}

pub const CLIENT_ID: &str = "mcp-server";
pub const CLIENT_SECRET: &str = "s3cret:with/odd chars";

impl Issuer {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Shared {
            url,
            mode: Arc::new(Mutex::new(Mode::Up)),
            keys: Arc::new(Mutex::new(usual_keys())),
            jwks_hits: Arc::default(),
            introspection_hits: Arc::default(),
        };
        let app = Router::new()
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/jwks", get(jwks))
            .route("/introspect", post(introspect))
            .with_state(shared.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { shared }
    }

    pub fn url(&self) -> &str {
        &self.shared.url
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = mode;
    }

    pub fn set_keys(&self, keys: Vec<Value>) {
        *self.shared.keys.lock().unwrap() = keys;
    }

    pub fn jwks_hits(&self) -> usize {
        self.shared.jwks_hits.load(Ordering::SeqCst)
    }

    pub fn introspection_hits(&self) -> usize {
        self.shared.introspection_hits.load(Ordering::SeqCst)
    }

    /// A resource server for [`RESOURCE`] that finds this issuer's JWKS by
    /// discovery, with short timeouts.
    pub fn server(&self) -> ResourceServer {
        ResourceServer::new(RESOURCE, self.url())
            .unwrap()
            .with_scopes_supported(["tools:read", "tools:write"])
            .unwrap()
            .with_kept_claims(["tenant"])
            .with_fetch_timeout(Duration::from_millis(300))
    }
}

async fn metadata(State(shared): State<Shared>) -> String {
    (json!({
        "issuer": shared.url,
        "jwks_uri": format!("{}/jwks", shared.url),
        "introspection_endpoint": format!("{}/introspect", shared.url),
    }))
    .to_string()
}

async fn jwks(State(shared): State<Shared>) -> (StatusCode, String) {
    shared.jwks_hits.fetch_add(1, Ordering::SeqCst);
    let mode = *shared.mode.lock().unwrap();
    match mode {
        Mode::Up => {}
        Mode::Down => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "issuer-secret-error-text".into(),
            );
        }
        Mode::Slow => tokio::time::sleep(Duration::from_secs(3)).await,
        Mode::Lagging => tokio::time::sleep(Duration::from_millis(150)).await,
        Mode::Garbage => {
            return (
                StatusCode::OK,
                "<html>issuer-secret-error-text</html>".into(),
            );
        }
    }
    let keys = shared.keys.lock().unwrap().clone();
    (StatusCode::OK, json!({ "keys": keys }).to_string())
}

/// Answers by the token: `active-token`, `inactive-token`, `wrong-aud-token`; any
/// other caller than this resource's client credentials gets `401`.
async fn introspect(
    State(shared): State<Shared>,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, String) {
    shared.introspection_hits.fetch_add(1, Ordering::SeqCst);
    // RFC 6749 §2.3.1: each part form-encoded, then basic.
    let expected = format!(
        "Basic {}",
        STANDARD.encode("mcp-server:s3cret%3Awith%2Fodd+chars")
    );
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&expected) {
        return (StatusCode::UNAUTHORIZED, "{}".into());
    }
    let token = body
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .unwrap_or_default();
    let answer = match token {
        "active-token" => json!({
            "active": true, "sub": "svc", "aud": RESOURCE, "iss": shared.url,
            "exp": now() + 600, "scope": "tools:read", "tenant": "acme",
        }),
        "client-token" => json!({
            "active": true, "client_id": "robot", "aud": [RESOURCE, "other"],
        }),
        "wrong-aud-token" => json!({
            "active": true, "sub": "svc", "aud": "http://other.example/mcp", "iss": shared.url,
            "exp": now() + 600,
        }),
        "expired-token" => json!({
            "active": true, "sub": "svc", "aud": RESOURCE, "exp": now() - 600,
        }),
        _ => json!({ "active": false }),
    };
    (StatusCode::OK, answer.to_string())
}

/// The app: `/mcp` answers the caller's subject, read from the extensions.
pub fn app(guard: &Guard) -> Router {
    Router::new()
        .route(
            "/mcp",
            get(
                |axum::Extension(who): axum::Extension<Authenticated>| async move {
                    format!("{} {:?}", who.subject(), who.scopes())
                },
            ),
        )
        .layer(guard.layer())
}

pub struct Answer {
    pub status: StatusCode,
    pub challenge: Option<String>,
    pub retry_after: Option<String>,
    pub body: String,
}

pub async fn call(app: &Router, token: Option<&str>) -> Answer {
    let mut request = Request::get("/mcp").header("host", "localhost");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let (status, challenge, retry_after) = {
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        (
            response.status(),
            header("www-authenticate"),
            header("retry-after"),
        )
    };
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    Answer {
        status,
        challenge,
        retry_after,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

/// The answer is `401` with exactly the `invalid_token` challenge of
/// `description`: nothing of the token, its key id or the issuer's text.
pub fn assert_invalid(answer: &Answer, description: &str) {
    assert_eq!(answer.status, 401, "{}", answer.body);
    assert_eq!(
        answer.challenge.as_deref(),
        Some(
            &format!(
                r#"Bearer error="invalid_token", error_description="{description}", resource_metadata="{METADATA_URL}""#
            )[..]
        )
    );
    assert_eq!(answer.body, format!("Unauthorized: {description}\n"));
}

/// The answer is `503` with a `Retry-After`, and says nothing of the issuer.
pub fn assert_unavailable(answer: &Answer) {
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert_eq!(answer.retry_after.as_deref(), Some("30"));
    assert_eq!(answer.challenge, None);
    assert!(!answer.body.contains("issuer-secret"));
}
