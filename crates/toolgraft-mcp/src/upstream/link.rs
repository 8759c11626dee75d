//! The connection to an upstream: made, watched, and made again with backoff
//! when it is lost, for as long as the upstream is kept.

use std::time::Duration;

use rmcp::model::{PaginatedRequestParams, ProtocolVersion, SubscriptionFilter, Tool};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::{Peer, RoleClient};
use std::sync::Arc;

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::client::Listener;
use super::config::{Endpoint, UpstreamConfig, urls_redacted};
use super::error::{UpstreamError, with_causes};
use super::log_level::AskedLevel;
use super::stdio::ChildTransport;

/// A link as its calls see it: the live connection, and a way to have it
/// made again.
#[derive(Clone)]
pub(super) struct Current {
    live: watch::Receiver<Option<Live>>,
    renew: Arc<Notify>,
}

/// One connection of a link, while it lasts.
#[derive(Clone)]
pub(super) struct Live {
    pub(super) peer: Peer<RoleClient>,
    /// The log level its session was asked for.
    pub(super) log_level: Arc<AskedLevel>,
}

impl Live {
    fn new(peer: &Peer<RoleClient>) -> Self {
        Self {
            peer: peer.clone(),
            log_level: Arc::default(),
        }
    }
}

impl Current {
    /// The live connection's peer; `None` while it is down.
    pub(super) fn peer(&self) -> Option<Peer<RoleClient>> {
        self.live.borrow().as_ref().map(|live| live.peer.clone())
    }

    /// The live connection; `None` while it is down.
    pub(super) fn live(&self) -> Option<Live> {
        self.live.borrow().clone()
    }

    /// Has the connection made again, its credentials read or got again:
    /// the upstream refused them (a token rotated, or expired).
    pub(super) fn renew(&self) {
        self.renew.notify_one();
    }
}

/// The first wait before connecting again, doubled after each failure up to
/// [`RECONNECT_LAST`].
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
const RECONNECT_LAST: Duration = Duration::from_secs(5);

/// Which protocols a link offers the upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Protocol {
    /// The newest the upstream speaks: `server/discover` first (where an
    /// upstream asks its caller with input-required results, which pass
    /// through to whichever protocol the caller speaks), `initialize` for a
    /// server that does not know it.
    Newest,
    /// `initialize` only: for callers of an older protocol, whose upstream
    /// tools may ask them by requests within the call (MCP elicitation,
    /// sampling, roots), which protocol 2026-07-28 forbids.
    Initialize,
}

/// Connects, then keeps connecting again in the background whenever the
/// connection ends, until `stop`. Each new connection is announced as a
/// change of the tool list (what the upstream serves may have changed while
/// it was away).
pub(super) async fn open(
    config: &UpstreamConfig,
    listener: &Listener,
    protocol: Protocol,
    stop: CancellationToken,
) -> Result<Current, UpstreamError> {
    let service = connect(config, listener, protocol).await?;
    let (current, receiver) = watch::channel(Some(Live::new(service.peer())));
    let renew = Arc::new(Notify::new());
    let link = Link {
        config: config.clone(),
        listener: listener.clone(),
        protocol,
        current,
        renew: renew.clone(),
        stop,
    };
    tokio::spawn(link.supervise(service));
    Ok(Current {
        live: receiver,
        renew,
    })
}

/// Whether `peer` speaks protocol 2026-07-28 (or later), where a server may
/// not send requests within a call.
pub(super) fn is_newest(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|info| info.protocol_version >= ProtocolVersion::V_2026_07_28)
}

/// A link's supervisor.
struct Link {
    config: UpstreamConfig,
    listener: Listener,
    protocol: Protocol,
    current: watch::Sender<Option<Live>>,
    renew: Arc<Notify>,
    stop: CancellationToken,
}

