//! Sessions without a worker task: [`DirectSessions`], the session manager behind
//! [`McpHttp`](super::McpHttp).
//!
//! rmcp's `LocalSessionManager` puts a task between the HTTP handlers and each
//! session's service loop, and every step (open a stream, push a message, route a
//! server message) is a channel send to that task and a oneshot back: two task
//! hops more per call than the work needs. Here the routing table sits in the
//! session under a short `std` mutex (never held across an `.await`): an HTTP
//! handler registers its stream and pushes the client message straight into the
//! channel the service loop's `receive()` reads, and the loop's `send()` puts a
//! server message straight into its stream's channel.
//!
//! What goes where, as in `LocalSessionManager`: a reply ends its request's stream;
//! progress whose token the request carried, and a server request made while
//! handling it (SEP-2260), ride that stream too; everything else goes to the `GET`
//! stream, or waits in its replay buffer until one opens. A second `GET` gets an
//! idle stream (keep-alives only), not the notifications. Event ids are
//! `<index>/<stream>` (`<index>` on the `GET` stream); the last [`REPLAY`] events of
//! a stream are kept for `Last-Event-ID`, and a finished stream whose client had
//! gone is kept [`COMPLETED_TTL`] for a late resume.
//!
//! A client that stops reading is not waited for: its stream's channel holds
//! [`STREAM_CAPACITY`] events, and the one that does not fit cuts the stream off
//! (the `send` fails, so the service loop reports it; the event stays in the replay
//! buffer for a resume). The service loop never blocks on a client.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::Stream;
use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, GetExtensions, GetMeta, ProgressToken, RequestId,
    ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::OriginatingRequestId;
use rmcp::transport::Transport;
use rmcp::transport::common::server_side_http::session_id;
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, Sleep, sleep_until};

#[cfg(test)]
mod tests;

/// A session unused this long ends (rmcp's `keep_alive` default). Used: a message
/// from its client, or one to a call in flight or to a `GET` stream being read;
/// not a broadcast nobody reads.
const KEEP_ALIVE: Duration = Duration::from_secs(300);
/// A session whose `initialize` has not come by then ends.
const INIT_TIMEOUT: Duration = Duration::from_secs(60);
/// The `retry:` of a request stream's priming event.
const SSE_RETRY: Duration = Duration::from_secs(3);
/// How long a finished stream nobody was reading stays resumable.
const COMPLETED_TTL: Duration = Duration::from_secs(60);
/// Finished streams kept per session, oldest dropped first: a client that asks
/// for large answers and leaves at once would otherwise have every one of them
/// kept for [`COMPLETED_TTL`].
const MAX_COMPLETED: usize = 64;
/// Events queued for one client stream before it counts as not reading. Room, not
/// memory: tokio allocates a bounded channel's slots as they fill.
const STREAM_CAPACITY: usize = 256;
/// Events kept per stream for `Last-Event-ID`.
const REPLAY: usize = 16;
/// Client messages queued for the service loop; a full queue makes the HTTP
/// handler wait, which is the backpressure a client should feel.
const INBOUND: usize = 16;
/// Idle second `GET` streams kept per session, oldest dropped first.
const MAX_SHADOWS: usize = 32;
/// Every this many new sessions, ones whose service died unannounced are swept.
const SWEEP_EVERY: u64 = 64;

#[derive(Debug)]
pub(crate) enum DirectSessionsError {
    NotFound(SessionId),
    Ended,
    NotARequest,
    BadEventId(String),
    StreamGone(String),
    /// The client let [`STREAM_CAPACITY`] events pile up unread.
    NotReading,
}

impl fmt::Display for DirectSessionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound(id) => write!(f, "session {id} not found"),
            Self::Ended => f.write_str("the session has ended"),
            Self::NotARequest => f.write_str("initialize must be a request"),
            Self::BadEventId(id) => write!(f, "malformed Last-Event-ID {id:?}"),
            Self::StreamGone(id) => write!(f, "no stream to resume at event {id:?}"),
            Self::NotReading => write!(
                f,
                "the client left {STREAM_CAPACITY} events unread; its stream was cut off"
            ),
        }
    }
}

impl std::error::Error for DirectSessionsError {}

