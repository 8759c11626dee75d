//! [`ResourceServer`]: the guard as an OAuth 2.1 resource server (feature `oauth`),
//! as the MCP authorization spec (2025-11-25) asks of an MCP server: access tokens
//! from one authorization server, checked for this resource (RFC 8707), bearer
//! challenges (RFC 6750) that point at the resource's metadata (RFC 9728).

mod claims;
mod config;
mod fetch;
mod introspect;
mod jwt;
mod keys;
mod metadata;
mod verified;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum_core::body::Body;
use http::header::{CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderValue, Response, StatusCode};
use reqwest::Url;
use serde_json::{Value, json};

use self::config::{Config, DEFAULT_ALGORITHMS, IntrospectionConfig, asymmetric, jose_name};
use self::introspect::{IntrospectionCache, Refused};
use self::keys::{KeyCache, Lookup};
use self::verified::VerifiedCache;
use crate::authenticated::Authenticated;
use crate::error::{GuardError, shorten};
use crate::refusal::{Challenge, Invalid, Reason, Refusal, bearer_challenge};

pub use self::metadata::MetadataService;

/// The default leeway on `exp`, `nbf` and `iat`: clocks of two machines differ.
const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
/// The largest leeway accepted: more would keep expired tokens alive.
const MAX_LEEWAY: Duration = Duration::from_secs(300);

/// An OAuth 2.1 resource server: checks the access tokens one authorization server
/// issues for this resource. [`Guard::oauth`](crate::Guard::oauth) puts it in front
/// of a service.
///
/// A JWT access token (RFC 9068) passes when, in this order:
///
/// 1. it is at most 8 KiB (a larger one is refused before it is read);
/// 2. its header's `alg` is on the allow-list (by default every asymmetric
///    algorithm: RS256/384/512, PS256/384/512, ES256/384, EdDSA; `none` and
///    `HS*` never, whatever [`with_algorithms`](Self::with_algorithms) is given)
///    and it has no `crit`;
/// 3. its `kid` names one of the issuer's keys, of the algorithm's type (and
///    curve), whose own `alg`, if any, is the token's;
/// 4. the signature verifies;
/// 5. it has at most 100 claims, none twice; `iss` is the issuer, exactly; `aud`
///    (a string or an array) contains [`resource`](Self::resource); `exp` is
///    present and not past; `nbf` and `iat` are not in the future (each with the
///    leeway); `sub` is present.
///
/// The issuer's keys (its JWKS, at [`with_jwks_uri`](Self::with_jwks_uri) or
/// found in its RFC 8414 or OpenID Connect metadata) are fetched at the first token
/// (or by [`warm`](Self::warm)), then again when a token names a key not seen:
/// one fetch at a time (requests that need it wait for it), at most one per
/// [refresh interval](Self::with_refresh_interval), each within the
/// [fetch timeout](Self::with_fetch_timeout) and 256 KiB. When a fetch fails, the
/// keys fetched before keep serving, and tokens that need another key get `503`.
///
/// A token that is not a JWT is introspected (RFC 7662) when
/// [`with_introspection`](Self::with_introspection) is set, and refused otherwise.
///
/// HTTP goes through reqwest without TLS: an issuer on `https` needs the
/// application to enable one of reqwest's TLS features (`rustls`, say) in its own
/// `Cargo.toml` (cargo's feature unification hands it to this crate), or to pass
/// its own client to [`with_http_client`](Self::with_http_client).
///
/// ```
/// use std::time::Duration;
/// use toolgraft_guard::{Guard, ResourceServer};
///
/// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
///     .with_scopes_supported(["tools:read", "tools:call"])?
///     .with_kept_claims(["tenant", "roles"])
///     .with_leeway(Duration::from_secs(10))?;
/// assert_eq!(server.metadata_path(), "/.well-known/oauth-protected-resource/mcp");
/// assert_eq!(server.metadata()["authorization_servers"][0], "http://127.0.0.1:9000");
/// let guard = Guard::oauth(server);
/// # Ok::<(), toolgraft_guard::GuardError>(())
/// ```
#[derive(Clone)]
pub struct ResourceServer {
    config: Arc<Config>,
    keys: Arc<KeyCache>,
    introspected: Arc<IntrospectionCache>,
    verified: Arc<VerifiedCache>,
}