impl Link {
    async fn supervise(self, mut service: RunningService<RoleClient, Listener>) {
        let Self {
            config,
            listener,
            protocol,
            current,
            renew,
            stop,
        } = self;
        loop {
            let token = service.cancellation_token();
            let ended = service.waiting();
            tokio::pin!(ended);
            tokio::select! {
                _ = &mut ended => {}
                () = renew.notified() => {
                    tracing::warn!(upstream = ?config.endpoint, "the upstream refused the credentials: connecting again with them read again");
                    token.cancel();
                    let _ = ended.await;
                }
                () = stop.cancelled() => {
                    // Ends the session; a child process goes with its transport.
                    token.cancel();
                    let _ = ended.await;
                    return;
                }
            }
            current.send_replace(None);
            tracing::warn!(upstream = ?config.endpoint, "the upstream connection ended; connecting again");
            let mut wait = RECONNECT_FIRST;
            service = loop {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = stop.cancelled() => return,
                }
                match connect(&config, &listener, protocol).await {
                    Ok(service) => break service,
                    Err(error) => {
                        tracing::warn!(%error, retry_in_ms = wait.as_millis() as u64, "the upstream is still away");
                        wait = (wait * 2).min(RECONNECT_LAST);
                    }
                }
            };
            current.send_replace(Some(Live::new(service.peer())));
            tracing::info!(upstream = ?config.endpoint, "the upstream is connected again");
            listener.tools_changed();
        }
    }
}

/// One connection, handshake done, within the connect timeout. A server that
/// refuses protocol 2026-07-28 naming only older ones it speaks (an SDK's
/// server of the newest era configured for an older protocol) is met again
/// with `initialize`: rmcp's discovery does not fall back on that refusal.
async fn connect(
    config: &UpstreamConfig,
    listener: &Listener,
    protocol: Protocol,
) -> Result<RunningService<RoleClient, Listener>, UpstreamError> {
    match attempt(config, listener, protocol).await {
        Err(UpstreamError::Connect { problem, .. })
            if protocol == Protocol::Newest
                && problem.starts_with("no compatible protocol version") =>
        {
            attempt(config, listener, Protocol::Initialize).await
        }
        connected => connected,
    }
}

async fn attempt(
    config: &UpstreamConfig,
    listener: &Listener,
    protocol: Protocol,
) -> Result<RunningService<RoleClient, Listener>, UpstreamError> {
    let endpoint = format!("{:?}", config.endpoint);
    let failed = |problem: String| UpstreamError::Connect {
        endpoint: endpoint.clone(),
        problem: urls_redacted(&problem),
    };
    let connecting = async {
        match &config.endpoint {
            Endpoint::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut child = tokio::process::Command::new(command);
                child.args(args).envs(env);
                if let Some(cwd) = cwd {
                    child.current_dir(cwd);
                }
                let bound = transport_bound(config.max_result_bytes);
                let (transport, stderr) =
                    ChildTransport::spawn(child, bound, config.max_result_bytes)
                        .map_err(|error| failed(format!("cannot start `{command}`: {error}")))?;
                tokio::spawn(log_stderr(stderr, command.clone()));
                listener
                    .clone()
                    .serve_with_lifecycle(transport, lifecycle(protocol))
                    .await
                    .map_err(|error| failed(with_causes(&error)))
            }
            Endpoint::Http { .. } => http(config, listener, protocol).await.map_err(failed),
        }
    };
    // The handshake and the subscription to the tool list, within the one
    // bound: an upstream that never acknowledges the subscription is one that
    // cannot be reached.
    let connected = async {
        let service = connecting.await?;
        follow_list_changes(service.peer(), listener).await;
        Ok(service)
    };
    tokio::time::timeout(config.connect_timeout(), connected)
        .await
        .map_err(|_| {
            failed(format!(
                "no handshake within {} ms (`connect_timeout_ms`)",
                config.connect_timeout_ms
            ))
        })?
}

fn lifecycle(protocol: Protocol) -> ClientLifecycleMode {
    match protocol {
        Protocol::Newest => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::LATEST],
            legacy_version: None,
        },
        Protocol::Initialize => ClientLifecycleMode::Initialize,
    }
}

