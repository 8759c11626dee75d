//! The child's stdout as JSON-RPC messages, one a line, each line held only up
//! to a bound. A longer line is read through in constant memory for what it
//! says of itself (its `id`, and whether it names a `method`), so that the
//! request it answers fails at once as too large, rather than waiting out its
//! timeout for an answer dropped unseen.

use std::cell::Cell;
use std::fmt;
use std::io::{self, BufRead, Read};

use rmcp::RoleClient;
use rmcp::model::{ErrorData, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer as _};
use serde_json::error::Category;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::Decoder;

/// What a line of the child's stdout comes to.
#[derive(Debug)]
pub(super) enum Incoming {
    /// A message for the client: the child's, or the error that stands in
    /// for its answer when that is too large to read.
    Message(RxJsonRpcMessage<RoleClient>),
    /// A message for the child: the error that answers a request of its own
    /// too large to read, or a message of no JSON-RPC shape (as rmcp's stdio
    /// transport answers one).
    Reply(TxJsonRpcMessage<RoleClient>),
}

/// The error a request gets in place of an answer of `size` bytes, over the
/// transport's bound for `max_result_bytes`. Its `data` says the size, by which
/// [`answer_size`] knows it.
fn too_large(size: usize, max_result_bytes: usize) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "the upstream answered {size} bytes, more than `max_result_bytes` ({max_result_bytes})"
        ),
        Some(serde_json::json!({ANSWER_BYTES: size})),
    )
}

/// The size of the answer that `error` stands in for, when it is
/// [`too_large`]'s.
pub(in crate::upstream) fn answer_size(error: &ErrorData) -> Option<usize> {
    let size = error.data.as_ref()?.get(ANSWER_BYTES)?.as_u64()?;
    usize::try_from(size).ok()
}

const ANSWER_BYTES: &str = "toolgraft/answerBytes";

/// The most bytes read for one top-level key of a line over the bound, or for
/// its `id` (a request id is a number or a short string): past it the line is
/// unreadable, and no longer key or id is held.
const MAX_ENVELOPE_FIELD: usize = 1024;

/// The deepest nesting read through in a line over the bound: serde_json's
/// own limit for a value it parses (and so for a line within the bound),
/// where skipping one would hold a byte per level.
const MAX_DEPTH: usize = 128;

/// The UTF-8 byte order mark, which rmcp's codec skips at a line's start.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The messages of a reader, each line held up to `bound` bytes (its newline
/// aside).
pub(super) struct Lines<R> {
    read: R,
    bound: usize,
    /// What the bound is for, named by the error that stands in for an answer
    /// over it.
    max_result_bytes: usize,
    line: BytesMut,
    codec: JsonRpcMessageCodec<RxJsonRpcMessage<RoleClient>>,
}

/// How far [`Lines::fill`] got.
enum Fill {
    /// A whole line, its newline last, is in `line`.
    Line,
    /// The line is longer than the bound: `line` holds its start, the reader
    /// the rest.
    Over,
    /// The stream ended after a last line without its newline, which is in
    /// `line` (rmcp's transport reads it too: a child may write its answer
    /// and exit).
    Last,
    /// The stream ended, or cannot be read.
    End,
}

impl<R: BufRead> Lines<R> {
    pub(super) fn new(read: R, bound: usize, max_result_bytes: usize) -> Self {
        Self {
            read,
            bound,
            max_result_bytes,
            line: BytesMut::new(),
            codec: JsonRpcMessageCodec::default(),
        }
    }

