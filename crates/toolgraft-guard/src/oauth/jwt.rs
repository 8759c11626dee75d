//! A JWT access token: its shape and header read before any key is looked up, then
//! its signature and claims checked with the key.

use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Algorithm;
use jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER;
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::claims::{self, Rules};
use super::config::{Config, asymmetric};
use super::keys::Key;
use crate::authenticated::Authenticated;
use crate::refusal::Invalid;

/// The longest token read at all: a larger one is refused before it is split,
/// decoded or parsed, so a megabyte of token costs a length comparison.
pub(crate) const MAX_TOKEN_LEN: usize = 8 * 1024;

/// A JWT whose header passed: an allowed algorithm, no extension it must
/// understand.
pub(crate) struct Jwt<'t> {
    pub(crate) algorithm: Algorithm,
    pub(crate) kid: Option<String>,
    signed: &'t str,
    payload: &'t str,
    signature: &'t str,
}

/// Whether `token` has a JWS's shape, three dot-separated parts; anything else is
/// an opaque token, for introspection.
pub(crate) fn is_jwt(token: &str) -> bool {
    token.bytes().filter(|b| *b == b'.').count() == 2
}

/// Reads the header of `token` (already known to be at most [`MAX_TOKEN_LEN`]).
pub(crate) fn parse<'t>(token: &'t str, config: &Config) -> Result<Jwt<'t>, Invalid> {
    #[derive(Deserialize)]
    struct Header {
        alg: String,
        #[serde(default)]
        kid: Option<String>,
        #[serde(default)]
        crit: Option<IgnoredAny>,
    }
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Invalid::Unverifiable);
    };
    let header = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| Invalid::Unverifiable)?;
    let header: Header = serde_json::from_slice(&header).map_err(|_| Invalid::Unverifiable)?;
    // `crit` names extensions a verifier must understand (RFC 7515 §4.1.11); this
    // one understands none.
    if header.crit.is_some() {
        return Err(Invalid::Unverifiable);
    }
    let algorithm = asymmetric(&header.alg)
        .filter(|algorithm| config.algorithms.contains(algorithm))
        .ok_or(Invalid::Unverifiable)?;
    Ok(Jwt {
        algorithm,
        kid: header.kid,
        signed: &token[..token.len() - signature.len() - 1],
        payload,
        signature,
    })
}

impl Jwt<'_> {
    /// The caller, if `key` verifies the signature and the claims pass.
    pub(crate) fn verify(
        &self,
        key: &Key,
        config: &Config,
        now: SystemTime,
    ) -> Result<Authenticated, Invalid> {
        if !key.fits(self.algorithm) {
            return Err(Invalid::Unverifiable);
        }
        let signature = URL_SAFE_NO_PAD
            .decode(self.signature)
            .map_err(|_| Invalid::Unverifiable)?;
        // The RustCrypto provider by name, not jsonwebtoken's process default:
        // that one panics when an application enables both of its providers.
        let verifier = (DEFAULT_PROVIDER.verifier_factory)(&self.algorithm, &key.decoding)
            .map_err(|_| Invalid::Unverifiable)?;
        verifier
            .verify(self.signed.as_bytes(), &signature)
            .map_err(|_| Invalid::Unverifiable)?;
        let payload = URL_SAFE_NO_PAD
            .decode(self.payload)
            .map_err(|_| Invalid::Unverifiable)?;
        let claims = claims::parse(&payload, &config.kept_claims)?;
        let rules = Rules {
            resource: &config.resource,
            issuer: &config.issuer,
            leeway: config.leeway,
            jwt: true,
        };
        claims::validate(claims, rules, now)
    }
}
