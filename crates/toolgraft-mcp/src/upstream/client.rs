//! This process as the upstream server's client: what the upstream sends on
//! its own (progress, a changed tool list, requests to the client) routed to
//! the calls it belongs to.

// Sampling and roots are deprecated by SEP-2577, and upstreams written
// before it still ask for them: relaying them is what keeps those working.
#![expect(deprecated)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::RequestId;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorData, ListRootsResult, LoggingMessageNotificationParam,
    NotificationMetaObject, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{InboundStreamOrigin, NotificationContext, RequestContext};
use rmcp::{ClientHandler, Peer, RoleClient, RoleServer};
use tokio::sync::{mpsc, watch};
use toolgraft::context::{LogSink, Progress};

/// The calls in flight upstream, by what the upstream's messages name them
/// with, and the signal that its tool list changed.
#[derive(Clone, Default)]
pub(super) struct Listener {
    inner: Arc<Shared>,
    /// Which of the upstream's links this listens on: each link's client
    /// numbers its progress tokens and requests from the same start.
    link: u64,
    /// Whether every call on the link is one downstream session's: then what
    /// the upstream sends on it without naming a call is that session's.
    one_session: bool,
    /// Whether its links' log messages are marked with the request on whose
    /// stream they came (over HTTP, by `stream_origin`): a message marked with
    /// a request is that request's call's, and no other's.
    marked: bool,
}

/// The `_meta` key of an upstream's log message that names the request on
/// whose stream it came (see `stream_origin`).
pub(super) const ORIGIN: &str = "io.toolgraft/stream";

/// The request a log message's mark names: `None` when unmarked or when it
/// came on no request's stream.
pub(super) fn origin_of(meta: &NotificationMetaObject) -> Option<RequestId> {
    match meta.0.0.get(ORIGIN)? {
        serde_json::Value::Number(number) => number.as_i64().map(RequestId::Number),
        serde_json::Value::String(text) => Some(RequestId::String(text.as_str().into())),
        _ => None,
    }
}

#[derive(Default)]
struct Shared {
    /// Each call's progress token (with its link) with where its reports go.
    progress: Mutex<HashMap<(u64, ProgressToken), mpsc::Sender<Progress>>>,
    /// Every call in flight upstream (and each that ended within
    /// [`ENDED_GRACE`]), by call, with its downstream client if it has one (a
    /// call from code has none, and still counts: what the upstream sends
    /// within it is not another caller's to see).
    askers: Mutex<Askers>,
    /// The call each request this process sent upstream is, by link and the
    /// request's id there: over Streamable HTTP a request of the upstream's
    /// names the request whose stream it came on.
    by_request: Mutex<HashMap<(u64, RequestId), u64>>,
    /// Bumped on each `notifications/tools/list_changed`.
    changed: ChangedSignal,
}

struct ChangedSignal(watch::Sender<u64>);

impl Default for ChangedSignal {
    fn default() -> Self {
        Self(watch::Sender::new(0))
    }
}

/// The calls in flight, and those that ended within [`ENDED_GRACE`].
#[derive(Default)]
struct Askers {
    calls: HashMap<u64, InFlight>,
    /// The calls that ended, oldest first: each is forgotten once past the
    /// grace, so that a call costs the same however many came before it
    /// within the grace (thousands a second through a busy link).
    ended: VecDeque<(Instant, u64)>,
}

impl Askers {
    fn forget_ended(&mut self, now: Instant) {
        while let Some(&(at, call)) = self.ended.front() {
            if now.duration_since(at) < ENDED_GRACE {
                break;
            }
            self.ended.pop_front();
            self.calls.remove(&call);
        }
    }
}

/// A call upstream, and its caller.
struct InFlight {
    /// The link it went by.
    link: u64,
    caller: Option<Peer<RoleServer>>,
    /// Where the call's log messages go, at the level its caller chose; `None`
    /// when the caller takes none.
    log: Option<LogSink>,
    /// When it ended; `None` while in flight.
    ended: Option<Instant>,
}

/// How long a call that ended still counts as in flight for what the
/// upstream sends without naming a call (a log message): rmcp hands each
/// notification to a task of its own, so one sent within a call may be handled
/// after the call's answer, and must not then be taken for another call's.
const ENDED_GRACE: Duration = Duration::from_millis(50);

/// How many progress reports of one call may wait for the call to pass them
/// on; beyond it the newest are dropped (a later one says more anyway).
const PROGRESS_BACKLOG: usize = 64;

