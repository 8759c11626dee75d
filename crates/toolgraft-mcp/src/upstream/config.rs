//! What an operator writes of an upstream server: where it is, the namespace
//! its tools take here, and the limits that contain it.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::UpstreamError;

/// An upstream MCP server, as an operator configures it (JSON or TOML, or built
/// in code).
///
/// ```
/// use toolgraft_mcp::upstream::{Endpoint, UpstreamConfig};
/// let config: UpstreamConfig = serde_json::from_value(serde_json::json!({
///     "namespace": "fs",
///     "endpoint": {"stdio": {"command": "node", "args": ["dist/index.js", "/srv/files"]}},
///     "call_timeout_ms": 10000
/// }))?;
/// assert_eq!(config.namespace, "fs");
/// assert!(matches!(config.endpoint, Endpoint::Stdio { .. }));
/// assert_eq!(config.max_tools, 1000);
/// config.check()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct UpstreamConfig {
    /// The prefix of each of its tools' names here: `fs` binds the upstream's
    /// `write_file` as `fs_write_file`; empty binds each under its own name
    /// (a gateway in front of one server). Two upstreams, or an upstream and
    /// the server's own tools, meet only through names: a collision is
    /// refused when the tool binds, as any two tools of one name are.
    pub namespace: String,
    /// Where the server is.
    pub endpoint: Endpoint,
    /// How long connecting (start, `initialize`, the first `tools/list`) may
    /// take. Default 10 s.
    #[serde(default = "defaults::connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// How long one forwarded call may take before it is cancelled upstream
    /// and fails (transient). Default 60 s.
    #[serde(default = "defaults::call_timeout_ms")]
    pub call_timeout_ms: u64,
    /// At most this many tools are taken from it (in the order it lists
    /// them); the rest are refused, each reported. Default 1,000.
    #[serde(default = "defaults::max_tools")]
    pub max_tools: usize,
    /// A tool whose input and output schemas together are larger than this
    /// (as JSON) is refused. Default 256 KiB.
    #[serde(default = "defaults::max_schema_bytes")]
    pub max_schema_bytes: usize,
    /// A call's result larger than this (as JSON) fails the call. Default 4
    /// MiB, at most 1 GiB. A message is read only up to three times this and
    /// 1 MiB (room for escaping and the JSON-RPC frame); over stdio, a larger
    /// answer is read through without being held, and fails its request at
    /// once.
    #[serde(default = "defaults::max_result_bytes")]
    pub max_result_bytes: usize,
}

/// Where an upstream server is.
#[derive(Clone, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Endpoint {
    /// A child process this library starts (and stops, when the upstream is
    /// dropped), speaking MCP on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Variables set for it, beside this process's.
        #[serde(default)]
        env: BTreeMap<String, String>,
        /// Its working directory (this process's when not said).
        #[serde(default)]
        cwd: Option<String>,
    },
    /// A Streamable HTTP endpoint (feature `upstream-http`).
    Http {
        /// The endpoint's URL (`http://127.0.0.1:8000/mcp`).
        url: String,
        /// The environment variable whose value is the bearer token sent
        /// with every request; none sends none. Read when connecting, so a
        /// rotated token takes effect at the next reconnect.
        #[serde(default)]
        bearer_token_env: Option<String>,
        /// A bearer token given in code ([`Endpoint::with_bearer`]); never
        /// read from or written to a file.
        #[serde(skip)]
        bearer_token: Option<Secret>,
        /// OAuth 2.1 client credentials (feature `upstream-oauth`), in place
        /// of a bearer token: a token is got for this endpoint at each
        /// connection, and the connection made again when the upstream
        /// refuses it (expired).
        #[serde(default)]
        oauth: Option<ClientCredentials>,
        /// A PEM file of certificates trusted beside the system's roots, for
        /// an `https://` endpoint whose certificate a private CA signed
        /// ([`Endpoint::with_ca_file`]; feature `upstream-tls`).
        #[serde(default)]
        ca_file: Option<String>,
    },
}