type Result<T, E = DirectSessionsError> = std::result::Result<T, E>;
type Events = mpsc::Receiver<ServerSseMessage>;

/// The session manager: see the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct DirectSessions {
    sessions: Mutex<Sessions>,
}

#[derive(Debug, Default)]
struct Sessions {
    by_id: HashMap<SessionId, Arc<Session>>,
    created: u64,
}

impl DirectSessions {
    fn get(&self, id: &SessionId) -> Result<Arc<Session>> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions
            .by_id
            .get(id)
            .cloned()
            .ok_or_else(|| DirectSessionsError::NotFound(id.clone()))
    }
}

impl SessionManager for DirectSessions {
    type Error = DirectSessionsError;
    type Transport = DirectTransport;

    async fn create_session(&self) -> Result<(SessionId, DirectTransport)> {
        let id = session_id();
        let (inbound, receiver) = mpsc::channel(INBOUND);
        let session = Arc::new(Session(Mutex::new(State::new(inbound))));
        let deadline = session.lock().deadline;
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.created += 1;
        // rmcp closes a session when its service ends; one whose task died without
        // that (a panic) would otherwise stay in the map.
        if sessions.created.is_multiple_of(SWEEP_EVERY) {
            sessions.by_id.retain(|_, session| !session.lock().ended());
        }
        sessions.by_id.insert(id.clone(), session.clone());
        let transport = DirectTransport {
            session,
            inbound: receiver,
            timer: Box::pin(sleep_until(deadline)),
        };
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage> {
        let session = self.get(id)?;
        let ClientJsonRpcMessage::Request(request) = &message else {
            return Err(DirectSessionsError::NotARequest);
        };
        let (reply, replied) = oneshot::channel();
        let inbound = {
            let mut state = session.lock();
            let inbound = state.inbound()?;
            state.init = Some((request.id.clone(), reply));
            state.initialized = true;
            state.touch();
            inbound
        };
        push(&inbound, message).await?;
        replied.await.map_err(|_| DirectSessionsError::Ended)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool> {
        Ok(self.get(id).is_ok_and(|session| !session.lock().ended()))
    }

    async fn close_session(&self, id: &SessionId) -> Result<()> {
        let session = {
            let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            sessions.by_id.remove(id)
        };
        if let Some(session) = session {
            session.lock().end();
        }
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static> {
        let session = self.get(id)?;
        let (inbound, stream_id, events) = session.lock().open_stream(&message)?;
        // The push may wait for room, and the client may leave meanwhile (this
        // future dropped) or the session end: a request the service never got
        // gets no reply, so its route would stay for the session's life.
        let pending = Unrouted {
            session: &session,
            stream: stream_id,
        };
        push(&inbound, message).await?;
        std::mem::forget(pending);
        Ok(stream(events))
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<()> {
        let session = self.get(id)?;
        let inbound = {
            let mut state = session.lock();
            state.touch();
            if let ClientJsonRpcMessage::Notification(notification) = &message
                && let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                && let Some(request) = &cancelled.params.request_id
            {
                state.cancel(request);
            }
            state.inbound()?
        };
        push(&inbound, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static> {
        let session = self.get(id)?;
        let mut state = session.lock();
        state.inbound()?;
        state.touch();
        Ok(stream(state.open_common(0)))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static> {
        let session = self.get(id)?;
        let mut state = session.lock();
        state.inbound()?;
        state.touch();
        let events = match parse_event_id(&last_event_id)? {
            (index, Some(stream)) => state
                .resume_stream(stream, index)
                .ok_or(DirectSessionsError::StreamGone(last_event_id))?,
            (index, None) => state.open_common(index),
        };
        Ok(stream(events))
    }
}

/// `<index>/<stream>` on a request's stream, `<index>` on the `GET` stream.
fn parse_event_id(id: &str) -> Result<(u64, Option<u64>)> {
    let bad = || DirectSessionsError::BadEventId(id.to_owned());
    match id.split_once('/') {
        Some((index, stream)) => Ok((
            index.parse().map_err(|_| bad())?,
            Some(stream.parse().map_err(|_| bad())?),
        )),
        None => Ok((id.parse().map_err(|_| bad())?, None)),
    }
}

fn stream(mut events: Events) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    futures_util::stream::poll_fn(move |cx| events.poll_recv(cx))
}

async fn push(
    inbound: &mpsc::Sender<ClientJsonRpcMessage>,
    message: ClientJsonRpcMessage,
) -> Result<()> {
    inbound
        .send(message)
        .await
        .map_err(|_| DirectSessionsError::Ended)
}

/// Takes a request's route back out unless forgotten: see `create_stream`.
struct Unrouted<'a> {
    session: &'a Session,
    stream: u64,
}

impl Drop for Unrouted<'_> {
    fn drop(&mut self) {
        self.session.lock().abandon(self.stream);
    }
}

/// One session's routing table, shared by its transport and the HTTP handlers.
#[derive(Debug)]
struct Session(Mutex<State>);

impl Session {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The service loop's side of a session: `receive` reads what the HTTP handlers
/// push, `send` routes under the session's lock and returns a finished future.
#[derive(Debug)]
pub(crate) struct DirectTransport {
    session: Arc<Session>,
    inbound: mpsc::Receiver<ClientJsonRpcMessage>,
    /// Fires at a deadline that activity may since have moved: checked, then reset.
    /// One timer per session instead of one per message.
    timer: Pin<Box<Sleep>>,
}

impl Transport<RoleServer> for DirectTransport {
    type Error = DirectSessionsError;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        std::future::ready(self.session.lock().route(item))
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            tokio::select! {
                biased;
                message = self.inbound.recv() => return message,
                () = self.timer.as_mut() => {
                    let deadline = {
                        let mut state = self.session.lock();
                        if state.deadline <= Instant::now() {
                            state.end();
                            return None;
                        }
                        state.deadline
                    };
                    self.timer.as_mut().reset(deadline);
                }
            }
        }
    }

    async fn close(&mut self) -> Result<()> {
        self.session.lock().end();
        Ok(())
    }
}

impl Drop for DirectTransport {
    fn drop(&mut self) {
        self.session.lock().end();
    }
}

#[derive(Debug)]
struct State {
    /// `None` once the session has ended: nothing more goes in.
    inbound: Option<mpsc::Sender<ClientJsonRpcMessage>>,
    deadline: Instant,
    initialized: bool,
    init: Option<(RequestId, oneshot::Sender<ServerJsonRpcMessage>)>,
    next_stream: u64,
    streams: HashMap<u64, Route>,
    requests: HashMap<RequestId, u64>,
    progress: HashMap<ProgressToken, u64>,
    /// Finished streams kept for a late resume, oldest first.
    completed: VecDeque<(Instant, u64)>,
    common: Outlet,
    shadows: VecDeque<mpsc::Sender<ServerSseMessage>>,
}

/// A request's stream.
#[derive(Debug)]
struct Route {
    out: Outlet,
    request: Option<RequestId>,
    progress: Option<ProgressToken>,
    done: bool,
}

/// Where a stream's events go: its client's channel while one is attached, and
/// the replay buffer.
#[derive(Debug)]
struct Outlet {
    tx: Option<mpsc::Sender<ServerSseMessage>>,
    /// `None` for the `GET` stream.
    stream: Option<u64>,
    next: u64,
    replay: VecDeque<(u64, ServerSseMessage)>,
}

impl Outlet {
    fn new(stream: Option<u64>) -> Self {
        Self {
            tx: None,
            stream,
            // The `GET` stream's priming event (rmcp's) has id 0, a request
            // stream's (ours) 0/<stream>: messages start after it.
            next: 1,
            replay: VecDeque::new(),
        }
    }

    fn event_id(&self, index: u64) -> String {
        match self.stream {
            Some(stream) => format!("{index}/{stream}"),
            None => index.to_string(),
        }
    }

    fn push(&mut self, message: ServerJsonRpcMessage) -> Result<()> {
        let mut event = ServerSseMessage::from_message(message);
        event.event_id = Some(self.event_id(self.next));
        if self.replay.len() == REPLAY {
            self.replay.pop_front();
        }
        self.replay.push_back((self.next, event.clone()));
        self.next += 1;
        let Some(tx) = &self.tx else { return Ok(()) };
        match tx.try_send(event) {
            Ok(()) => Ok(()),
            // The client went away: the event waits in the replay buffer.
            Err(TrySendError::Closed(_)) => {
                self.tx = None;
                Ok(())
            }
            Err(TrySendError::Full(_)) => {
                self.tx = None;
                Err(DirectSessionsError::NotReading)
            }
        }
    }

    fn live(&self) -> bool {
        self.tx.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// A new client channel, given the buffered events after `after`; the old
    /// one, if any, ends.
    fn attach(&mut self, after: u64) -> Events {
        let (tx, rx) = mpsc::channel(STREAM_CAPACITY);
        for (_, event) in self.replay.iter().filter(|(index, _)| *index > after) {
            // Fits: the replay buffer is smaller than the channel.
            let _ = tx.try_send(event.clone());
        }
        self.tx = Some(tx);
        rx
    }
}

impl State {
    fn new(inbound: mpsc::Sender<ClientJsonRpcMessage>) -> Self {
        Self {
            inbound: Some(inbound),
            deadline: Instant::now() + INIT_TIMEOUT,
            initialized: false,
            init: None,
            next_stream: 0,
            streams: HashMap::new(),
            requests: HashMap::new(),
            progress: HashMap::new(),
            completed: VecDeque::new(),
            common: Outlet::new(None),
            shadows: VecDeque::new(),
        }
    }

    fn ended(&self) -> bool {
        self.inbound.is_none()
    }

    fn inbound(&self) -> Result<mpsc::Sender<ClientJsonRpcMessage>> {
        self.inbound.clone().ok_or(DirectSessionsError::Ended)
    }

    /// Activity moves the idle deadline; before `initialize` only the init
    /// deadline counts.
    fn touch(&mut self) {
        if self.initialized {
            self.deadline = Instant::now() + KEEP_ALIVE;
        }
    }

    /// Ends the session: `receive` returns `None`, every stream ends.
    fn end(&mut self) {
        self.inbound = None;
        self.init = None;
        self.streams.clear();
        self.requests.clear();
        self.progress.clear();
        self.completed.clear();
        self.common.tx = None;
        self.shadows.clear();
    }

    fn open_stream(
        &mut self,
        message: &ClientJsonRpcMessage,
    ) -> Result<(mpsc::Sender<ClientJsonRpcMessage>, u64, Events)> {
        let inbound = self.inbound()?;
        self.touch();
        self.evict();
        let stream = self.next_stream;
        self.next_stream = self.next_stream.wrapping_add(1);
        let mut out = Outlet::new(Some(stream));
        let events = out.attach(0);
        if let Some(tx) = &out.tx {
            let _ = tx.try_send(ServerSseMessage::priming(format!("0/{stream}"), SSE_RETRY));
        }
        let (mut request, mut progress) = (None, None);
        if let ClientJsonRpcMessage::Request(call) = message {
            // An id still in flight, sent again: the service answers it once,
            // and the reply goes to the newer stream. The older one ends now
            // rather than wait for ever (and stay in the table).
            if let Some(&older) = self.requests.get(&call.id) {
                self.finish(older, true);
            }
            self.requests.insert(call.id.clone(), stream);
            request = Some(call.id.clone());
            progress = call.request.get_meta().get_progress_token();
            if let Some(token) = &progress {
                self.progress.insert(token.clone(), stream);
            }
        }
        let route = Route {
            out,
            request,
            progress,
            done: false,
        };
        self.streams.insert(stream, route);
        Ok((inbound, stream, events))
    }

    /// The `GET` stream: the primary if none is being read, with what it missed
    /// after `after`; otherwise an idle one that only keeps its connection.
    fn open_common(&mut self, after: u64) -> Events {
        if !self.common.live() {
            return self.common.attach(after);
        }
        let (tx, rx) = mpsc::channel(1);
        // Shadows whose client left hold no place; only then the oldest live
        // one makes room.
        self.shadows.retain(|shadow| !shadow.is_closed());
        if self.shadows.len() >= MAX_SHADOWS {
            self.shadows.pop_front();
        }
        self.shadows.push_back(tx);
        rx
    }

    fn resume_stream(&mut self, stream: u64, after: u64) -> Option<Events> {
        self.evict();
        let route = self.streams.get_mut(&stream)?;
        let events = route.out.attach(after);
        if route.done {
            route.out.tx = None;
        }
        Some(events)
    }

    /// The client cancelled `request`: its stream ends, resumable a while.
    fn cancel(&mut self, request: &RequestId) {
        if let Some(&stream) = self.requests.get(request) {
            self.finish(stream, true);
        }
    }

    /// Unroutes `stream`; keeps it for a resume if its client missed the end.
    fn finish(&mut self, stream: u64, cut: bool) {
        self.unroute(stream);
        let Some(route) = self.streams.get_mut(&stream) else {
            return;
        };
        if !cut && route.out.live() {
            self.streams.remove(&stream);
            return;
        }
        route.out.tx = None;
        route.done = true;
        self.completed.push_back((Instant::now(), stream));
        self.evict();
    }

    /// Forgets the request id and progress token that lead to `stream`.
    fn unroute(&mut self, stream: u64) {
        let Some(route) = self.streams.get_mut(&stream) else {
            return;
        };
        if let Some(request) = route.request.take()
            && self.requests.get(&request) == Some(&stream)
        {
            self.requests.remove(&request);
        }
        if let Some(token) = route.progress.take()
            && self.progress.get(&token) == Some(&stream)
        {
            self.progress.remove(&token);
        }
    }

    /// Drops `stream` whole: its request never reached the service.
    fn abandon(&mut self, stream: u64) {
        self.unroute(stream);
        self.streams.remove(&stream);
    }

    fn evict(&mut self) {
        while let Some(&(at, stream)) = self.completed.front() {
            if at.elapsed() < COMPLETED_TTL && self.completed.len() <= MAX_COMPLETED {
                break;
            }
            self.completed.pop_front();
            if self.streams.get(&stream).is_some_and(|route| route.done) {
                self.streams.remove(&stream);
            }
        }
    }

    /// The service loop's `send`.
    fn route(&mut self, message: ServerJsonRpcMessage) -> Result<()> {
        if self.ended() {
            return Err(DirectSessionsError::Ended);
        }
        let reply = match &message {
            ServerJsonRpcMessage::Response(response) => Some(&response.id),
            ServerJsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = reply {
            if self.init.as_ref().is_some_and(|(init, _)| init == id)
                && let Some((_, reply)) = self.init.take()
            {
                return reply.send(message).map_err(|_| DirectSessionsError::Ended);
            }
            let Some(&stream) = self.requests.get(id) else {
                return self.broadcast(message);
            };
            let sent = self.deliver(stream, message);
            self.finish(stream, false);
            return sent;
        }
        let stream = match &message {
            ServerJsonRpcMessage::Notification(notification) => match &notification.notification {
                ServerNotification::ProgressNotification(progress) => {
                    self.progress.get(&progress.params.progress_token)
                }
                ServerNotification::CancelledNotification(cancelled) => cancelled
                    .params
                    .request_id
                    .as_ref()
                    .and_then(|id| self.requests.get(id)),
                _ => None,
            },
            ServerJsonRpcMessage::Request(request) => request
                .request
                .extensions()
                .get::<OriginatingRequestId>()
                .and_then(|origin| self.requests.get(&origin.0)),
            _ => None,
        };
        match stream.copied() {
            Some(stream) => self.deliver(stream, message),
            None => self.broadcast(message),
        }
    }

    /// To a request's stream: the call is in flight, so the session is in use.
    fn deliver(&mut self, stream: u64, message: ServerJsonRpcMessage) -> Result<()> {
        match self.streams.get_mut(&stream) {
            Some(route) => {
                let sent = route.out.push(message);
                self.touch();
                sent
            }
            None => self.broadcast(message),
        }
    }

    /// To the `GET` stream. A session counts as in use only while a client reads
    /// it: `list_changed` goes to every session after each edit of the toolset,
    /// and would otherwise keep sessions whose clients are gone for ever.
    fn broadcast(&mut self, message: ServerJsonRpcMessage) -> Result<()> {
        if self.common.live() {
            self.touch();
        }
        self.common.push(message)
    }
}