impl fmt::Debug for ResourceServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = &self.config;
        f.debug_struct("ResourceServer")
            .field("resource", &config.resource)
            .field("issuer", &config.issuer)
            .field("jwks_uri", &config.jwks_uri.as_ref().map(Url::as_str))
            .field("introspection", &config.introspection.is_some())
            .finish_non_exhaustive()
    }
}

/// `value` as an `http` or `https` URL without a fragment.
fn http_url(setting: &'static str, value: &str) -> Result<Url, GuardError> {
    let bad = || GuardError::BadSetting {
        setting,
        value: shorten(value),
        expected: "an absolute `http` or `https` URL without a fragment",
    };
    let url = Url::parse(value).map_err(|_| bad())?;
    if !matches!(url.scheme(), "http" | "https") || url.fragment().is_some() || !url.has_host() {
        return Err(bad());
    }
    Ok(url)
}

/// A scope token as RFC 6749 §3.3 has it: printable ASCII but space, `"` and `\`,
/// so it goes in a challenge's quoted string as it is.
fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

impl ResourceServer {
    /// A resource server for `resource`, this server's canonical URI (the audience
    /// its tokens must name, e.g. `https://tools.example.com/mcp`), accepting the
    /// tokens of `issuer` (the authorization server's issuer identifier). Both are
    /// compared with tokens as written here.
    ///
    /// ```
    /// use toolgraft_guard::{GuardError, ResourceServer};
    /// assert!(ResourceServer::new("https://tools.example.com/mcp", "https://auth.example.com").is_ok());
    /// assert!(matches!(ResourceServer::new("tools.example.com/mcp", "https://auth.example.com"),
    ///                  Err(GuardError::BadSetting { setting: "resource", .. })));
    /// assert!(ResourceServer::new("https://tools.example.com/mcp#x", "https://a.example").is_err());
    /// ```
    pub fn new(resource: impl Into<String>, issuer: impl Into<String>) -> Result<Self, GuardError> {
        let resource = resource.into();
        let issuer = issuer.into();
        let resource_url = http_url("resource", &resource)?;
        let issuer_url = http_url("issuer", &issuer)?;
        if issuer_url.query().is_some() {
            return Err(GuardError::BadSetting {
                setting: "issuer",
                value: shorten(&issuer),
                expected: "an issuer identifier without a query (RFC 8414 §2)",
            });
        }
        let http = reqwest::Client::builder()
            .build()
            .map_err(|error| GuardError::BadSetting {
                setting: "http client",
                value: shorten(&error.to_string()),
                expected: "a client reqwest can build",
            })?;
        let metadata_path = metadata::metadata_path(&resource_url);
        let metadata_url = format!(
            "{}{metadata_path}",
            resource_url.origin().ascii_serialization()
        );
        let challenge = Arc::new(Challenge {
            resource_metadata: metadata_url.clone().into(),
            scope: None,
        });
        Ok(Self {
            config: Arc::new(Config {
                resource,
                issuer,
                issuer_url,
                jwks_uri: None,
                scopes_supported: Vec::new(),
                kept_claims: Vec::new(),
                leeway: DEFAULT_LEEWAY,
                algorithms: DEFAULT_ALGORITHMS.to_vec(),
                resource_name: None,
                http,
                fetch_timeout: Duration::from_secs(5),
                refresh_interval: Duration::from_secs(30),
                introspection: None,
                introspection_ttl: Duration::from_secs(60),
                metadata_path,
                metadata_url,
                challenge,
            }),
            keys: Arc::default(),
            introspected: Arc::default(),
            verified: Arc::default(),
        })
    }

    /// Changes a setting; the caches start over, as they may hold what the old
    /// settings fetched.
    fn edit(mut self, edit: impl FnOnce(&mut Config)) -> Self {
        edit(Arc::make_mut(&mut self.config));
        self.keys = Arc::default();
        self.introspected = Arc::default();
        self.verified = Arc::default();
        self
    }

