//! RFC 7662 introspection of opaque tokens, and a short-lived cache of the
//! answers that let a caller in.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use sha2::{Digest as _, Sha256};

use super::claims::{self, Rules};
use super::config::{Config, IntrospectionConfig};
use super::fetch::send;
use crate::authenticated::Authenticated;
use crate::refusal::Invalid;

/// The largest introspection answer read.
const MAX_ANSWER: usize = 64 * 1024;
/// The most answers cached; past it, new answers are not cached until old ones
/// expire.
const MAX_CACHED: usize = 4096;

/// Why an introspection did not let the caller in.
pub(crate) enum Refused {
    Invalid(Invalid),
    /// The endpoint could not be reached or answered nonsense; what exactly is not
    /// kept, as nothing of it may reach the client.
    Unavailable,
}

/// Answers that let a caller in, by the SHA-256 of the token, until the earlier
/// of the token's `exp` and the configured time to live: a revoked token is let in
/// for that long at most.
#[derive(Default)]
pub(crate) struct IntrospectionCache {
    answers: Mutex<HashMap<[u8; 32], (Authenticated, Instant)>>,
}

impl IntrospectionCache {
    fn get(&self, digest: &[u8; 32]) -> Option<Authenticated> {
        let answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        answers
            .get(digest)
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(identity, _)| identity.clone())
    }

    fn put(&self, digest: [u8; 32], identity: &Authenticated, ttl: Duration) {
        let now = Instant::now();
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if answers.len() >= MAX_CACHED {
            answers.retain(|_, (_, until)| now < *until);
        }
        if answers.len() < MAX_CACHED {
            answers.insert(digest, (identity.clone(), now + ttl));
        }
    }

    /// The caller `token` stands for, asking the endpoint unless a recent answer
    /// is cached.
    pub(crate) async fn introspect(
        &self,
        token: &str,
        endpoint: &IntrospectionConfig,
        config: &Config,
    ) -> Result<Authenticated, Refused> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(identity) = self.get(&digest) {
            return Ok(identity);
        }
        let body = format!("token={}&token_type_hint=access_token", form_encode(token));
        // RFC 6749 §2.3.1: the client's id and secret are form-encoded, then
        // joined for basic authentication.
        let request = config
            .http
            .post(endpoint.endpoint.clone())
            .basic_auth(
                form_encode(&endpoint.client_id),
                Some(form_encode(&endpoint.client_secret)),
            )
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .body(body);
        let answer = send(request, config.fetch_timeout, MAX_ANSWER)
            .await
            .map_err(|_| Refused::Unavailable)?;
        let claims =
            claims::parse(&answer, &config.kept_claims).map_err(|invalid| match invalid {
                Invalid::TooLarge => Refused::Invalid(Invalid::TooLarge),
                _ => Refused::Unavailable,
            })?;
        match claims.active {
            Some(true) => {}
            Some(false) => return Err(Refused::Invalid(Invalid::Inactive)),
            None => return Err(Refused::Unavailable),
        }
        let rules = Rules {
            resource: &config.resource,
            issuer: &config.issuer,
            leeway: config.leeway,
            jwt: false,
        };
        let identity =
            claims::validate(claims, rules, SystemTime::now()).map_err(Refused::Invalid)?;
        let until_exp = identity
            .expires_at()
            .and_then(|at| at.duration_since(SystemTime::now()).ok());
        let ttl = until_exp.map_or(config.introspection_ttl, |left| {
            left.min(config.introspection_ttl)
        });
        if !ttl.is_zero() {
            self.put(digest, &identity, ttl);
        }
        Ok(identity)
    }
}

/// `application/x-www-form-urlencoded` for one value.
fn form_encode(value: &str) -> String {
    let mut encoded = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                encoded.push(char::from(byte));
            }
            b' ' => encoded.push('+'),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    #[test]
    fn form_encodes() {
        assert_eq!(super::form_encode("a b+c/=~"), "a+b%2Bc%2F%3D%7E");
    }
}