impl Listener {
    /// The listener of an upstream's links, whose log messages are `marked`
    /// with the request they came within.
    pub(super) fn new(marked: bool) -> Self {
        Self {
            marked,
            ..Self::default()
        }
    }

    /// The listener of a link of one downstream session's (tag `link`): the
    /// same calls, told apart from the other links'.
    pub(super) fn for_session(&self, link: u64) -> Self {
        Self {
            inner: self.inner.clone(),
            link,
            one_session: true,
            marked: self.marked,
        }
    }

    /// Routes the progress the upstream reports under `token` to the returned
    /// receiver, until the guard is dropped.
    pub(super) fn follow(&self, token: ProgressToken) -> (mpsc::Receiver<Progress>, Following) {
        let (send, receive) = mpsc::channel(PROGRESS_BACKLOG);
        lock(&self.inner.progress).insert((self.link, token.clone()), send);
        let following = Following {
            listener: self.clone(),
            token,
        };
        (receive, following)
    }

    /// Counts `call` in flight on this link while the guard lives, with its
    /// caller, the client the upstream's requests within it go to (see
    /// [`Listener::asker`]), and where its log messages go. Counted before it
    /// is sent: what the upstream sends within it may be handled before the
    /// send returns (see [`Asking::sent_as`]).
    pub(super) fn asking(
        &self,
        call: u64,
        caller: Option<Peer<RoleServer>>,
        log: Option<LogSink>,
    ) -> Asking {
        let mut askers = lock(&self.inner.askers);
        askers.forget_ended(Instant::now());
        askers.calls.insert(
            call,
            InFlight {
                link: self.link,
                caller,
                log,
                ended: None,
            },
        );
        drop(askers);
        Asking {
            listener: self.clone(),
            call,
            request: None,
        }
    }

    /// Changes of the upstream's tool list, counted.
    pub(super) fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changed.0.subscribe()
    }

    /// Says the tool list changed (a notification, or a reconnect).
    pub(super) fn tools_changed(&self) {
        self.inner.changed.0.send_modify(|count| *count += 1);
    }

    /// The downstream client an upstream request or log message goes to:
    /// the caller of the call it names (`origin`: over Streamable HTTP, the
    /// request whose stream it came on), else the one caller of the calls in
    /// flight or ended within [`ENDED_GRACE`]. MCP's messages to a client over
    /// stdio name no call, so with several calls in flight there is no telling
    /// whose it is, and it is refused rather than sent to a client it may not
    /// be about.
    fn asker(
        &self,
        origin: Option<&InboundStreamOrigin>,
    ) -> Result<(Peer<RoleServer>, Option<LogSink>), ErrorData> {
        let mut askers = lock(&self.inner.askers);
        askers.forget_ended(Instant::now());
        let askers = &askers.calls;
        if let Some(InboundStreamOrigin::OutboundRequest(request)) = origin {
            return match self.call_of(request).and_then(|call| askers.get(&call)) {
                Some(InFlight {
                    caller: Some(peer),
                    log,
                    ended: None,
                    ..
                }) => Ok((peer.clone(), log.clone())),
                Some(_) => Err(ErrorData::invalid_request(
                    "the call this asks within has no client, or has ended: nobody to ask",
                    None,
                )),
                None => Err(ErrorData::invalid_request(
                    "no call of this client is in flight upstream: nobody to ask",
                    None,
                )),
            };
        }
        let on_this_link = askers
            .values()
            .filter(|in_flight| in_flight.link == self.link);
        if self.one_session {
            // Every call on the link is the session's: any of them names its
            // client, the one in flight first.
            let mut calls: Vec<&InFlight> = on_this_link.collect();
            calls.sort_by_key(|in_flight| in_flight.ended.is_some());
            return calls
                .first()
                .and_then(|in_flight| Some((in_flight.caller.clone()?, in_flight.log.clone())))
                .ok_or_else(|| {
                    ErrorData::invalid_request(
                        "no call of this session is upstream: nobody to ask",
                        None,
                    )
                });
        }
        let mut peers = on_this_link.filter(|in_flight| {
            in_flight
                .ended
                .is_none_or(|ended| ended.elapsed() < ENDED_GRACE)
        });
        match (peers.next(), peers.next()) {
            (
                Some(InFlight {
                    caller: Some(peer),
                    log,
                    ended: None,
                    ..
                }),
                None,
            ) => Ok((peer.clone(), log.clone())),
            (Some(_), None) => Err(ErrorData::invalid_request(
                "the call in flight upstream has no client: nobody to ask",
                None,
            )),
            (None, _) => Err(ErrorData::invalid_request(
                "no call of this client is in flight upstream: nobody to ask",
                None,
            )),
            (Some(_), Some(_)) => Err(ErrorData::invalid_request(
                "several calls are in flight upstream: which caller to ask is not known",
                None,
            )),
        }
    }

    /// The call sent as `request` on this link, while it is counted.
    fn call_of(&self, request: &RequestId) -> Option<u64> {
        lock(&self.inner.by_request)
            .get(&(self.link, request.clone()))
            .copied()
    }

    /// Where the log messages of the call sent as `request` on this link go,
    /// if it takes them: also just after its answer, when rmcp may hand on a
    /// message sent before it.
    fn log_of(&self, request: &RequestId) -> Option<LogSink> {
        let call = self.call_of(request)?;
        lock(&self.inner.askers).calls.get(&call)?.log.clone()
    }
}