    fn fill(&mut self) -> Fill {
        self.line.clear();
        loop {
            let available = match self.read.fill_buf() {
                Ok([]) if self.line.is_empty() => return Fill::End,
                Ok([]) => return Fill::Last,
                Ok(available) => available,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    tracing::warn!(%error, "cannot read the upstream's stdout");
                    return Fill::End;
                }
            };
            let newline = available.iter().position(|&byte| byte == b'\n');
            let content = newline.unwrap_or(available.len());
            if self.line.len().saturating_add(content) > self.bound {
                return Fill::Over;
            }
            let take = newline.map_or(content, |at| at + 1);
            self.line.extend_from_slice(&available[..take]);
            self.read.consume(take);
            if newline.is_some() {
                return Fill::Line;
            }
        }
    }

    /// A line within the bound, read as rmcp's stdio transport reads it (the
    /// stream's last without its newline when `last`).
    fn parse(&mut self, last: bool) -> Option<Incoming> {
        let decoded = if last {
            self.codec.decode_eof(&mut self.line)
        } else {
            self.codec.decode(&mut self.line)
        };
        match decoded {
            // `None`: a notification rmcp skips for compatibility.
            Ok(message) => message.map(Incoming::Message),
            // Not JSON: there is no id to answer, and answering could start
            // an error storm with a peer that echoes it.
            Err(JsonRpcMessageCodecError::Serde(error))
                if matches!(error.classify(), Category::Syntax | Category::Eof) =>
            {
                tracing::debug!(%error, "ignoring a line of the upstream that is not JSON");
                None
            }
            Err(error) => {
                tracing::debug!(%error, "a line of the upstream is not a JSON-RPC message");
                let invalid = ErrorData::invalid_request("Invalid request", None);
                Some(Incoming::Reply(TxJsonRpcMessage::<RoleClient>::error(
                    invalid, None,
                )))
            }
        }
    }

    /// A line over the bound, read to its end (its newline, or the stream's)
    /// without being held. `None`: its rest could not be read.
    fn read_through(&mut self) -> Option<Option<Incoming>> {
        let budget = Cell::new(None);
        let mut rest = RestOfLine {
            read: &mut self.read,
            read_bytes: 0,
            ended: false,
        };
        let start = self.line.strip_prefix(BOM).unwrap_or(&self.line);
        let envelope = {
            let mut json = serde_json::Deserializer::from_reader(Guarded {
                start,
                rest: &mut rest,
                budget: &budget,
                scan: Scan::default(),
            });
            json.deserialize_map(EnvelopeOf { budget: &budget })
                .and_then(|envelope| json.end().map(|()| envelope))
        };
        // What the parse left of the line: all of it, when it failed early.
        if let Err(error) = io::copy(&mut rest, &mut io::sink()) {
            tracing::warn!(%error, "cannot read the upstream's stdout");
            return None;
        }
        let size = self.line.len().saturating_add(rest.read_bytes);
        Some(self.answer(envelope, size))
    }

    /// What a line of `size` bytes over the bound comes to, by its envelope.
    fn answer(
        &self,
        envelope: Result<Envelope, serde_json::Error>,
        size: usize,
    ) -> Option<Incoming> {
        let bound = self.bound;
        match envelope {
            Ok(Envelope {
                id: Some(id),
                method: false,
            }) => {
                tracing::warn!(size, bound, %id, "an answer of the upstream is larger than its transport reads: its request fails");
                let error = too_large(size, self.max_result_bytes);
                Some(Incoming::Message(RxJsonRpcMessage::<RoleClient>::error(
                    error,
                    Some(id),
                )))
            }
            Ok(Envelope {
                id: Some(id),
                method: true,
            }) => {
                tracing::warn!(size, bound, %id, "a request of the upstream is larger than its transport reads: refused");
                let error = ErrorData::internal_error(
                    format!("the request is {size} bytes, more than this client reads ({bound})"),
                    None,
                );
                Some(Incoming::Reply(TxJsonRpcMessage::<RoleClient>::error(
                    error,
                    Some(id),
                )))
            }
            Ok(Envelope { id: None, .. }) => {
                tracing::warn!(
                    size,
                    bound,
                    "a notification of the upstream is larger than its transport reads: dropped"
                );
                None
            }
            Err(error) => {
                tracing::warn!(size, bound, %error, "a line of the upstream is larger than its transport reads, and unreadable: dropped");
                None
            }
        }
    }
}

impl<R: BufRead> Iterator for Lines<R> {
    type Item = Incoming;

    /// The next message, or answer to send; `None` once the stream ends.
    fn next(&mut self) -> Option<Incoming> {
        loop {
            let incoming = match self.fill() {
                Fill::Line => self.parse(false),
                Fill::Last => return self.parse(true),
                Fill::Over => self.read_through()?,
                Fill::End => return None,
            };
            if incoming.is_some() {
                return incoming;
            }
        }
    }
}

/// The rest of the current line: read up to its newline (taken, not given).
struct RestOfLine<'a, R> {
    read: &'a mut R,
    read_bytes: usize,
    /// At its newline, or the stream's end.
    ended: bool,
}