/// A client of an authorization server, for OAuth 2.1's client credentials
/// grant: the token it gets is for the upstream's endpoint (the `resource`),
/// from the authorization server the endpoint's protected resource metadata
/// names.
///
/// ```
/// let credentials: toolgraft_mcp::upstream::ClientCredentials = serde_json::from_value(serde_json::json!({
///     "client_id": "gateway", "client_secret_env": "GATEWAY_SECRET", "scopes": ["tools:read"]
/// }))?;
/// assert_eq!(format!("{credentials:?}"), r#"ClientCredentials { client_id: "gateway", secret: "$GATEWAY_SECRET", scopes: ["tools:read"] }"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ClientCredentials {
    /// The client's id at the authorization server.
    pub client_id: String,
    /// The environment variable whose value is the client's secret, read at
    /// each connection.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// The secret given in code ([`ClientCredentials::new`]); never read from
    /// or written to a file.
    #[serde(skip)]
    pub client_secret: Option<Secret>,
    /// The scopes asked for.
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl ClientCredentials {
    /// A client `client_id` with `secret`, asking for `scopes`.
    ///
    /// ```
    /// let credentials = toolgraft_mcp::upstream::ClientCredentials::new("gateway", "s3cret", ["tools:read"]);
    /// assert!(!format!("{credentials:?}").contains("s3cret"));
    /// ```
    pub fn new(
        client_id: impl Into<String>,
        secret: impl Into<String>,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            client_id: client_id.into(),
            client_secret_env: None,
            client_secret: Some(Secret(secret.into())),
            scopes: scopes.into_iter().map(Into::into).collect(),
        }
    }

    /// The secret, given in code or read from its variable now.
    #[cfg_attr(not(feature = "upstream-oauth"), allow(dead_code))]
    pub(super) fn secret(&self) -> Result<String, String> {
        match (&self.client_secret, &self.client_secret_env) {
            (Some(secret), _) => Ok(secret.0.clone()),
            (None, Some(var)) => std::env::var(var).map_err(|_| {
                format!("the client secret's variable `{var}` is not set (`client_secret_env`)")
            }),
            (None, None) => {
                Err("the client credentials name no secret (`client_secret_env`)".into())
            }
        }
    }
}

impl fmt::Debug for ClientCredentials {
    /// The client and where its secret is, never the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secret = match (&self.client_secret, &self.client_secret_env) {
            (Some(_), _) => "(given)".to_owned(),
            (None, Some(var)) => format!("${var}"),
            (None, None) => "(none)".to_owned(),
        };
        f.debug_struct("ClientCredentials")
            .field("client_id", &self.client_id)
            .field("secret", &secret)
            .field("scopes", &self.scopes)
            .finish()
    }
}

impl Endpoint {
    /// A child process running `command` with `args`.
    ///
    /// ```
    /// let endpoint = toolgraft_mcp::upstream::Endpoint::stdio("node", ["server.js"]);
    /// assert_eq!(format!("{endpoint:?}"), r#"stdio `node` ["server.js"]"#);
    /// ```
    pub fn stdio(
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self::Stdio {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
        }
    }

    /// A Streamable HTTP endpoint at `url`.
    ///
    /// ```
    /// let endpoint = toolgraft_mcp::upstream::Endpoint::http("http://127.0.0.1:8000/mcp").with_bearer("s3cret");
    /// assert_eq!(format!("{endpoint:?}"), "http http://127.0.0.1:8000/mcp (bearer token)");
    /// ```
    pub fn http(url: impl Into<String>) -> Self {
        Self::Http {
            url: url.into(),
            bearer_token_env: None,
            bearer_token: None,
            oauth: None,
            ca_file: None,
        }
    }

    /// This HTTP endpoint's certificate checked against the certificates of
    /// the PEM file `path` too, beside the system's roots (a stdio endpoint
    /// is returned as it is).
    ///
    /// ```
    /// use toolgraft_mcp::upstream::Endpoint;
    /// let endpoint = Endpoint::http("https://tools.internal/mcp").with_ca_file("/etc/internal-ca.pem");
    /// assert_eq!(format!("{endpoint:?}"), "http https://tools.internal/mcp (trusting /etc/internal-ca.pem)");
    /// ```
    pub fn with_ca_file(mut self, path: impl Into<String>) -> Self {
        if let Self::Http { ca_file, .. } = &mut self {
            *ca_file = Some(path.into());
        }
        self
    }

    /// This HTTP endpoint reached with a token got by OAuth 2.1's client
    /// credentials grant (feature `upstream-oauth`), in place of a bearer
    /// token (a stdio endpoint is returned as it is).
    ///
    /// ```
    /// use toolgraft_mcp::upstream::{ClientCredentials, Endpoint};
    /// let endpoint = Endpoint::http("https://notes.example.com/mcp")
    ///     .with_client_credentials(ClientCredentials::new("gateway", "s3cret", ["tools:read"]));
    /// assert_eq!(format!("{endpoint:?}"), "http https://notes.example.com/mcp (OAuth client gateway)");
    /// ```
    pub fn with_client_credentials(mut self, credentials: ClientCredentials) -> Self {
        if let Self::Http { oauth, .. } = &mut self {
            *oauth = Some(credentials);
        }
        self
    }

