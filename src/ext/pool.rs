//! `pool`: the in-process backend. The layer below runs on a dedicated pool of
//! worker threads with its own runtime, so nothing of the caller's task (its
//! thread-locals) is there but the call context that travels (see
//! [`relocation`](crate::relocation)).
//!
//! A backend ships no code ([relocation](crate::rulebook#relocation)): it names its layer input to a worker that
//! has the same tools bound. In-process, the pool's threads share the caller's
//! memory, so the bound layer input is already there; the pool hands them a
//! reference to it (and the typed input) instead of a name and JSON, which keeps
//! typed calls typed. Backends that cross a process boundary go by name.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::runtime::{Handle, Runtime};
use tokio::task::AbortHandle;

use crate::Name;
use crate::error::{ArgsError, ToolError};
use crate::extension::Stack;
use crate::extension::{Extension, Layer, LayerInput};
use crate::kind::Backend;
use crate::kind::property::Anywhere;
use crate::relocation::Departure;
use crate::schema::Args;

/// A pool of worker threads running its own tokio runtime; as an extension, a
/// backend that runs its layer input there.
///
/// Cloning shares the threads. The runtime shuts down (without blocking) when the
/// last clone, including those inside bound branches, is dropped.
///
/// ```
/// use serde_json::json;
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::Pool;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Ping {}
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ping = Tool::builder().name("ping").description("Say where it runs.")
///     .body(|_: Ping| async { Ok(std::thread::current().name().unwrap_or("?").to_owned()) })
///     .build()?;
/// let pool = Pool::new(2)?;
/// let toolset = Toolset::new();
/// toolset.bind((ping.combo().with(pool.clone()),))?;
/// assert_eq!(toolset.call("ping_pool", json!({})).await?, json!("toolgraft-pool"));
/// assert_eq!(pool.jobs_started(), 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Pool {
    name: String,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("threads", &self.shared.threads)
            .finish_non_exhaustive()
    }
}

struct Shared {
    runtime: Option<Runtime>,
    handle: Handle,
    threads: usize,
    jobs: AtomicU64,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The last clone may be dropped inside async code (or on a pool thread),
        // where a blocking shutdown would panic.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Pool {
    /// The most worker threads one pool may run (see [`Pool::new`]).
    ///
    /// ```
    /// use toolgraft::ext::Pool;
    /// assert!(Pool::new(Pool::MAX_THREADS + 1).is_err());
    /// ```
    pub const MAX_THREADS: usize = 1024;

    /// A pool of `threads` worker threads (at least one, at most
    /// [`Pool::MAX_THREADS`]), named `toolgraft-pool`. More threads than that is an
    /// `InvalidInput` error: each one is an OS thread with its own stack.
    ///
    /// ```
    /// let pool = toolgraft::ext::Pool::new(0)?;
    /// assert_eq!(pool.threads(), 1);
    /// let err = toolgraft::ext::Pool::new(1_000_000).err().unwrap();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new(threads: usize) -> io::Result<Self> {
        if threads > Self::MAX_THREADS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a pool of {threads} threads is over the limit of {}; use fewer threads",
                    Self::MAX_THREADS
                ),
            ));
        }
        let threads = threads.max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("toolgraft-pool")
            .enable_all()
            .build()?;
        Ok(Self {
            name: "pool".to_owned(),
            shared: Arc::new(Shared {
                handle: runtime.handle().clone(),
                runtime: Some(runtime),
                threads,
                jobs: AtomicU64::new(0),
            }),
        })
    }

    /// The same pool under another extension name (branches end in `_<name>`).
    ///
    /// ```
    /// # use toolgraft::Extension;
    /// let gpu = toolgraft::ext::Pool::new(1)?.with_name("gpu");
    /// assert_eq!(gpu.name(), "gpu");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_name(self, name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..self
        }
    }

    /// How many worker threads the pool runs (see [`Pool::new`]).
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// How many jobs have started on the pool's threads so far (see [`Pool`]'s
    /// example).
    pub fn jobs_started(&self) -> u64 {
        self.shared.jobs.load(Ordering::SeqCst)
    }
}

impl Extension for Pool {
    type Kind = Backend;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        &self.name
    }
}

impl<S: Stack> Layer<S> for Pool {
    type Branch = Pooled<S>;

    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Pooled<S> {
        Pooled {
            inner: Arc::new(inner),
            below: below.name.clone(),
            branch: below.branch.clone(),
            pool: self,
        }
    }
}

/// Aborts a pool job when the call waiting for it is dropped.
struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        // A no-op for a job that already finished.
        self.0.abort();
    }
}

/// The branch [`Pool`] mints: calls go to the pool's threads (see [`Pool`]'s
/// example).
pub struct Pooled<S> {
    inner: Arc<S>,
    below: Name,
    branch: Name,
    pool: Pool,
}

impl<S> std::fmt::Debug for Pooled<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pooled")
            .field("below", &self.below)
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl<S> Clone for Pooled<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            below: self.below.clone(),
            branch: self.branch.clone(),
            pool: self.pool.clone(),
        }
    }
}

// A backend runs its layer elsewhere, the same calls.
impl<S: crate::tool::Hinted> crate::tool::Hinted for Pooled<S> {
    type Hints = S::Hints;
}

impl<S: Stack> Stack for Pooled<S> {
    type Input = S::Input;
    type Output = S::Output;

    async fn call(&self, input: S::Input) -> Result<S::Output, ToolError> {
        let departure = Departure::new(&self.pool.name, &self.below)?.with_branch(&self.branch);
        let inner = self.inner.clone();
        let shared = self.pool.shared.clone();
        // The call's context crosses the hop as it is (the chain depth, so that a
        // cycle through a pool still ends; a proxy's route); nothing else of the
        // caller's task does.
        let call = departure.in_process(async move { inner.call(input).await });
        let job = self.pool.shared.handle.spawn(async move {
            shared.jobs.fetch_add(1, Ordering::SeqCst);
            call.await
        });
        // A caller that gives up (a timeout, a fail-fast batch) takes the job with it.
        let _abort_if_dropped = AbortOnDrop(job.abort_handle());
        departure.settle(match job.await {
            Ok(result) => result,
            Err(failure) if failure.is_panic() => Err(departure.panicked(failure.into_panic())),
            Err(_) => Err(departure.failed("the pool shut down before the job finished")),
        })
    }

    fn decode(&self, args: Args) -> Result<S::Input, ArgsError> {
        self.inner.decode(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pool_dropped_inside_async_code_shuts_down_without_panicking() {
        let pool = Pool::new(1).unwrap();
        let probe = pool.clone();
        assert_eq!(probe.shared.handle.spawn(async { 7 }).await.unwrap(), 7);
        drop(pool);
        drop(probe);
    }
}
