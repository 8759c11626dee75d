//! The resource server's settings, shared by its parts.

use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::Algorithm;
use reqwest::Url;

use crate::refusal::Challenge;

/// The algorithms accepted unless configured: every asymmetric one jsonwebtoken
/// verifies. HMAC is absent: its key is a shared secret, and a resource server
/// that accepted it could be fooled with a MAC keyed by the issuer's public key.
pub(crate) const DEFAULT_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The asymmetric algorithm named `name`, by its JOSE name; `none` and `HS*` are
/// never one, whatever the configuration or the token says.
pub(crate) fn asymmetric(name: &str) -> Option<Algorithm> {
    DEFAULT_ALGORITHMS
        .into_iter()
        .find(|algorithm| jose_name(*algorithm) == name)
}

pub(crate) fn jose_name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::RS256 => "RS256",
        Algorithm::RS384 => "RS384",
        Algorithm::RS512 => "RS512",
        Algorithm::PS256 => "PS256",
        Algorithm::PS384 => "PS384",
        Algorithm::PS512 => "PS512",
        Algorithm::ES256 => "ES256",
        Algorithm::ES384 => "ES384",
        Algorithm::EdDSA => "EdDSA",
        _ => "HMAC",
    }
}

/// Introspection's endpoint and this resource's client credentials.
#[derive(Clone)]
pub(crate) struct IntrospectionConfig {
    pub(crate) endpoint: Url,
    pub(crate) client_id: String,
    pub(crate) client_secret: String,
}

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) resource: String,
    pub(crate) issuer: String,
    pub(crate) issuer_url: Url,
    pub(crate) jwks_uri: Option<Url>,
    pub(crate) scopes_supported: Vec<String>,
    pub(crate) kept_claims: Vec<String>,
    pub(crate) leeway: Duration,
    pub(crate) algorithms: Vec<Algorithm>,
    pub(crate) resource_name: Option<String>,
    pub(crate) http: reqwest::Client,
    pub(crate) fetch_timeout: Duration,
    pub(crate) refresh_interval: Duration,
    pub(crate) introspection: Option<IntrospectionConfig>,
    pub(crate) introspection_ttl: Duration,
    pub(crate) metadata_path: String,
    pub(crate) metadata_url: String,
    pub(crate) challenge: Arc<Challenge>,
}