    /// Where the issuer's keys (its JWKS) are, instead of finding them in its
    /// metadata (`/.well-known/oauth-authorization-server`, then
    /// `/.well-known/openid-configuration`).
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
    ///     .with_jwks_uri("http://127.0.0.1:9000/jwks.json")?;
    /// assert!(ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
    ///     .with_jwks_uri("file:///etc/jwks.json").is_err());
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn with_jwks_uri(self, uri: impl AsRef<str>) -> Result<Self, GuardError> {
        let uri = http_url("jwks_uri", uri.as_ref())?;
        Ok(self.edit(|config| config.jwks_uri = Some(uri)))
    }

    /// The scopes this resource understands: published in its metadata and named
    /// in the challenge to a request without a token, so a client asks for them.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
    ///     .with_scopes_supported(["tools:read", "tools:call"])?;
    /// assert_eq!(server.scopes_supported(), ["tools:read", "tools:call"]);
    /// assert!(server.with_scopes_supported(["has space"]).is_err());
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn with_scopes_supported(
        self,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, GuardError> {
        let scopes: Vec<String> = scopes.into_iter().map(Into::into).collect();
        if let Some(bad) = scopes.iter().find(|scope| !is_scope_token(scope)) {
            return Err(GuardError::BadSetting {
                setting: "scope",
                value: shorten(bad),
                expected: "a scope token: printable ASCII without space, `\"` or `\\`",
            });
        }
        let joined = (!scopes.is_empty()).then(|| scopes.join(" ").into_boxed_str());
        Ok(self.edit(|config| {
            config.scopes_supported = scopes;
            config.challenge = Arc::new(Challenge {
                resource_metadata: config.metadata_url.clone().into(),
                scope: joined,
            });
        }))
    }

    /// The claims, beyond the registered ones, that
    /// [`Authenticated::claims`](crate::Authenticated::claims) keeps (`tenant`,
    /// `roles`); every other claim is skipped as the token is read.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
    ///     .with_kept_claims(["tenant"]);
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn with_kept_claims(self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let names = names.into_iter().map(Into::into).collect();
        self.edit(|config| config.kept_claims = names)
    }

    /// How far `exp`, `nbf` and `iat` may be off (30 s unless set; 5 minutes at
    /// most).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// assert_eq!(server.leeway(), Duration::from_secs(30));
    /// assert!(server.clone().with_leeway(Duration::from_secs(5)).is_ok());
    /// assert!(server.with_leeway(Duration::from_secs(3600)).is_err());
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn with_leeway(self, leeway: Duration) -> Result<Self, GuardError> {
        if leeway > MAX_LEEWAY {
            return Err(GuardError::BadSetting {
                setting: "leeway",
                value: format!("{leeway:?}"),
                expected: "at most 300 s",
            });
        }
        Ok(self.edit(|config| config.leeway = leeway))
    }

    /// The signature algorithms accepted, by their JOSE names (`RS256`, `ES256`,
    /// `EdDSA`...). `none` and `HS256`/`HS384`/`HS512` are refused here: a resource
    /// server holds no shared secret, and one that accepted HMAC could be fooled
    /// by a MAC keyed with the issuer's public key.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// assert!(server.clone().with_algorithms(["ES256", "EdDSA"]).is_ok());
    /// assert!(server.clone().with_algorithms(["RS256", "HS256"]).is_err());
    /// assert!(server.clone().with_algorithms(["none"]).is_err());
    /// assert!(server.with_algorithms(Vec::<String>::new()).is_err());
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn with_algorithms(
        self,
        names: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<Self, GuardError> {
        let mut algorithms = Vec::new();
        for name in names {
            let name = name.as_ref();
            let algorithm = asymmetric(name).ok_or_else(|| GuardError::BadSetting {
                setting: "algorithm",
                value: shorten(name),
                expected: "one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA",
            })?;
            if !algorithms.contains(&algorithm) {
                algorithms.push(algorithm);
            }
        }
        if algorithms.is_empty() {
            return Err(GuardError::BadSetting {
                setting: "algorithms",
                value: String::new(),
                expected: "at least one algorithm",
            });
        }
        Ok(self.edit(|config| config.algorithms = algorithms))
    }

    /// A name for people, published as the metadata's `resource_name`.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
    ///     .with_resource_name("Acme tools");
    /// assert_eq!(server.metadata()["resource_name"], "Acme tools");
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn with_resource_name(self, name: impl Into<String>) -> Self {
        let name = name.into();
        self.edit(|config| config.resource_name = Some(name))
    }

    /// The client that fetches keys and metadata and introspects: the
    /// application's own (with its TLS, proxy, and root certificates).
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
    ///     .with_http_client(reqwest::Client::new());
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn with_http_client(self, client: reqwest::Client) -> Self {
        self.edit(|config| config.http = client)
    }

    /// How long one fetch (keys, metadata, introspection) may take, connection
    /// and body included (5 s unless set).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
    ///     .with_fetch_timeout(Duration::from_secs(2));
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn with_fetch_timeout(self, timeout: Duration) -> Self {
        self.edit(|config| config.fetch_timeout = timeout)
    }

    /// The least time between two fetches of the keys (30 s unless set): tokens
    /// naming unknown keys cost the issuer one fetch per interval at most.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
    ///     .with_refresh_interval(Duration::from_secs(60));
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn with_refresh_interval(self, interval: Duration) -> Self {
        self.edit(|config| config.refresh_interval = interval)
    }

    /// Introspects tokens that are not JWTs (RFC 7662) at `endpoint`,
    /// authenticating as this resource with HTTP basic authentication. The answer
    /// must be `"active": true`, name this resource in `aud`, the issuer in `iss`
    /// (when present), not be expired, and name a `sub` (or a `client_id`).
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
    ///     .with_introspection("http://127.0.0.1:9000/introspect", "mcp-server", "s3cret")?;
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn with_introspection(
        self,
        endpoint: impl AsRef<str>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Result<Self, GuardError> {
        let endpoint = http_url("introspection endpoint", endpoint.as_ref())?;
        let introspection = IntrospectionConfig {
            endpoint,
            client_id: client_id.into(),
            client_secret: client_secret.into(),
        };
        Ok(self.edit(|config| config.introspection = Some(introspection)))
    }

    /// How long an introspection answer that let a caller in is reused (60 s
    /// unless set, and never past the token's `exp`): a revoked token passes for
    /// that long at most. Zero caches nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
    ///     .with_introspection_ttl(Duration::from_secs(10));
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn with_introspection_ttl(self, ttl: Duration) -> Self {
        self.edit(|config| config.introspection_ttl = ttl)
    }

    /// The resource's canonical URI, as configured: the audience its tokens name.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// assert_eq!(server.resource(), "http://127.0.0.1:8000/mcp");
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn resource(&self) -> &str {
        &self.config.resource
    }

    /// The issuer accepted, as configured.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// assert_eq!(server.issuer(), "http://127.0.0.1:9000");
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    /// The scopes published.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// assert!(server.scopes_supported().is_empty());
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn scopes_supported(&self) -> &[String] {
        &self.config.scopes_supported
    }

    /// The leeway on `exp`, `nbf` and `iat`.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// assert_eq!(server.leeway().as_secs(), 30);
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn leeway(&self) -> Duration {
        self.config.leeway
    }

    /// The protected resource metadata (RFC 9728 §2): `resource`,
    /// `authorization_servers` (the issuer), `scopes_supported` (when set),
    /// `bearer_methods_supported` (`header`), `resource_name` (when set).
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?
    ///     .with_scopes_supported(["tools:call"])?;
    /// assert_eq!(server.metadata(), serde_json::json!({
    ///     "resource": "http://127.0.0.1:8000/mcp",
    ///     "authorization_servers": ["http://127.0.0.1:9000"],
    ///     "scopes_supported": ["tools:call"],
    ///     "bearer_methods_supported": ["header"],
    /// }));
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn metadata(&self) -> Value {
        let config = &self.config;
        let mut document = json!({
            "resource": config.resource,
            "authorization_servers": [config.issuer],
        });
        if let Value::Object(fields) = &mut document {
            if !config.scopes_supported.is_empty() {
                fields.insert("scopes_supported".into(), json!(config.scopes_supported));
            }
            fields.insert("bearer_methods_supported".into(), json!(["header"]));
            if let Some(name) = &config.resource_name {
                fields.insert("resource_name".into(), json!(name));
            }
        }
        document
    }

    /// The path the metadata is served at (RFC 9728 §3.1): the resource's path
    /// after `/.well-known/oauth-protected-resource`.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let at = |resource| ResourceServer::new(resource, "https://a.example").unwrap()
    ///     .metadata_path().to_owned();
    /// assert_eq!(at("https://tools.example.com/mcp"), "/.well-known/oauth-protected-resource/mcp");
    /// assert_eq!(at("https://tools.example.com/"), "/.well-known/oauth-protected-resource");
    /// ```
    pub fn metadata_path(&self) -> &str {
        &self.config.metadata_path
    }

    /// The metadata's full URL, named by every challenge's `resource_metadata`.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// assert_eq!(server.metadata_url(),
    ///            "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp");
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn metadata_url(&self) -> &str {
        &self.config.metadata_url
    }

    /// A tower service that serves [`metadata`](Self::metadata); see
    /// [`MetadataService`].
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// let service = server.metadata_service();
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn metadata_service(&self) -> MetadataService {
        MetadataService::new(&self.metadata())
    }

    /// The answer to `GET` [`metadata_path`](Self::metadata_path), for a server
    /// that routes by hand.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// let response = server.metadata_response();
    /// assert_eq!(response.status(), 200);
    /// assert_eq!(response.headers()["access-control-allow-origin"], "*");
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn metadata_response(&self) -> Response<Body> {
        self.metadata_service().respond(&http::Method::GET)
    }

    /// Fetches the issuer's keys now, rather than at the first token: at start-up,
    /// to fail early on a wrong issuer. Answers how many signing keys it found.
    ///
    /// ```no_run
    /// # use toolgraft_guard::ResourceServer;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), toolgraft_guard::GuardError> {
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// let keys = server.warm().await?;
    /// # Ok(()) }
    /// ```
    pub async fn warm(&self) -> Result<usize, GuardError> {
        self.keys
            .refresh(&self.config)
            .await
            .map_err(|error| GuardError::KeysUnavailable {
                detail: shorten(&error.to_string()),
            })
    }

    /// Checks one access token: who the caller is, or the refusal to send (`401`
    /// with an `invalid_token` challenge, or `503` when the issuer's keys or its
    /// introspection endpoint cannot be reached).
    ///
    /// ```
    /// # use toolgraft_guard::{Invalid, Reason, ResourceServer};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), toolgraft_guard::GuardError> {
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// let refusal = server.authenticate(&"x".repeat(1 << 20)).await.unwrap_err();
    /// assert_eq!(refusal.reason(), &Reason::InvalidToken(Invalid::TooLarge));
    /// assert_eq!(refusal.status(), 401);
    /// # Ok(()) }
    /// ```
    pub async fn authenticate(&self, token: &str) -> Result<Authenticated, Refusal> {
        self.verify(token)
            .await
            .map_err(|reason| self.refusal(reason))
    }

    async fn verify(&self, token: &str) -> Result<Authenticated, Reason> {
        let config = &*self.config;
        if token.len() > jwt::MAX_TOKEN_LEN {
            return Err(Reason::InvalidToken(Invalid::TooLarge));
        }
        if !jwt::is_jwt(token) {
            let Some(endpoint) = &config.introspection else {
                return Err(Reason::InvalidToken(Invalid::Unverifiable));
            };
            return self
                .introspected
                .introspect(token, endpoint, config)
                .await
                .map_err(|refused| match refused {
                    Refused::Invalid(invalid) => Reason::InvalidToken(invalid),
                    Refused::Unavailable => Reason::Unavailable,
                });
        }
        if let Some(verified) = self.verified.get(token, &self.keys) {
            return Ok(verified);
        }
        let raw = token;
        let token = jwt::parse(token, config).map_err(Reason::InvalidToken)?;
        let key = match self.keys.find(token.kid.as_deref(), config).await {
            Lookup::Found(key) => key,
            Lookup::Unknown => return Err(Reason::InvalidToken(Invalid::Unverifiable)),
            Lookup::Unavailable => return Err(Reason::Unavailable),
        };
        let verified = token
            .verify(&key, config, SystemTime::now())
            .map_err(Reason::InvalidToken)?;
        self.verified
            .put(raw, &verified, token.kid.as_deref(), key.clone());
        Ok(verified)
    }

    /// [`authenticate`](Self::authenticate) without waiting: with the keys already
    /// fetched only, and no introspection.
    pub(crate) fn authenticate_now(&self, token: &str) -> Result<Authenticated, Refusal> {
        let config = &*self.config;
        let verified = if token.len() > jwt::MAX_TOKEN_LEN {
            Err(Reason::InvalidToken(Invalid::TooLarge))
        } else if !jwt::is_jwt(token) {
            Err(match config.introspection {
                Some(_) => Reason::NotCheckedHere,
                None => Reason::InvalidToken(Invalid::Unverifiable),
            })
        } else if let Some(verified) = self.verified.get(token, &self.keys) {
            Ok(verified)
        } else {
            jwt::parse(token, config)
                .map_err(Reason::InvalidToken)
                .and_then(|token| {
                    let key = self
                        .keys
                        .cached(token.kid.as_deref())
                        .ok_or(Reason::NotCheckedHere)?;
                    token
                        .verify(&key, config, SystemTime::now())
                        .map_err(Reason::InvalidToken)
                })
        };
        verified.map_err(|reason| self.refusal(reason))
    }

    /// A refusal whose challenge names this resource's metadata.
    pub(crate) fn refusal(&self, reason: Reason) -> Refusal {
        Refusal::new(reason).with_challenge(Some(&self.config.challenge))
    }

    /// The `WWW-Authenticate` value of a `403` for a token that lacks `scopes`
    /// (RFC 6750 §3.1, MCP's step-up authorization): the client asks its
    /// authorization server for them and retries. Scopes that are not scope tokens
    /// are left out.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// assert_eq!(server.insufficient_scope_challenge(["tools:call", "admin"]),
    ///     r#"Bearer error="insufficient_scope", scope="tools:call admin", resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp""#);
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn insufficient_scope_challenge(
        &self,
        scopes: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> HeaderValue {
        let scopes: Vec<String> = scopes
            .into_iter()
            .filter(|scope| is_scope_token(scope.as_ref()))
            .map(|scope| scope.as_ref().to_owned())
            .collect();
        let scope = scopes.join(" ");
        let metadata = &*self.config.challenge.resource_metadata;
        bearer_challenge(&[
            ("error", "insufficient_scope"),
            ("scope", &scope),
            ("resource_metadata", metadata),
        ])
        .unwrap_or_else(|| HeaderValue::from_static(r#"Bearer error="insufficient_scope""#))
    }

    /// The whole `403` answer for a token that lacks `scopes`: the
    /// [challenge](Self::insufficient_scope_challenge) and a line of text.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// let response = server.insufficient_scope(["tools:call"]);
    /// assert_eq!(response.status(), 403);
    /// assert!(response.headers()["www-authenticate"].to_str().unwrap()
    ///     .starts_with(r#"Bearer error="insufficient_scope", scope="tools:call""#));
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn insufficient_scope(
        &self,
        scopes: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Response<Body> {
        let mut response = Response::new(Body::from(
            "Forbidden: the token lacks a scope this needs\n",
        ));
        *response.status_mut() = StatusCode::FORBIDDEN;
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(WWW_AUTHENTICATE, self.insufficient_scope_challenge(scopes));
        response
    }

    /// The names of the algorithms accepted.
    ///
    /// ```
    /// # use toolgraft_guard::ResourceServer;
    /// let server = ResourceServer::new("http://127.0.0.1:8000/mcp", "http://127.0.0.1:9000")?;
    /// assert!(server.algorithms().contains(&"RS256") && !server.algorithms().contains(&"HS256"));
    /// # Ok::<(), toolgraft_guard::GuardError>(())
    /// ```
    pub fn algorithms(&self) -> Vec<&'static str> {
        self.config
            .algorithms
            .iter()
            .map(|a| jose_name(*a))
            .collect()
    }
}