impl<R: BufRead> Read for RestOfLine<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.ended || out.is_empty() {
            return Ok(0);
        }
        let available = self.read.fill_buf()?;
        if available.is_empty() {
            self.ended = true;
            return Ok(0);
        }
        // Only as far as `out` takes: serde_json reads a byte at a time.
        let window = &available[..available.len().min(out.len())];
        let newline = window.iter().position(|&byte| byte == b'\n');
        let len = newline.unwrap_or(window.len());
        out[..len].copy_from_slice(&window[..len]);
        let at_newline = newline == Some(len);
        self.read.consume(len + usize::from(at_newline));
        if at_newline {
            self.ended = true;
        }
        self.read_bytes += len;
        Ok(len)
    }
}

/// A line over the bound as serde_json reads it: its held start, then the
/// rest. What serde_json would hold of it is bounded here, a key or `id` by
/// `budget` (set while one is read), and what it would not check is (see
/// [`Scan`]).
struct Guarded<'a, 'r, R> {
    start: &'a [u8],
    rest: &'a mut RestOfLine<'r, R>,
    budget: &'a Cell<Option<usize>>,
    scan: Scan,
}

impl<R: BufRead> Read for Guarded<'_, '_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let out = match self.budget.get() {
            Some(0) => return Err(io::Error::other("a key or id is too long")),
            Some(left) => {
                let len = out.len().min(left);
                &mut out[..len]
            }
            None => out,
        };
        let len = if self.start.is_empty() {
            self.rest.read(out)?
        } else {
            self.start.read(out)?
        };
        if let Some(left) = self.budget.get() {
            self.budget.set(Some(left - len));
        }
        self.scan.track(&out[..len])?;
        Ok(len)
    }
}

/// What serde_json's skipping of a value leaves unchecked: its nesting (held
/// a byte per level) and its strings' UTF-8 (skipped unread).
#[derive(Default)]
struct Scan {
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The start of a character not yet whole.
    partial: [u8; 4],
    partial_len: usize,
}

impl Scan {
    fn track(&mut self, bytes: &[u8]) -> io::Result<()> {
        for &byte in bytes {
            self.utf8(byte)?;
            match (self.in_string, byte) {
                (true, _) if self.escaped => self.escaped = false,
                (true, b'\\') => self.escaped = true,
                (true, b'"') => self.in_string = false,
                (true, _) => {}
                (false, b'"') => self.in_string = true,
                (false, b'[' | b'{') => {
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        return Err(io::Error::other("nested too deep"));
                    }
                }
                (false, b']' | b'}') => self.depth = self.depth.saturating_sub(1),
                (false, _) => {}
            }
        }
        Ok(())
    }

    fn utf8(&mut self, byte: u8) -> io::Result<()> {
        if self.partial_len == 0 && byte.is_ascii() {
            return Ok(());
        }
        self.partial[self.partial_len] = byte;
        self.partial_len += 1;
        match std::str::from_utf8(&self.partial[..self.partial_len]) {
            Ok(_) => self.partial_len = 0,
            // Whole at four bytes, or invalid: never a fifth.
            Err(error) if error.error_len().is_none() => {}
            Err(_) => return Err(io::Error::new(io::ErrorKind::InvalidData, "not UTF-8")),
        }
        Ok(())
    }
}

/// What a line says of itself.
#[derive(Default)]
struct Envelope {
    /// A `null` id is none (an error answering no request).
    id: Option<RequestId>,
    /// It names a method: a request of the child's own (or a notification).
    method: bool,
}

/// Reads an envelope: each top-level key and the `id` within the budget,
/// every other value skipped by [`IgnoredAny`], which holds none of it.
struct EnvelopeOf<'a> {
    budget: &'a Cell<Option<usize>>,
}

impl EnvelopeOf<'_> {
    fn within_budget<T>(&self, read: impl FnOnce() -> T) -> T {
        self.budget.set(Some(MAX_ENVELOPE_FIELD));
        let value = read();
        self.budget.set(None);
        value
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Key {
    Id,
    Method,
    #[serde(other)]
    Other,
}

impl<'de> Visitor<'de> for EnvelopeOf<'_> {
    type Value = Envelope;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut envelope = Envelope::default();
        while let Some(key) = self.within_budget(|| map.next_key::<Key>())? {
            match key {
                Key::Id => envelope.id = self.within_budget(|| map.next_value())?,
                Key::Method => {
                    envelope.method = true;
                    map.next_value::<IgnoredAny>()?;
                }
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(envelope)
    }
}