    /// This HTTP endpoint with a bearer token sent on every request (a stdio
    /// endpoint is returned as it is).
    pub fn with_bearer(mut self, token: impl Into<String>) -> Self {
        if let Self::Http { bearer_token, .. } = &mut self {
            *bearer_token = Some(Secret(token.into()));
        }
        self
    }
}

impl fmt::Debug for Endpoint {
    /// The program or URL, never a token (nor a URL's user, password, query or
    /// fragment, where a credential may hide).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio { command, args, .. } => write!(f, "stdio `{command}` {args:?}"),
            Self::Http {
                url,
                bearer_token_env,
                bearer_token,
                oauth,
                ca_file,
            } => {
                write!(f, "http {}", redacted(url))?;
                match (oauth, bearer_token, bearer_token_env) {
                    (Some(oauth), ..) => write!(f, " (OAuth client {})", oauth.client_id)?,
                    (None, Some(_), _) => write!(f, " (bearer token)")?,
                    (None, None, Some(var)) => write!(f, " (bearer token from ${var})")?,
                    (None, None, None) => {}
                }
                match ca_file {
                    Some(ca_file) => write!(f, " (trusting {ca_file})"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// `url` without its user and password, query and fragment.
fn redacted(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::urls_redacted;

    #[test]
    fn every_url_in_a_message_loses_its_credentials() {
        let said = urls_redacted(
            "error sending request for url (https://user:pass@example.com:8443/mcp?key=s3cret#f): \
             redirected to `http://a:b@other/x?t=1`, see http://plain/y",
        );
        assert_eq!(
            said,
            "error sending request for url (https://example.com:8443/mcp): \
             redirected to `http://other/x`, see http://plain/y"
        );
        assert_eq!(urls_redacted("no url: a://"), "no url: a://");
        assert_eq!(urls_redacted("://x?y"), "://x");
    }

    /// A URL keeps `,`, `(`, `)` and `'` unescaped in its query and its
    /// password: none of them ends what is cut.
    #[test]
    fn a_url_loses_its_whole_query_and_password_whatever_they_hold() {
        for (text, said) in [
            (
                "error sending request for url (https://h/mcp?key=ab,secret1&x=(secret2)'secret3): cause",
                "error sending request for url (https://h/mcp): cause",
            ),
            (
                "see https://u:p,ss(word)@h/x, then",
                "see https://h/x, then",
            ),
            ("`http://h/x?k=v`", "`http://h/x`"),
            ("url (https://h/mcp)", "url (https://h/mcp)"),
        ] {
            assert_eq!(urls_redacted(text), said, "{text}");
        }
    }
}

/// `text` with every URL in it [`redacted`]: an error of the HTTP client names
/// the URL it failed on, whole, and the error reaches logs and callers.
pub(super) fn urls_redacted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let is_scheme = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.');
        let start = rest[..at]
            .char_indices()
            .rev()
            .take_while(|(_, c)| is_scheme(*c))
            .last()
            .map_or(at, |(index, _)| index);
        // To the next space: a query or a password keeps `,`, `(`, `)` and
        // `'` unescaped, so no mark ends it but what closes it at the end.
        let spaced = rest[at..]
            .find(char::is_whitespace)
            .map_or(rest.len(), |end| at + end);
        let closing = |c: char| {
            matches!(
                c,
                ')' | '(' | '"' | '\'' | '<' | '>' | '`' | ',' | '.' | ':' | ';' | ']'
            )
        };
        let end = start + rest[start..spaced].trim_end_matches(closing).len();
        out.push_str(&rest[..start]);
        out.push_str(&redacted(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A credential: kept, sent, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub(super) String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl UpstreamConfig {
    /// An upstream at `endpoint` whose tools take the prefix `namespace`,
    /// with the default limits.
    ///
    /// ```
    /// use toolgraft_mcp::upstream::{Endpoint, UpstreamConfig};
    /// let config = UpstreamConfig::new("fs", Endpoint::stdio("node", ["server.js"]));
    /// assert_eq!(config.call_timeout_ms, 60_000);
    /// ```
    pub fn new(namespace: impl Into<String>, endpoint: Endpoint) -> Self {
        Self {
            namespace: namespace.into(),
            endpoint,
            connect_timeout_ms: defaults::connect_timeout_ms(),
            call_timeout_ms: defaults::call_timeout_ms(),
            max_tools: defaults::max_tools(),
            max_schema_bytes: defaults::max_schema_bytes(),
            max_result_bytes: defaults::max_result_bytes(),
        }
    }

    /// This config with calls bounded by `timeout`.
    ///
    /// ```
    /// # use toolgraft_mcp::upstream::{Endpoint, UpstreamConfig};
    /// # use std::time::Duration;
    /// let config = UpstreamConfig::new("fs", Endpoint::stdio("node", ["s.js"])).with_call_timeout(Duration::from_secs(5));
    /// assert_eq!(config.call_timeout_ms, 5000);
    /// ```
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Checks every field: the namespace is a name toolgraft takes (and
    /// leaves room for the tools' own), each duration and limit within its
    /// bounds.
    ///
    /// ```
    /// # use toolgraft_mcp::upstream::{Endpoint, UpstreamConfig};
    /// let mut config = UpstreamConfig::new("my fs", Endpoint::stdio("node", ["s.js"]));
    /// assert!(config.check().unwrap_err().to_string().contains("`namespace`"));
    /// config.namespace = "fs".into();
    /// config.call_timeout_ms = 0;
    /// assert!(config.check().unwrap_err().to_string().contains("`call_timeout_ms`"));
    /// ```
    ///
    /// # Errors
    ///
    /// [`UpstreamError::Config`] naming the field.
    pub fn check(&self) -> Result<(), UpstreamError> {
        let wrong = |field: &'static str, problem: String| UpstreamError::Config { field, problem };
        if let Some(Err(invalid)) =
            (!self.namespace.is_empty()).then(|| toolgraft::Name::new(&self.namespace))
        {
            return Err(wrong("namespace", invalid.to_string()));
        }
        if self.namespace.len() > MAX_NAMESPACE_LEN {
            return Err(wrong(
                "namespace",
                format!(
                    "{} bytes; at most {MAX_NAMESPACE_LEN}, to leave the tools' own names room",
                    self.namespace.len()
                ),
            ));
        }
        let within = |field: &'static str, value: u64, low: u64, high: u64| {
            if (low..=high).contains(&value) {
                Ok(())
            } else {
                Err(wrong(field, format!("{value}; between {low} and {high}")))
            }
        };
        within("connect_timeout_ms", self.connect_timeout_ms, 100, 600_000)?;
        within("call_timeout_ms", self.call_timeout_ms, 1, 86_400_000)?;
        within("max_tools", self.max_tools as u64, 1, 100_000)?;
        within(
            "max_schema_bytes",
            self.max_schema_bytes as u64,
            64,
            64 << 20,
        )?;
        within(
            "max_result_bytes",
            self.max_result_bytes as u64,
            1024,
            1 << 30,
        )?;
        match &self.endpoint {
            Endpoint::Stdio { command, .. } if command.is_empty() => Err(wrong(
                "endpoint",
                "a stdio endpoint needs a `command`".into(),
            )),
            Endpoint::Http { url, .. }
                if !(url.starts_with("http://") || url.starts_with("https://")) =>
            {
                Err(wrong(
                    "endpoint",
                    format!("`{url}` is not an http:// or https:// URL"),
                ))
            }
            _ => Ok(()),
        }
    }

    /// The name here of the upstream's tool `name`.
    pub(super) fn name_here(&self, name: &str) -> String {
        match self.namespace.as_str() {
            "" => name.to_owned(),
            namespace => format!("{namespace}_{name}"),
        }
    }

    pub(super) fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    pub(super) fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }
}

/// The largest `max_result_bytes` over stdio: 1 GiB, as over HTTP. (It was
/// lower while the stdio transport was rmcp's, which drops a longer message
/// unseen; this crate's reads an answer over its bound through without
/// holding it, and fails the request at once.)
///
/// ```
/// use toolgraft_mcp::upstream::{Endpoint, MAX_STDIO_RESULT_BYTES, UpstreamConfig};
/// let mut config = UpstreamConfig::new("fs", Endpoint::stdio("node", ["s.js"]));
/// config.max_result_bytes = MAX_STDIO_RESULT_BYTES;
/// assert!(config.check().is_ok());
/// config.max_result_bytes += 1;
/// assert!(config.check().unwrap_err().to_string().contains("`max_result_bytes`"));
/// ```
pub const MAX_STDIO_RESULT_BYTES: usize = 1 << 30;

/// A namespace's longest: the tools' own names need the rest of
/// [`MAX_NAME_LEN`](toolgraft::limits::MAX_NAME_LEN).
pub const MAX_NAMESPACE_LEN: usize = 32;

mod defaults {
    pub(super) fn connect_timeout_ms() -> u64 {
        10_000
    }
    pub(super) fn call_timeout_ms() -> u64 {
        60_000
    }
    pub(super) fn max_tools() -> usize {
        1000
    }
    pub(super) fn max_schema_bytes() -> usize {
        256 << 10
    }
    pub(super) fn max_result_bytes() -> usize {
        4 << 20
    }
}