/// On a `2026-07-28` connection, an upstream announces a changed tool list
/// only on a subscription that asked for it (`subscriptions/listen`); on an
/// older one, `notifications/tools/list_changed` comes to the listener by
/// itself.
async fn follow_list_changes(peer: &Peer<RoleClient>, listener: &Listener) {
    if !is_newest(peer) {
        return;
    }
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = match peer.listen(filter).await {
        Ok(subscription) => subscription,
        Err(error) => {
            let error = urls_redacted(&error.to_string());
            tracing::warn!(%error, "the upstream takes no subscription to its tool list: its changes are seen at reconnects only");
            return;
        }
    };
    let listener = listener.clone();
    tokio::spawn(async move {
        // Ends with the connection (the subscription ends with it).
        while let Ok(Some(_)) = subscription.next().await {
            listener.tools_changed();
        }
    });
}

#[cfg(feature = "upstream-http")]
async fn http(
    config: &UpstreamConfig,
    listener: &Listener,
    protocol: Protocol,
) -> Result<RunningService<RoleClient, Listener>, String> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let Endpoint::Http {
        url,
        bearer_token_env,
        bearer_token,
        oauth,
        ca_file,
    } = &config.endpoint
    else {
        unreachable!("called for HTTP endpoints")
    };
    let mut transport = StreamableHttpClientTransportConfig::with_uri(url.as_str())
        // A bound on what is read at all, past which a reply is cut off as
        // the transport's error; below it, `max_result_bytes` fails a call
        // with its own error (the JSON-RPC frame and escaping add to a
        // result's size, hence the room).
        .max_json_response_size(transport_bound(config.max_result_bytes))
        .max_sse_event_size(transport_bound(config.max_result_bytes));
    if let Some(credentials) = oauth {
        let client =
            super::http_client::http_client(config.connect_timeout(), ca_file.as_deref()).await?;
        return oauth::serve(
            url,
            credentials,
            client,
            transport,
            listener,
            lifecycle(protocol),
        )
        .await;
    }
    let token = match (bearer_token, bearer_token_env) {
        (Some(token), _) => Some(token.0.clone()),
        (None, Some(var)) => Some(std::env::var(var).map_err(|_| {
            format!("the bearer token's variable `{var}` is not set (`bearer_token_env`)")
        })?),
        (None, None) => None,
    };
    if let Some(token) = token {
        transport = transport.auth_header(token);
    }
    let client =
        super::http_client::http_client(config.connect_timeout(), ca_file.as_deref()).await?;
    let transport = StreamableHttpClientTransport::with_client(
        super::stream_origin::Marking(client),
        transport,
    );
    listener
        .clone()
        .serve_with_lifecycle(transport, lifecycle(protocol))
        .await
        .map_err(|error| with_causes(&error))
}

/// What a transport reads of one message at most, for results of at most
/// `max_result_bytes` (as serde_json writes them, which `forward` measures):
/// a result within it is read however the upstream escapes it (escaping at
/// most triples one: a two-byte character written `\u00e9`), with 1 MiB for
/// the JSON-RPC frame around it.
fn transport_bound(max_result_bytes: usize) -> usize {
    max_result_bytes.saturating_mul(3).saturating_add(1 << 20)
}

#[cfg(not(feature = "upstream-http"))]
async fn http(
    config: &UpstreamConfig,
    _listener: &Listener,
    _protocol: Protocol,
) -> Result<RunningService<RoleClient, Listener>, String> {
    Err(UpstreamError::Unsupported {
        endpoint: format!("{:?}", config.endpoint),
        feature: "upstream-http",
    }
    .to_string())
}

