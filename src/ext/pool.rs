//! `pool`: the in-process backend. The layer below runs on a dedicated pool of
//! worker threads with its own runtime, so nothing of the caller's task (its
//! task-locals, its thread-locals) is there.
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

use crate::error::panic_message;
use crate::error::{ArgsError, ToolError};
use crate::extension::{Extension, Layer, LayerInput};
use crate::kind::Backend;
use crate::kind::property::Anywhere;
use crate::name::Name;
use crate::schema::Args;
use crate::stack::Stack;

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
    /// let gpu = toolgraft::ext::Pool::new(1)?.named("gpu");
    /// assert_eq!(gpu.name(), "gpu");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn named(self, name: impl Into<String>) -> Self {
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
            pool: self.pool.clone(),
        }
    }
}

impl<S: Stack> Stack for Pooled<S> {
    type Input = S::Input;
    type Output = S::Output;

    async fn call(&self, input: S::Input) -> Result<S::Output, ToolError> {
        if let Some(outside) = crate::context::body_local() {
            return Err(outside_relocation(&outside, &self.below, &self.pool.name));
        }
        let inner = self.inner.clone();
        let shared = self.pool.shared.clone();
        // toolgraft's own call context crosses the hop (chain depth, so that a
        // cycle through a pool still ends); nothing else of the caller's task does.
        let depth = crate::context::current();
        let job = self.pool.shared.handle.spawn(async move {
            shared.jobs.fetch_add(1, Ordering::SeqCst);
            crate::context::at(depth, inner.call(input)).await
        });
        // A caller that gives up (a timeout, a fail-fast batch) takes the job with it.
        let _abort_if_dropped = AbortOnDrop(job.abort_handle());
        match job.await {
            Ok(result) => result,
            Err(failure) if failure.is_panic() => Err(ToolError::Panicked {
                tool: self.below.clone(),
                message: panic_message(failure.into_panic().as_ref()),
            }),
            Err(_) => Err(ToolError::Relocation {
                tool: self.below.clone(),
                backend: Name::unchecked(&self.pool.name),
                reason: "the pool shut down before the job finished".to_owned(),
            }),
        }
    }

    fn decode(&self, args: Args) -> Result<S::Input, ArgsError> {
        self.inner.decode(args)
    }
}

/// The refusal of a backend reached from inside a body-local layer's call: the
/// layer would not apply to the body it relocates. Combos cannot be written so (the
/// typestate and the engine refuse them); code can, when a tool body or an
/// extension calls a branch that relocates.
pub(crate) fn outside_relocation(
    outside: &crate::context::BodyLocalScope,
    below: &Name,
    backend: &str,
) -> ToolError {
    ToolError::Refused {
        tool: below.clone(),
        extension: Name::unchecked(backend),
        reason: format!(
            "`{}` (in `{}`) needs to run beside the tool body, but this call would run the body of `{below}` elsewhere from inside it, where `{}` does not apply; place `{}` inside `{backend}` in one combo (rule `locality-inside-relocation` in `toolgraft::rulebook`)",
            outside.extension, outside.branch, outside.extension, outside.extension
        ),
    }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::bind::Running;
    use crate::ext::{Proxy, ProxyParams, proxy};
    use crate::stack::params::WithParams;
    use crate::tool::Tool;

    #[derive(Deserialize, Serialize, JsonSchema)]
    struct Fetch {
        url: String,
    }

    /// The bug the typestate prevents, built by hand below the typestate: with
    /// `[pool, proxy]` the proxy would set its route around the submitting side
    /// only, and the body, on a pool thread, would never see it. The pool refuses
    /// to relocate from inside the proxy's call.
    #[tokio::test]
    async fn a_route_set_around_the_submitting_side_is_refused_at_run_time() {
        let fetch = Tool::builder()
            .name("fetch")
            .description("Report the route the body sees.")
            .body(|_: Fetch| async { Ok(proxy::current_route()) })
            .build()
            .unwrap();
        let base = Running::of_base(fetch.spec());
        let pool_branch = Name::new("fetch_pool").unwrap();
        let proxy_branch = Name::new("fetch_pool_proxy").unwrap();

        let pooled = Pool::new(1)
            .unwrap()
            .layer(fetch.clone(), &base.layer_input(&pool_branch));
        let below_proxy = Running {
            name: pool_branch.clone(),
            ..base.clone()
        };
        let misplaced =
            Proxy::allow(["egress-a"]).layer(pooled, &below_proxy.layer_input(&proxy_branch));

        let input = WithParams::new(ProxyParams::default(), Fetch { url: "/".into() });
        let refused = misplaced.call(input).await.unwrap_err();
        assert!(
            matches!(&refused, ToolError::Refused { extension, .. } if extension.as_str() == "pool"),
            "{refused}"
        );
        assert!(
            refused
                .to_string()
                .contains("`proxy` (in `fetch_pool_proxy`)"),
            "{refused}"
        );

        // The right order, `[proxy, pool]`, carries the route to the body.
        let proxied = Proxy::allow(["egress-a"]).layer(fetch, &base.layer_input(&pool_branch));
        let pooled = Pool::new(1)
            .unwrap()
            .layer(proxied, &below_proxy.layer_input(&proxy_branch));
        let input = WithParams::new(ProxyParams::default(), Fetch { url: "/".into() });
        assert_eq!(
            pooled.call(input).await.unwrap().as_deref(),
            Some("egress-a")
        );
    }

    #[tokio::test]
    async fn a_pool_dropped_inside_async_code_shuts_down_without_panicking() {
        let pool = Pool::new(1).unwrap();
        let probe = pool.clone();
        assert_eq!(probe.shared.handle.spawn(async { 7 }).await.unwrap(), 7);
        drop(pool);
        drop(probe);
    }
}
