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
//! idle stream (keep-alives only) until the first one's client goes away; then
//! the newest idle one still open takes over, from the first event the old one
//! was not handed (a client that reconnected before its old connection was seen
//! to drop hears everything once). Event ids are
//! `<index>/<stream>` (`<index>` on the `GET` stream); the last [`REPLAY`] events of
//! a stream are kept for `Last-Event-ID`, and a finished stream whose client had
//! gone is kept [`COMPLETED_TTL`] for a late resume.
//!
//! A client that stops reading is not waited for: its stream's channel holds
//! [`STREAM_CAPACITY`] events, and the one that does not fit cuts the stream off
//! (the `send` fails, so the service loop reports it; the event stays in the replay
//! buffer for a resume). The service loop never blocks on a client.

use std::collections::HashMap;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::Stream;
use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::common::server_side_http::session_id;
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, Sleep, sleep_until};
use toolgraft::context::Principal;

mod outlet;
mod table;
#[cfg(test)]
mod tests;

use outlet::parse_event_id;
use table::State;

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
    /// As many sessions are open as the server keeps.
    Full,
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
            Self::Full => f.write_str("as many sessions are open as the server keeps"),
        }
    }
}

impl std::error::Error for DirectSessionsError {}

type Result<T, E = DirectSessionsError> = std::result::Result<T, E>;
type Events = mpsc::Receiver<ServerSseMessage>;

/// The session manager: see the [module docs](self).
#[derive(Debug)]
pub(crate) struct DirectSessions {
    sessions: Mutex<Sessions>,
    /// The most sessions open at once.
    max: usize,
    /// The most sessions one principal has open at once.
    per_principal: usize,
}

impl Default for DirectSessions {
    fn default() -> Self {
        Self::with_max(usize::MAX, usize::MAX)
    }
}

/// A request that may open a session (a `POST` without a session id), as the
/// session manager rmcp calls within its handling sees it: who sends it (for the
/// cap per principal), and whether the manager refused it a session for want of
/// room (so the service answers 503, where rmcp would answer 500).
#[derive(Default)]
pub(crate) struct Opening {
    pub(crate) principal: Option<Principal>,
    pub(crate) refused: AtomicBool,
}

tokio::task_local! {
    /// The request being handled, when it may open a session.
    pub(crate) static OPENING: Opening;
}

#[derive(Debug, Default)]
struct Sessions {
    by_id: HashMap<SessionId, Arc<Session>>,
    /// Who opened each session that a principal opened.
    owners: HashMap<SessionId, Principal>,
    created: u64,
}

impl Sessions {
    /// Forgets the sessions whose service ended without closing them.
    fn sweep(&mut self) {
        self.by_id.retain(|_, session| !session.lock().ended());
        let by_id = &self.by_id;
        self.owners.retain(|id, _| by_id.contains_key(id));
    }

    fn opened_by(&self, principal: &Principal) -> usize {
        self.owners
            .values()
            .filter(|owner| *owner == principal)
            .count()
    }

    /// Whether a session for `principal` fits under `max` and `per_principal`.
    fn fits(&self, principal: Option<&Principal>, max: usize, per_principal: usize) -> bool {
        self.by_id.len() < max
            && principal.is_none_or(|principal| self.opened_by(principal) < per_principal)
    }
}

impl DirectSessions {
    /// Sessions, at most `max` open at once and `per_principal` for one
    /// principal.
    pub(crate) fn with_max(max: usize, per_principal: usize) -> Self {
        Self {
            sessions: Mutex::default(),
            max,
            per_principal,
        }
    }

    /// Whether another session of `principal` fits (ended ones swept first).
    pub(crate) fn has_room(&self, principal: Option<&Principal>) -> bool {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions.fits(principal, self.max, self.per_principal) {
            return true;
        }
        sessions.sweep();
        sessions.fits(principal, self.max, self.per_principal)
    }

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
        let opener = OPENING
            .try_with(|opening| opening.principal.clone())
            .ok()
            .flatten();
        let fits = sessions.fits(opener.as_ref(), self.max, self.per_principal);
        if sessions.created.is_multiple_of(SWEEP_EVERY) || !fits {
            sessions.sweep();
        }
        // The service checks for room first where the request says it opens a
        // session; this holds the caps for every other open (one that raced past
        // that check, or an `initialize` of a protocol that serves calls without
        // sessions, which rmcp gives a session all the same).
        if !sessions.fits(opener.as_ref(), self.max, self.per_principal) {
            // Outside a request (no `OPENING`) there is no one to answer 503.
            let _ = OPENING.try_with(|opening| opening.refused.store(true, Ordering::Relaxed));
            return Err(DirectSessionsError::Full);
        }
        if let Some(opener) = opener {
            sessions.owners.insert(id.clone(), opener);
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
            state.initialized = true;
            let inbound = state.enter()?;
            state.init = Some((request.id.clone(), reply));
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
            sessions.owners.remove(id);
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
            let inbound = state.enter()?;
            if let ClientJsonRpcMessage::Notification(notification) = &message
                && let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                && let Some(request) = &cancelled.params.request_id
            {
                state.cancel(request);
            }
            inbound
        };
        push(&inbound, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static> {
        let session = self.get(id)?;
        let mut state = session.lock();
        state.enter()?;
        Ok(stream(state.open_common(0)))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static> {
        let session = self.get(id)?;
        let mut state = session.lock();
        state.enter()?;
        let events = match parse_event_id(&last_event_id)? {
            (index, Some(stream)) => state
                .resume_stream(stream, index)
                .ok_or(DirectSessionsError::StreamGone(last_event_id))?,
            (index, None) => state.open_common(index),
        };
        Ok(stream(events))
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
