//! One session's routing table: which stream each server message goes to, and
//! what is kept for a resume.

use std::collections::{HashMap, VecDeque};

use rmcp::model::{
    ClientJsonRpcMessage, GetExtensions, GetMeta, ProgressToken, RequestId, ServerJsonRpcMessage,
    ServerNotification,
};
use rmcp::service::OriginatingRequestId;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::outlet::Outlet;
use super::{
    COMPLETED_TTL, DirectSessionsError, Events, INIT_TIMEOUT, KEEP_ALIVE, MAX_COMPLETED,
    MAX_SHADOWS, Result, SSE_RETRY, STREAM_CAPACITY,
};

/// A session's streams and the routes to them, behind the session's mutex.
#[derive(Debug)]
pub(super) struct State {
    /// `None` once the session has ended: nothing more goes in.
    pub(super) inbound: Option<mpsc::Sender<ClientJsonRpcMessage>>,
    pub(super) deadline: Instant,
    pub(super) initialized: bool,
    pub(super) init: Option<(RequestId, oneshot::Sender<ServerJsonRpcMessage>)>,
    pub(super) next_stream: u64,
    pub(super) streams: HashMap<u64, Route>,
    pub(super) requests: HashMap<RequestId, u64>,
    pub(super) progress: HashMap<ProgressToken, u64>,
    /// Finished streams kept for a late resume, oldest first.
    pub(super) completed: VecDeque<(Instant, u64)>,
    pub(super) common: Outlet,
    pub(super) shadows: VecDeque<mpsc::Sender<ServerSseMessage>>,
}

/// A request's stream.
#[derive(Debug)]
pub(super) struct Route {
    pub(super) out: Outlet,
    pub(super) request: Option<RequestId>,
    pub(super) progress: Option<ProgressToken>,
    pub(super) done: bool,
}
impl State {
    pub(super) fn new(inbound: mpsc::Sender<ClientJsonRpcMessage>) -> Self {
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

    pub(super) fn ended(&self) -> bool {
        self.inbound.is_none()
    }

    /// The client at the door: a live session's way in, the visit counting as use.
    pub(super) fn enter(&mut self) -> Result<mpsc::Sender<ClientJsonRpcMessage>> {
        let inbound = self.inbound.clone().ok_or(DirectSessionsError::Ended)?;
        self.touch();
        Ok(inbound)
    }

    /// Activity moves the idle deadline; before `initialize` only the init
    /// deadline counts.
    pub(super) fn touch(&mut self) {
        if self.initialized {
            self.deadline = Instant::now() + KEEP_ALIVE;
        }
    }

    /// Ends the session: `receive` returns `None`, every stream ends.
    pub(super) fn end(&mut self) {
        self.inbound = None;
        self.init = None;
        self.streams.clear();
        self.requests.clear();
        self.progress.clear();
        self.completed.clear();
        self.common.tx = None;
        self.shadows.clear();
    }

    pub(super) fn open_stream(
        &mut self,
        message: &ClientJsonRpcMessage,
    ) -> Result<(mpsc::Sender<ClientJsonRpcMessage>, u64, Events)> {
        let inbound = self.enter()?;
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
    pub(super) fn open_common(&mut self, after: u64) -> Events {
        if !self.common.live() {
            return self.common.attach(after);
        }
        // Room for a whole stream: a shadow takes over when the primary's client
        // goes away (a client that reconnected before the old connection was
        // seen to drop). Room, not memory, as for every stream.
        let (tx, rx) = mpsc::channel(STREAM_CAPACITY);
        // Shadows whose client left hold no place; only then the oldest live
        // one makes room.
        self.shadows.retain(|shadow| !shadow.is_closed());
        if self.shadows.len() >= MAX_SHADOWS {
            self.shadows.pop_front();
        }
        self.shadows.push_back(tx);
        rx
    }

    pub(super) fn resume_stream(&mut self, stream: u64, after: u64) -> Option<Events> {
        self.evict();
        let route = self.streams.get_mut(&stream)?;
        let events = route.out.attach(after);
        if route.done {
            route.out.tx = None;
        }
        Some(events)
    }

    /// The client cancelled `request`: its stream ends, resumable a while.
    pub(super) fn cancel(&mut self, request: &RequestId) {
        if let Some(&stream) = self.requests.get(request) {
            self.finish(stream, true);
        }
    }

    /// Unroutes `stream`; keeps it for a resume if its client missed the end.
    pub(super) fn finish(&mut self, stream: u64, cut: bool) {
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
    pub(super) fn unroute(&mut self, stream: u64) {
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
    pub(super) fn abandon(&mut self, stream: u64) {
        self.unroute(stream);
        self.streams.remove(&stream);
    }

    pub(super) fn evict(&mut self) {
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
    pub(super) fn route(&mut self, message: ServerJsonRpcMessage) -> Result<()> {
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
    pub(super) fn deliver(&mut self, stream: u64, message: ServerJsonRpcMessage) -> Result<()> {
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
    pub(super) fn broadcast(&mut self, message: ServerJsonRpcMessage) -> Result<()> {
        if !self.common.live() {
            self.promote_shadow();
        }
        if self.common.live() {
            self.touch();
        }
        self.common.push(message)
    }

    /// The newest idle `GET` still open becomes the primary, from the first event
    /// its predecessor was not handed: without this, a client that reconnected
    /// its `GET` before the old one dropped would hear nothing more.
    fn promote_shadow(&mut self) {
        while let Some(shadow) = self.shadows.pop_back() {
            if !shadow.is_closed() {
                let after = self.common.handed;
                self.common.adopt(shadow, after);
                return;
            }
        }
    }
}
