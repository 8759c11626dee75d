//! The issuer's signing keys (its JWKS), fetched at first use and again when a
//! token names a key not seen yet: one fetch at a time, at most one per refresh
//! interval, and the keys already fetched kept when a fetch fails.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use reqwest::Url;
use reqwest::header::ACCEPT;
use serde::Deserialize;
use serde_json::Value;

use super::config::{Config, asymmetric};
use super::fetch::{FetchError, send};

/// The largest JWKS or metadata document read.
const MAX_DOCUMENT: usize = 256 * 1024;
/// The most keys read from one JWKS.
const MAX_KEYS: usize = 64;

/// One verification key.
pub(crate) struct Key {
    /// The one algorithm the JWK names, if it names one.
    pub(crate) algorithm: Option<Algorithm>,
    pub(crate) family: AlgorithmFamily,
    pub(crate) curve: Option<EllipticCurve>,
    pub(crate) decoding: DecodingKey,
}

impl Key {
    /// Whether a token signed with `algorithm` may be verified with this key: the
    /// families agree, the JWK's own `alg` (if any) is that one, and an EC key is on
    /// the algorithm's curve.
    pub(crate) fn fits(&self, algorithm: Algorithm) -> bool {
        let curve = match algorithm {
            Algorithm::ES256 => Some(EllipticCurve::P256),
            Algorithm::ES384 => Some(EllipticCurve::P384),
            Algorithm::EdDSA => Some(EllipticCurve::Ed25519),
            _ => None,
        };
        algorithm.family() == self.family
            && self.algorithm.is_none_or(|own| own == algorithm)
            && self.curve == curve
    }
}

/// The keys of one successful fetch.
#[derive(Default)]
pub(crate) struct KeySet {
    by_kid: HashMap<String, Arc<Key>>,
    all: Vec<Arc<Key>>,
}

impl KeySet {
    /// The key `kid` names; a token without a `kid` is verified only against a set
    /// of exactly one key.
    fn find(&self, kid: Option<&str>) -> Option<Arc<Key>> {
        match kid {
            Some(kid) => self.by_kid.get(kid).cloned(),
            None => match self.all.as_slice() {
                [only] => Some(Arc::clone(only)),
                _ => None,
            },
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.all.len()
    }
}

#[derive(Default)]
struct State {
    keys: Arc<KeySet>,
    /// When the last fetch ended, and whether it succeeded.
    last: Option<(Instant, bool)>,
    /// Counts fetches, so a request that waited for one knows it happened.
    generation: u64,
    /// The JWKS URI found by discovery.
    discovered: Option<Url>,
}

/// The answer of a lookup.
pub(crate) enum Lookup {
    Found(Arc<Key>),
    /// The issuer's current keys do not include it.
    Unknown,
    /// The keys could not be fetched.
    Unavailable,
}

#[derive(Default)]
pub(crate) struct KeyCache {
    state: Mutex<State>,
    /// Held for the length of a fetch: requests that need one wait on it and then
    /// use its result (single flight).
    flight: tokio::sync::Mutex<()>,
}

impl KeyCache {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The key among those already fetched, without fetching.
    pub(crate) fn cached(&self, kid: Option<&str>) -> Option<Arc<Key>> {
        self.state().keys.find(kid)
    }

    /// The key `kid` names, fetching the issuer's keys when it is not among those
    /// fetched and the refresh interval allows.
    pub(crate) async fn find(&self, kid: Option<&str>, config: &Config) -> Lookup {
        let generation = {
            let state = self.state();
            if let Some(key) = state.keys.find(kid) {
                return Lookup::Found(key);
            }
            state.generation
        };
        let _flight = self.flight.lock().await;
        {
            let state = self.state();
            if let Some(key) = state.keys.find(kid) {
                return Lookup::Found(key);
            }
            let fetched_meanwhile = state.generation != generation;
            // An unknown `kid` costs the issuer one fetch per interval, however many
            // random ones an attacker sends.
            let too_soon = state
                .last
                .is_some_and(|(at, _)| at.elapsed() < config.refresh_interval);
            if fetched_meanwhile || too_soon {
                return match state.last {
                    Some((_, false)) => Lookup::Unavailable,
                    _ => Lookup::Unknown,
                };
            }
        }
        match self.fetch(config).await {
            Ok(_) => match self.cached(kid) {
                Some(key) => Lookup::Found(key),
                None => Lookup::Unknown,
            },
            Err(_) => Lookup::Unavailable,
        }
    }

    /// Fetches the keys now (whatever the interval), for `warm`.
    pub(crate) async fn refresh(&self, config: &Config) -> Result<usize, FetchError> {
        let _flight = self.flight.lock().await;
        self.fetch(config).await
    }

