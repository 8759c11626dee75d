//! Doorbells: how processes sharing an SQLite file wake each other, since a file
//! has no blocking read. Each idle worker, and each caller waiting for replies,
//! binds a Unix datagram socket in a directory beside the file; a caller rings its
//! queue's workers after enqueueing, a worker rings the caller after writing its
//! reply. A ring carries nothing: the row in the file is the message, and the
//! pollers stay as a safety net (a lost ring costs one poll period, no job).
//!
//! Elsewhere than on Unix there are no doorbells: the pollers alone serve.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::super::fnv;

/// The doorbells of one SQLite job file and queue.
pub(crate) struct Doorbells {
    dir: PathBuf,
    /// Workers of the queue bind `w-<tag>-<ULID>.sock`.
    worker_prefix: String,
    #[cfg(unix)]
    sender: tokio::sync::OnceCell<tokio::net::UnixDatagram>,
    /// The caller's reply doorbell, bound at its first wait (`None` inside once
    /// binding failed: then the caller polls).
    #[cfg(unix)]
    reply: tokio::sync::Mutex<Option<Option<Bell>>>,
}

/// A bound doorbell; its socket file goes when it is dropped.
#[cfg(unix)]
struct Bell {
    socket: tokio::net::UnixDatagram,
    path: PathBuf,
}

#[cfg(unix)]
impl Drop for Bell {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(unix)]
impl Bell {
    fn bind(path: PathBuf) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let socket = tokio::net::UnixDatagram::bind(&path)?;
        Ok(Self { socket, path })
    }
}

impl std::fmt::Debug for Doorbells {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doorbells")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Doorbells {
    /// The doorbells of the job file at `url` (`sqlite://path[?query]`) and its
    /// `queue`: in `<path>.wake/`, or, when socket paths there would be too long
    /// for Unix (about 100 bytes), in the temp directory under a hash of the
    /// file's absolute path.
    pub(crate) fn beside(url: &str, queue: &str) -> Self {
        let path = url.trim_start_matches("sqlite://");
        let path = path.split_once('?').map_or(path, |(path, _)| path);
        let absolute = std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path));
        let beside = PathBuf::from(format!("{}.wake", absolute.display()));
        // `w-` + 16 hex + `-` + 26 (ULID) + `.sock`, and a separator.
        let dir = if beside.as_os_str().len() + 52 <= 100 {
            beside
        } else {
            std::env::temp_dir().join(format!(
                "toolgraft-wake-{:016x}",
                fnv(&absolute.display().to_string())
            ))
        };
        Self {
            dir,
            worker_prefix: format!("w-{:016x}-", fnv(queue)),
            #[cfg(unix)]
            sender: tokio::sync::OnceCell::new(),
            #[cfg(unix)]
            reply: tokio::sync::Mutex::new(None),
        }
    }

    fn reply_path(&self, reply_to: &str) -> PathBuf {
        self.dir.join(format!("r-{:016x}.sock", fnv(reply_to)))
    }

    #[cfg(unix)]
    async fn ring(&self, path: &Path) -> std::io::Result<()> {
        let sender = self
            .sender
            .get_or_try_init(|| async { tokio::net::UnixDatagram::unbound() })
            .await?;
        sender.send_to(&[], path).await.map(drop)
    }

    /// Rings every worker of the queue; a doorbell nobody answers (a killed
    /// worker's) is removed.
    pub(crate) async fn ring_workers(&self) {
        #[cfg(unix)]
        {
            let Ok(entries) = std::fs::read_dir(&self.dir) else {
                return;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if !name.to_string_lossy().starts_with(&self.worker_prefix) {
                    continue;
                }
                let path = entry.path();
                match self.ring(&path).await {
                    Ok(()) => {}
                    Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
                        let _ = std::fs::remove_file(&path);
                    }
                    // A full socket buffer: that worker has rings waiting already.
                    Err(_) => {}
                }
            }
        }
    }

    /// Rings the caller waiting on `reply_to`, if it has a doorbell.
    pub(crate) async fn ring_reply(&self, reply_to: &str) {
        #[cfg(unix)]
        {
            let _ = self.ring(&self.reply_path(reply_to)).await;
        }
        #[cfg(not(unix))]
        let _ = reply_to;
    }

    /// Waits up to `max` for a ring on `reply_to`'s doorbell (binding it first).
    pub(crate) async fn wait_for_reply(&self, reply_to: &str, max: Duration) {
        #[cfg(unix)]
        {
            let mut slot = self.reply.lock().await;
            let bell = slot.get_or_insert_with(|| {
                Bell::bind(self.reply_path(reply_to))
                    .inspect_err(
                        |error| tracing::warn!(%error, "no reply doorbell; polling for replies"),
                    )
                    .ok()
            });
            if let Some(bell) = bell {
                let mut ring = [0u8; 1];
                let _ = tokio::time::timeout(max, bell.socket.recv(&mut ring)).await;
                return;
            }
        }
        #[cfg(not(unix))]
        let _ = reply_to;
        tokio::time::sleep(max).await;
    }

    /// A worker's side: binds a doorbell of the queue and notifies `wake` at each
    /// ring, until the task is dropped (which removes the doorbell).
    pub(crate) async fn listen_as_worker(self: Arc<Self>, wake: Arc<Notify>) {
        #[cfg(unix)]
        {
            let path = self.dir.join(format!(
                "{}{}.sock",
                self.worker_prefix,
                ulid::Ulid::generate()
            ));
            let bell = match Bell::bind(path) {
                Ok(bell) => bell,
                Err(error) => {
                    tracing::warn!(%error, "no worker doorbell; the worker polls");
                    return;
                }
            };
            // Jobs may have come before the doorbell was up.
            wake.notify_one();
            let mut ring = [0u8; 1];
            loop {
                match bell.socket.recv(&mut ring).await {
                    Ok(_) => wake.notify_one(),
                    Err(error) => {
                        tracing::warn!(%error, "the worker doorbell failed; the worker polls");
                        return;
                    }
                }
            }
        }
        #[cfg(not(unix))]
        let _ = wake;
    }
}