/// A call's progress routed while it lives.
pub(super) struct Following {
    listener: Listener,
    token: ProgressToken,
}

impl Drop for Following {
    fn drop(&mut self) {
        lock(&self.listener.inner.progress).remove(&(self.listener.link, self.token.clone()));
    }
}

/// A call counted in flight while it lives (and for [`ENDED_GRACE`] after).
pub(super) struct Asking {
    listener: Listener,
    call: u64,
    request: Option<(u64, RequestId)>,
}

impl Asking {
    /// The call was sent upstream as `request`: what names it (over HTTP, the
    /// stream it came on) is the call's.
    pub(super) fn sent_as(&mut self, request: RequestId) {
        let request = (self.listener.link, request);
        lock(&self.listener.inner.by_request).insert(request.clone(), self.call);
        self.request = Some(request);
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        let mut askers = lock(&self.listener.inner.askers);
        if let Some(in_flight) = askers.calls.get_mut(&self.call) {
            let now = Instant::now();
            in_flight.ended = Some(now);
            askers.ended.push_back((now, self.call));
        }
        drop(askers);
        if let Some(request) = &self.request {
            lock(&self.listener.inner.by_request).remove(request);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ClientHandler for Listener {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // Progress for a token no call follows (one that ended, or one never
        // sent) is dropped: an upstream cannot reach a call it was not given.
        let route = (self.link, params.progress_token.clone());
        let Some(send) = lock(&self.inner.progress).get(&route).cloned() else {
            return;
        };
        let mut progress = Progress::new(params.progress);
        progress.total = params.total;
        progress.message = params.message;
        let _ = send.try_send(progress);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        // To the caller of the call on whose stream it came, or, sent on the
        // session's own stream (as rmcp's servers send theirs), of the call in
        // flight (see `asker`); at the level that caller chose. Else to this
        // process's log, where an operator can still read it.
        // rmcp 3.11 takes a notification's extensions before its `_meta`,
        // which they hold: `context.meta` is empty, and the `_meta` is among
        // `context.extensions`.
        let meta = context
            .extensions
            .get::<NotificationMetaObject>()
            .unwrap_or(&context.meta);
        let sink = match self.marked.then(|| origin_of(meta)).flatten() {
            Some(request) => self.log_of(&request),
            None => self.asker(None).ok().and_then(|(_, log)| log),
        };
        match sink {
            Some(log) => {
                log.send(crate::call::log_message_of(params));
            }
            None => tracing::info!(
                level = ?params.level,
                logger = params.logger.as_deref().unwrap_or("upstream"),
                data = %params.data,
                "an upstream's log message"
            ),
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed();
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let (asker, _) = self.asker(context.extensions.get())?;
        asker
            .create_elicitation(request)
            .await
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let (asker, _) = self.asker(context.extensions.get())?;
        asker
            .create_message(params)
            .await
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let (asker, _) = self.asker(context.extensions.get())?;
        asker
            .list_roots()
            .await
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities = ClientCapabilities::builder()
            .enable_elicitation()
            .enable_sampling()
            .enable_roots()
            .build();
        // The tasks extension (SEP-2663): an upstream tool that takes a task
        // is followed to its end (`tasks/get`, which needs it declared).
        info.capabilities.extensions = Some(std::collections::BTreeMap::from([(
            rmcp::model::TASKS_EXTENSION_ID.to_owned(),
            Default::default(),
        )]));
        info.client_info.name = "toolgraft-mcp".into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }
}