    /// One fetch; the caller holds `flight`.
    async fn fetch(&self, config: &Config) -> Result<usize, FetchError> {
        let result = self.fetch_set(config).await;
        let mut state = self.state();
        state.generation += 1;
        state.last = Some((Instant::now(), result.is_ok()));
        let (set, uri) = result?;
        let count = set.len();
        state.keys = Arc::new(set);
        if config.jwks_uri.is_none() {
            state.discovered = Some(uri);
        }
        Ok(count)
    }

    async fn fetch_set(&self, config: &Config) -> Result<(KeySet, Url), FetchError> {
        let known = config
            .jwks_uri
            .clone()
            .or_else(|| self.state().discovered.clone());
        let uri = match known {
            Some(uri) => uri,
            None => discover(config).await?,
        };
        let request = config
            .http
            .get(uri.clone())
            .header(ACCEPT, "application/jwk-set+json, application/json");
        let body = send(request, config.fetch_timeout, MAX_DOCUMENT).await?;
        Ok((parse_jwks(&body)?, uri))
    }
}

/// The JWKS URI from the issuer's metadata: RFC 8414's document first, then
/// OpenID Connect's, each at the path-inserted address (and OpenID's also at the
/// appended one, for issuers with a path). A document must name the configured
/// issuer exactly (RFC 8414 §3.3), or it is someone else's.
async fn discover(config: &Config) -> Result<Url, FetchError> {
    let issuer = &config.issuer_url;
    let origin = issuer.origin().ascii_serialization();
    let path = issuer.path().trim_end_matches('/');
    let mut candidates = vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
    ];
    if !path.is_empty() {
        candidates.push(format!("{origin}{path}/.well-known/openid-configuration"));
    }
    let mut last = FetchError::Garbage("not an authorization server's metadata");
    for candidate in candidates {
        let Ok(url) = Url::parse(&candidate) else {
            continue;
        };
        let request = config.http.get(url).header(ACCEPT, "application/json");
        match send(request, config.fetch_timeout, MAX_DOCUMENT).await {
            Ok(body) => match jwks_uri_of(&body, &config.issuer) {
                Ok(uri) => return Ok(uri),
                Err(error) => last = error,
            },
            Err(error) => last = error,
        }
    }
    Err(last)
}

fn jwks_uri_of(body: &[u8], issuer: &str) -> Result<Url, FetchError> {
    #[derive(Deserialize)]
    struct Metadata {
        issuer: String,
        jwks_uri: String,
    }
    let metadata: Metadata = serde_json::from_slice(body)
        .map_err(|_| FetchError::Garbage("not metadata naming `issuer` and `jwks_uri`"))?;
    if metadata.issuer != issuer {
        return Err(FetchError::Garbage("metadata of another issuer"));
    }
    Url::parse(&metadata.jwks_uri)
        .ok()
        .filter(|uri| matches!(uri.scheme(), "http" | "https"))
        .ok_or(FetchError::Garbage(
            "metadata whose `jwks_uri` is not a URL",
        ))
}

/// The signing keys of a JWKS; keys it cannot use (encryption keys, symmetric
/// ones, unknown types) are skipped, and a set with none it can use is refused as
/// a whole, so that a broken answer does not replace working keys.
fn parse_jwks(body: &[u8]) -> Result<KeySet, FetchError> {
    #[derive(Deserialize)]
    struct Jwks {
        keys: Vec<Value>,
    }
    let jwks: Jwks =
        serde_json::from_slice(body).map_err(|_| FetchError::Garbage("not a JWK set"))?;
    let mut set = KeySet::default();
    for value in jwks.keys.into_iter().take(MAX_KEYS) {
        let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
            continue;
        };
        if jwk
            .common
            .public_key_use
            .as_ref()
            .is_some_and(|usage| *usage != PublicKeyUse::Signature)
        {
            continue;
        }
        let (family, curve) = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => (AlgorithmFamily::Rsa, None),
            AlgorithmParameters::EllipticCurve(params) => {
                (AlgorithmFamily::Ec, Some(params.curve.clone()))
            }
            AlgorithmParameters::OctetKeyPair(params) => {
                (AlgorithmFamily::Ed, Some(params.curve.clone()))
            }
            _ => continue,
        };
        let algorithm = match jwk.common.key_algorithm {
            None => None,
            Some(named) => match asymmetric(&named.to_string()) {
                Some(algorithm) if algorithm.family() == family => Some(algorithm),
                _ => continue,
            },
        };
        let Ok(decoding) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        let key = Arc::new(Key {
            algorithm,
            family,
            curve,
            decoding,
        });
        if let Some(kid) = jwk.common.key_id {
            set.by_kid.entry(kid).or_insert_with(|| Arc::clone(&key));
        }
        set.all.push(key);
    }
    if set.all.is_empty() {
        return Err(FetchError::Garbage("a JWK set without a signing key"));
    }
    Ok(set)
}
