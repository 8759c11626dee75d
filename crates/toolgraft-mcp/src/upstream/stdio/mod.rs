//! The upstream client's stdio transport: a child process speaking MCP in
//! JSON lines on its stdin and stdout, as rmcp's `TokioChildProcess` does,
//! except that a line of its stdout is held only up to a bound. rmcp's drops
//! a longer line unseen, so a call answered by one waits out its timeout; here
//! it fails at once as too large (see [`lines`]).
//!
//! The lines are read on a thread of their own: a line over the bound is read
//! through by serde_json's streaming parser, which reads from a blocking
//! reader.

mod lines;

use std::io::{self, BufReader, Read};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::runtime::Handle;
use tokio::sync::{Mutex, Semaphore, mpsc};

pub(super) use lines::answer_size;
use lines::{Incoming, Lines};

/// How long closing waits for the child to exit, after closing its stdin and
/// again after `SIGTERM` (rmcp's wait).
const GRACE: Duration = Duration::from_secs(3);

/// The most answers to the child's own lines (errors for messages it should
/// not have sent) waiting to be written at once; past them one is dropped. A
/// child that writes such lines without end and reads nothing would otherwise
/// have a task and a line's bytes held for each.
const MAX_REPLIES_WAITING: usize = 16;

/// A child process as an MCP server: started by [`ChildTransport::spawn`],
/// killed when the transport is dropped.
pub(super) struct ChildTransport {
    child: Child,
    /// `None` once closed: the child reads the end of its input.
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    /// The reading thread's messages; closed when the child's stdout ends.
    incoming: mpsc::Receiver<Incoming>,
    /// A permit for each answer to the child waiting to be written (see
    /// [`MAX_REPLIES_WAITING`]).
    replies: Arc<Semaphore>,
}

impl ChildTransport {
    /// Starts `command`, its stdout read a line of at most `bound` bytes at a
    /// time (a longer answer fails its request as larger than
    /// `max_result_bytes`), its stderr returned to be drained.
    pub(super) fn spawn(
        mut command: Command,
        bound: usize,
        max_result_bytes: usize,
    ) -> io::Result<(Self, ChildStderr)> {
        let runtime = Handle::try_current().map_err(io::Error::other)?;
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(io::Error::other("the child's stdio is not piped"));
        };
        // One message in hand at a time: the thread waits for the transport.
        let (messages, incoming) = mpsc::channel(1);
        let stdout = BlockingStdout {
            pipe: stdout,
            runtime,
            transport: messages.clone(),
        };
        let lines = Lines::new(BufReader::new(stdout), bound, max_result_bytes);
        std::thread::Builder::new()
            .name("upstream-stdout".to_owned())
            .spawn(move || {
                for incoming in lines {
                    if messages.blocking_send(incoming).is_err() {
                        break;
                    }
                }
            })?;
        let transport = Self {
            child,
            stdin: Arc::new(Mutex::new(Some(stdin))),
            incoming,
            replies: Arc::new(Semaphore::new(MAX_REPLIES_WAITING)),
        };
        Ok((transport, stderr))
    }

    async fn exited_within(&mut self, wait: Duration) -> io::Result<bool> {
        match tokio::time::timeout(wait, self.child.wait()).await {
            Ok(exited) => exited.map(|_| true),
            Err(_) => Ok(false),
        }
    }

    /// Asks the child to stop (Unix); whether it did within [`GRACE`].
    #[cfg(unix)]
    async fn terminate(&mut self) -> io::Result<bool> {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        // No id: it has exited and been reaped.
        let Some(pid) = self.child.id().and_then(|id| i32::try_from(id).ok()) else {
            return Ok(true);
        };
        if let Err(error) = kill(Pid::from_raw(pid), Signal::SIGTERM) {
            tracing::warn!(%error, "cannot send SIGTERM to the upstream");
            return Ok(false);
        }
        self.exited_within(GRACE).await
    }

    #[cfg(not(unix))]
    async fn terminate(&mut self) -> io::Result<bool> {
        Ok(false)
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        write(self.stdin.clone(), item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.incoming.recv().await? {
                Incoming::Message(message) => return Some(message),
                // Written by a task of its own: `receive` is polled in a
                // `select!`, and one dropped mid-write would cut the line.
                Incoming::Reply(reply) => {
                    let Ok(permit) = self.replies.clone().try_acquire_owned() else {
                        tracing::debug!("too many answers to the upstream wait: one is dropped");
                        continue;
                    };
                    let stdin = self.stdin.clone();
                    tokio::spawn(async move {
                        if let Err(error) = write(stdin, reply).await {
                            tracing::debug!(%error, "cannot answer the upstream");
                        }
                        drop(permit);
                    });
                }
            }
        }
    }

    /// MCP's stdio shutdown, as rmcp's child process transport does it: the
    /// child's stdin closed, then `SIGTERM` (Unix) if it has not exited within
    /// [`GRACE`], then killed if it has not within [`GRACE`] more.
    async fn close(&mut self) -> io::Result<()> {
        // A write stuck on a child that reads nothing holds the lock: the
        // signals below end it.
        if let Ok(mut stdin) = tokio::time::timeout(GRACE, self.stdin.lock()).await {
            stdin.take();
        }
        if self.exited_within(GRACE).await? || self.terminate().await? {
            return Ok(());
        }
        self.child.kill().await
    }
}

/// `message` as one line of the child's stdin.
async fn write(
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    message: TxJsonRpcMessage<RoleClient>,
) -> io::Result<()> {
    let mut line = serde_json::to_vec(&message)?;
    line.push(b'\n');
    let mut stdin = stdin.lock().await;
    let stdin = stdin
        .as_mut()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "the transport is closed"))?;
    stdin.write_all(&line).await?;
    stdin.flush().await
}

/// The child's stdout as a blocking reader for the reading thread, read on the
/// runtime the child was started on. A read ends as the end of the stream once
/// the transport is dropped: the thread goes with it.
struct BlockingStdout {
    pipe: ChildStdout,
    runtime: Handle,
    transport: mpsc::Sender<Incoming>,
}

impl Read for BlockingStdout {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let Self {
            pipe,
            runtime,
            transport,
        } = self;
        runtime.block_on(async {
            tokio::select! {
                read = pipe.read(out) => read,
                () = transport.closed() => Ok(0),
            }
        })
    }
}

#[cfg(test)]
mod tests;