/// The child's stderr, line by line, as this process's log (debug): an
/// upstream's diagnostics stay readable without mixing into MCP's stdout.
/// Read as bytes until the pipe closes: a line that is not UTF-8 is logged
/// lossily (ending the read there would close the pipe, and the child's next
/// write would fail or kill it), and a runaway line is cut at
/// [`MAX_STDERR_LINE`] bytes without being held whole.
async fn log_stderr(mut stderr: tokio::process::ChildStderr, command: String) {
    use tokio::io::AsyncReadExt;
    let emit = |line: &[u8]| {
        let line = String::from_utf8_lossy(line);
        tracing::debug!(upstream = %command, "{}", line.trim_end_matches('\r'));
    };
    let mut chunk = vec![0_u8; 8192];
    let mut line = Vec::with_capacity(MAX_STDERR_LINE);
    while let Ok(read @ 1..) = stderr.read(&mut chunk).await {
        for &byte in &chunk[..read] {
            if byte == b'\n' {
                emit(&line);
                line.clear();
            } else if line.len() < MAX_STDERR_LINE {
                line.push(byte);
            }
        }
    }
    if !line.is_empty() {
        emit(&line);
    }
}

/// The most of one stderr line that is logged.
const MAX_STDERR_LINE: usize = 2048;

/// Every tool the upstream lists, page by page, stopping after `max_tools + 1`
/// (the one more says there are more) or as many pages: a server that pages
/// forever is cut off, not followed.
pub(super) async fn list(
    peer: &Peer<RoleClient>,
    max_tools: usize,
) -> Result<Vec<Tool>, rmcp::service::ServiceError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..=max_tools {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await?;
        tools.extend(page.tools);
        if tools.len() > max_tools {
            break;
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    Ok(tools)
}

/// OAuth 2.1's client credentials grant (feature `upstream-oauth`): a token
/// for the endpoint as the resource, from the authorization server its
/// protected resource metadata names, got at each connection.
#[cfg(feature = "upstream-http")]
mod oauth {
    use rmcp::RoleClient;
    #[cfg(feature = "upstream-oauth")]
    use rmcp::service::ClientServiceExt;
    use rmcp::service::{ClientLifecycleMode, RunningService};
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    use super::super::client::Listener;
    use super::super::config::ClientCredentials;

    #[cfg(feature = "upstream-oauth")]
    pub(super) async fn serve(
        url: &str,
        credentials: &ClientCredentials,
        client: reqwest::Client,
        transport: StreamableHttpClientTransportConfig,
        listener: &Listener,
        lifecycle: ClientLifecycleMode,
    ) -> Result<RunningService<RoleClient, Listener>, String> {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::auth::{AuthClient, ClientCredentialsConfig, OAuthState};

        use super::super::stream_origin::Marking;
        let oauth =
            |error: rmcp::transport::AuthError| format!("OAuth client credentials: {error}");
        let secret = credentials.secret()?;
        let mut state = OAuthState::new(url, None).await.map_err(oauth)?;
        let grant = ClientCredentialsConfig::ClientSecret {
            client_id: credentials.client_id.clone(),
            client_secret: secret,
            scopes: credentials.scopes.clone(),
            resource: Some(url.to_owned()),
        };
        state
            .authenticate_client_credentials(grant)
            .await
            .map_err(oauth)?;
        let manager = state
            .into_authorization_manager()
            .ok_or("OAuth client credentials: no token was granted")?;
        let client = Marking(AuthClient::new(client, manager));
        let transport = StreamableHttpClientTransport::with_client(client, transport);
        listener
            .clone()
            .serve_with_lifecycle(transport, lifecycle)
            .await
            .map_err(|error| super::super::error::with_causes(&error))
    }

    #[cfg(not(feature = "upstream-oauth"))]
    pub(super) async fn serve(
        _url: &str,
        _credentials: &ClientCredentials,
        _client: reqwest::Client,
        _transport: StreamableHttpClientTransportConfig,
        _listener: &Listener,
        _lifecycle: ClientLifecycleMode,
    ) -> Result<RunningService<RoleClient, Listener>, String> {
        Err("OAuth client credentials need toolgraft-mcp's feature `upstream-oauth`".to_owned())
    }
}
