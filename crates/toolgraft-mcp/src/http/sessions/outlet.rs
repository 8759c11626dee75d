//! Where a stream's events go, and their ids.

use std::collections::VecDeque;

use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use super::{DirectSessionsError, Events, REPLAY, Result, STREAM_CAPACITY};

/// Where a stream's events go: its client's channel while one is attached, and
/// the replay buffer.
#[derive(Debug)]
pub(super) struct Outlet {
    pub(super) tx: Option<mpsc::Sender<ServerSseMessage>>,
    /// `None` for the `GET` stream.
    pub(super) stream: Option<u64>,
    pub(super) next: u64,
    /// The last event handed to a client's channel: where a client taking over
    /// from one that went away without a word starts.
    pub(super) handed: u64,
    pub(super) replay: VecDeque<(u64, ServerSseMessage)>,
}

impl Outlet {
    pub(super) fn new(stream: Option<u64>) -> Self {
        Self {
            tx: None,
            stream,
            // The `GET` stream's priming event (rmcp's) has id 0, a request
            // stream's (ours) 0/<stream>: messages start after it.
            next: 1,
            handed: 0,
            replay: VecDeque::new(),
        }
    }

    pub(super) fn event_id(&self, index: u64) -> String {
        match self.stream {
            Some(stream) => format!("{index}/{stream}"),
            None => index.to_string(),
        }
    }

    pub(super) fn push(&mut self, message: ServerJsonRpcMessage) -> Result<()> {
        let mut event = ServerSseMessage::from_message(message);
        event.event_id = Some(self.event_id(self.next));
        if self.replay.len() == REPLAY {
            self.replay.pop_front();
        }
        self.replay.push_back((self.next, event.clone()));
        self.next += 1;
        let Some(tx) = &self.tx else { return Ok(()) };
        match tx.try_send(event) {
            Ok(()) => {
                self.handed = self.next - 1;
                Ok(())
            }
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

    pub(super) fn live(&self) -> bool {
        self.tx.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// A new client channel, given the buffered events after `after`; the old
    /// one, if any, ends.
    pub(super) fn attach(&mut self, after: u64) -> Events {
        let (tx, rx) = mpsc::channel(STREAM_CAPACITY);
        self.adopt(tx, after);
        rx
    }

    /// Makes `tx` this outlet's client channel, given the buffered events after
    /// `after`; the old one, if any, ends.
    pub(super) fn adopt(&mut self, tx: mpsc::Sender<ServerSseMessage>, after: u64) {
        for (index, event) in self.replay.iter().filter(|(index, _)| *index > after) {
            // Fits: the replay buffer is smaller than the channel.
            if tx.try_send(event.clone()).is_ok() {
                self.handed = *index;
            }
        }
        self.tx = Some(tx);
    }
}

/// `<index>/<stream>` on a request's stream, `<index>` on the `GET` stream.
pub(super) fn parse_event_id(id: &str) -> Result<(u64, Option<u64>)> {
    let bad = || DirectSessionsError::BadEventId(id.to_owned());
    match id.split_once('/') {
        Some((index, stream)) => Ok((
            index.parse().map_err(|_| bad())?,
            Some(stream.parse().map_err(|_| bad())?),
        )),
        None => Ok((id.parse().map_err(|_| bad())?, None)),
    }
}
