//! `once`'s store in the job engine: a call's claim and its first outcome in
//! the tier's own database, so that every worker of a fleet finds them.

use std::time::Duration;

use toolgraft::ext::once::{Claim, OutcomeKey, OutcomeStore};
use toolgraft::extension::ConfigError;
use toolgraft::store::{StoreError, StoreFuture};

use crate::remote::Remote;
use crate::tier::{Broker, TierError};

/// [`OutcomeStore`] in the job engine a [`Remote`] uses (Redis, PostgreSQL or
/// an SQLite file): what [`OncePerKey`](toolgraft::ext::OncePerKey) keeps, shared
/// by every worker and caller of the engine. Inside a `remote`, it is what makes
/// a job run again answer its first run's outcome: a worker killed after the
/// body's effect and before its reply leaves the outcome recorded.
///
/// - Redis: a key per call, `toolgraft:once:<digest>`, claimed and read in
///   one script by the server's clock, expiring with the keep.
/// - PostgreSQL: a row per call in `toolgraft.outcomes`, claimed in one
///   statement by the server's clock; the vacuum removes expired rows.
/// - SQLite: a row per call in the file's `toolgraft_outcomes`.
///
/// The engine must keep what it is told for `once` to hold across its
/// restarts: a Redis without persistence forgets the outcomes (and a call then
/// runs again). In the SQL tiers, expired keys are removed by the workers'
/// vacuum (Redis expires them itself): an engine no worker serves keeps them.
///
/// ```no_run
/// use toolgraft::ext::OncePerKey;
/// use toolgraft_jobs::{JobOutcomes, Remote};
/// let remote = Remote::new("postgres://toolgraft@db:5432/jobs")?;
/// // `[once, remote]`: the key's outcome in the engine the job runs on.
/// let once = OncePerKey::default().with_store(remote.outcomes());
/// // Or the same engine, named by its URL.
/// let same = JobOutcomes::new("postgres://toolgraft@db:5432/jobs")?;
/// # let _ = (once, same);
/// # Ok::<(), toolgraft::extension::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct JobOutcomes {
    remote: Remote,
}

impl std::fmt::Debug for JobOutcomes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobOutcomes")
            .field("engine", &self.remote.server())
            .finish()
    }
}

impl JobOutcomes {
    /// The store in the job engine at `url` (as [`Remote::new`] takes it).
    pub fn new(url: impl Into<String>) -> Result<Self, ConfigError> {
        Remote::new(url).map(Self::of)
    }

    fn of(remote: Remote) -> Self {
        Self { remote }
    }

    /// The engine's connection (made at the first use).
    async fn broker(&self) -> Result<Broker, StoreError> {
        self.remote.broker().await.map_err(|e| self.refused(e))
    }

    fn refused(&self, error: TierError) -> StoreError {
        StoreError::new(format_args!(
            "the job engine at `{}`: {error}",
            self.remote.server()
        ))
        .with_source(error)
    }
}

impl Remote {
    /// `once`'s store in this backend's job engine (see [`JobOutcomes`]).
    ///
    /// ```
    /// use toolgraft::ext::OncePerKey;
    /// use toolgraft_jobs::Remote;
    /// let remote = Remote::new("sqlite:///var/lib/toolgraft/jobs.db")?;
    /// let once = OncePerKey::default().with_store(remote.outcomes());
    /// # let _ = once;
    /// # Ok::<(), toolgraft::extension::ConfigError>(())
    /// ```
    pub fn outcomes(&self) -> JobOutcomes {
        JobOutcomes::of(self.clone())
    }
}

impl OutcomeStore for JobOutcomes {
    fn claim<'a>(
        &'a self,
        key: &'a OutcomeKey,
        lease: Duration,
        keep: Duration,
    ) -> StoreFuture<'a, Claim> {
        Box::pin(async move {
            self.broker()
                .await?
                .claim_outcome(key.digest(), lease, keep)
                .await
                .map_err(|e| self.refused(e))
        })
    }

    fn record<'a>(
        &'a self,
        key: &'a OutcomeKey,
        outcome: &'a str,
        keep: Duration,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.broker()
                .await?
                .record_outcome(key.digest(), outcome, keep)
                .await
                .map_err(|e| self.refused(e))
        })
    }

    fn release<'a>(&'a self, key: &'a OutcomeKey) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.broker()
                .await?
                .release_outcome(key.digest())
                .await
                .map_err(|e| self.refused(e))
        })
    }
}
