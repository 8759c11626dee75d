//! The claims of an access token (or an introspection answer): read with a bound on
//! their number, then checked against the resource server's rules.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::authenticated::Authenticated;
use crate::refusal::Invalid;

/// The most claims a token may carry: real access tokens carry a dozen or two; a
/// token with thousands is refused before its claims become a map.
pub(crate) const MAX_CLAIMS: usize = 100;

/// What the resource server reads of a claims object.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    pub(crate) iss: Option<String>,
    pub(crate) sub: Option<String>,
    pub(crate) client_id: Option<String>,
    pub(crate) aud: Vec<String>,
    pub(crate) exp: Option<i64>,
    pub(crate) nbf: Option<i64>,
    pub(crate) iat: Option<i64>,
    pub(crate) scopes: Vec<String>,
    pub(crate) active: Option<bool>,
    pub(crate) kept: Map<String, Value>,
}

/// Reads `json` as a claims object, keeping only the claims named in `keep` beyond
/// the registered ones; more than [`MAX_CLAIMS`] entries, or one name twice, is
/// refused as it is met.
pub(crate) fn parse(json: &[u8], keep: &[String]) -> Result<Claims, Invalid> {
    let too_many = Cell::new(false);
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let seed = ClaimsSeed {
        keep,
        too_many: &too_many,
    };
    match seed.deserialize(&mut deserializer) {
        Ok(claims) => match deserializer.end() {
            Ok(()) => Ok(claims),
            Err(_) => Err(Invalid::Unverifiable),
        },
        Err(_) if too_many.get() => Err(Invalid::TooLarge),
        Err(_) => Err(Invalid::Unverifiable),
    }
}

struct ClaimsSeed<'a> {
    keep: &'a [String],
    too_many: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for ClaimsSeed<'_> {
    type Value = Claims;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Claims, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ClaimsSeed<'_> {
    type Value = Claims;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object of claims")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Claims, A::Error> {
        let mut claims = Claims::default();
        let mut seen = BTreeSet::new();
        while let Some(name) = map.next_key::<String>()? {
            if seen.len() == MAX_CLAIMS {
                self.too_many.set(true);
                return Err(de::Error::custom("too many claims"));
            }
            // A name twice is read as the first by some parsers and as the last by
            // others: a token that means two things is refused.
            if !seen.insert(name.clone()) {
                return Err(de::Error::custom("a claim appears twice"));
            }
            match name.as_str() {
                "iss" => claims.iss = Some(map.next_value()?),
                "sub" => claims.sub = Some(map.next_value()?),
                "client_id" => claims.client_id = Some(map.next_value()?),
                "aud" => claims.aud = map.next_value::<OneOrMany>()?.into_vec(),
                "exp" => claims.exp = Some(map.next_value::<NumericDate>()?.0),
                "nbf" => claims.nbf = Some(map.next_value::<NumericDate>()?.0),
                "iat" => claims.iat = Some(map.next_value::<NumericDate>()?.0),
                "active" => claims.active = Some(map.next_value()?),
                // RFC 9068's `scope` is a space-separated string; some issuers send
                // `scp`, a string or an array: both count.
                "scope" | "scp" => {
                    for scope in map.next_value::<OneOrMany>()?.into_vec() {
                        claims
                            .scopes
                            .extend(scope.split(' ').filter(|s| !s.is_empty()).map(String::from));
                    }
                }
                _ if self.keep.contains(&name) => {
                    let value = map.next_value::<Value>()?;
                    claims.kept.insert(name, value);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(claims)
    }
}

/// A string or an array of strings (`aud`, `scp`).
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            Self::One(one) => vec![one],
            Self::Many(many) => many,
        }
    }
}

/// Seconds since the epoch; RFC 7519 allows a fraction, which is dropped.
struct NumericDate(i64);

impl<'de> Deserialize<'de> for NumericDate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let number = serde_json::Number::deserialize(deserializer)?;
        number
            .as_i64()
            .or_else(|| {
                number
                    .as_f64()
                    .filter(|seconds| seconds.is_finite() && seconds.abs() < 1e15)
                    .map(|seconds| seconds.floor() as i64)
            })
            .map(Self)
            .ok_or_else(|| de::Error::custom("not a NumericDate"))
    }
}

/// What the claims must show.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules<'a> {
    pub(crate) resource: &'a str,
    pub(crate) issuer: &'a str,
    pub(crate) leeway: Duration,
    /// A JWT must name its issuer, its expiry and its subject (RFC 9068 §2.2); an
    /// introspection answer may leave `iss` and `exp` out (RFC 7662 §2.2).
    pub(crate) jwt: bool,
}

/// The caller the claims describe, if they pass `rules` at `now`.
pub(crate) fn validate(
    claims: Claims,
    rules: Rules<'_>,
    now: SystemTime,
) -> Result<Authenticated, Invalid> {
    let now = now.duration_since(UNIX_EPOCH).map_or(0, |since| {
        i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
    });
    let leeway = i64::try_from(rules.leeway.as_secs()).unwrap_or(i64::MAX);
    match &claims.iss {
        Some(iss) if iss != rules.issuer => return Err(Invalid::WrongIssuer),
        None if rules.jwt => return Err(Invalid::MissingClaim),
        _ => {}
    }
    if claims.aud.is_empty() {
        return Err(Invalid::MissingClaim);
    }
    if !claims.aud.iter().any(|aud| aud == rules.resource) {
        return Err(Invalid::WrongAudience);
    }
    match claims.exp {
        Some(exp) if now.saturating_sub(leeway) >= exp => return Err(Invalid::Expired),
        None if rules.jwt => return Err(Invalid::MissingClaim),
        _ => {}
    }
    if claims
        .nbf
        .into_iter()
        .chain(claims.iat)
        .any(|start| start > now.saturating_add(leeway))
    {
        return Err(Invalid::NotYetValid);
    }
    let subject = match (claims.sub, claims.client_id) {
        (Some(sub), _) => sub,
        // A client-credentials token names no user; introspection still names the
        // client, which is then the caller.
        (None, Some(client)) if !rules.jwt => client,
        _ => return Err(Invalid::MissingClaim),
    };
    let mut identity = Authenticated::new(subject)
        .with_scopes(claims.scopes)
        .with_claims(claims.kept);
    if let Some(iss) = claims.iss {
        identity = identity.with_issuer(iss);
    }
    if let Some(exp) = claims.exp.and_then(|exp| u64::try_from(exp).ok()) {
        identity = identity.with_expires_at(UNIX_EPOCH + Duration::from_secs(exp));
    }
    Ok(identity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_claims_as_it_reads_them() {
        let many: Vec<String> = (0..10_000).map(|i| format!(r#""c{i}":0"#)).collect();
        let json = format!("{{{}}}", many.join(","));
        assert_eq!(parse(json.as_bytes(), &[]).unwrap_err(), Invalid::TooLarge);
        let twice = br#"{"sub":"a","sub":"b"}"#;
        assert_eq!(parse(twice, &[]).unwrap_err(), Invalid::Unverifiable);
    }

    #[test]
    fn keeps_only_the_named_claims() {
        let json =
            br#"{"sub":"a","tenant":"t","roles":["r"],"other":{"x":1},"scope":"b a","scp":["c"]}"#;
        let claims = parse(json, &["tenant".into(), "roles".into()]).unwrap();
        assert_eq!(claims.kept.len(), 2);
        assert_eq!(claims.scopes, ["b", "a", "c"]);
    }
}
