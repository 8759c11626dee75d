//! A fleet's approval ledger: `approve`'s used approvals in the Redis the job
//! backends already use, so an approval redeemed on one replica is spent on
//! every other (feature `redis`).

use redis::aio::ConnectionManager;
use tokio::sync::OnceCell;
use toolgraft::ext::approve::Ledger;
use toolgraft::store::{StoreError, StoreFuture};

/// [`Ledger`] on a Redis server: one key per used approval,
/// `toolgraft:approval:<id>`, written only if absent (atomic on the server) and
/// gone when the approval expires. Connects at the first redemption; a server
/// that cannot be reached refuses the call (the ledger cannot say), within
/// about 2 s, as [`RedisLimits`](crate::RedisLimits) does.
///
/// **The server must persist what it is told** (the append-only file on,
/// `appendonly yes`; with `appendfsync always` nothing acknowledged is lost,
/// with `everysec` up to a second of it): a Redis that restarts without it
/// forgets the spent approvals, and an approval not yet expired is then
/// accepted a second time. At its first connection the ledger reads the
/// server's `INFO persistence` and logs a warning when the append-only file is
/// off (the fsync policy it does not see).
///
/// ```no_run
/// use toolgraft::ext::approve::{Approve, SealKey};
/// use toolgraft_jobs::RedisLedger;
/// let key = SealKey::new(std::env::var("TOOLGRAFT_APPROVAL_KEY")?.into_bytes())?;
/// let approve = Approve::new(key).with_ledger(RedisLedger::new("redis://127.0.0.1:6379")?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisLedger {
    url: String,
    connection: OnceCell<ConnectionManager>,
    /// Whether the server's persistence was looked at (once).
    persistence_checked: OnceCell<()>,
}

impl std::fmt::Debug for RedisLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLedger")
            .field("server", &self.server())
            .finish_non_exhaustive()
    }
}

/// How long a used approval's key outlives its expiry: a replica whose clock is
/// behind the redeeming one's by up to this much still finds it used.
const CLOCK_SKEW: u64 = 300;

impl RedisLedger {
    /// The server's host and port, never its credentials: what errors and
    /// `Debug` show (errors reach callers).
    fn server(&self) -> String {
        crate::address::host_of(&self.url).to_owned()
    }

    /// A ledger on the Redis server at `url` (`redis://host:port[/db]`).
    pub fn new(url: &str) -> Result<Self, redis::RedisError> {
        redis::Client::open(url)?;
        Ok(Self {
            url: url.to_owned(),
            connection: OnceCell::new(),
            persistence_checked: OnceCell::new(),
        })
    }
}

impl Ledger for RedisLedger {
    fn redeem(&self, id: &str, expires: u64, now: u64) -> StoreFuture<'_, bool> {
        let key = format!("toolgraft:approval:{id}");
        Box::pin(async move {
            let connection = self
                .connection
                .get_or_try_init(|| crate::store_connection::connect(&self.url))
                .await
                .map_err(|error| {
                    StoreError::new(format_args!(
                        "cannot reach the Redis at `{}`: {error}",
                        self.server()
                    ))
                    .with_source(error.clone())
                })?;
            self.persistence_checked
                .get_or_init(|| async {
                    let info: Result<String, _> = redis::cmd("INFO")
                        .arg("persistence")
                        .query_async(&mut connection.clone())
                        .await;
                    if let Ok(info) = info
                        && !persists(&info)
                    {
                        tracing::warn!(
                            server = %self.server(),
                            "the approval ledger's Redis keeps no append-only file: a restart \
                             forgets the spent approvals, and one not yet expired could be \
                             accepted again (turn `appendonly` on)"
                        );
                    }
                })
                .await;
            // Kept past the expiry: an approval is never taken for new while a
            // replica (its clock a little behind) could still open it.
            let keep = expires.saturating_sub(now).saturating_add(CLOCK_SKEW);
            let written: Option<String> = redis::cmd("SET")
                .arg(&key)
                .arg(now)
                .arg("NX")
                .arg("EX")
                .arg(keep)
                .query_async(&mut connection.clone())
                .await
                .map_err(|error| {
                    StoreError::new(format_args!("Redis answered: {error}")).with_source(error)
                })?;
            Ok(written.is_some())
        })
    }
}

/// Whether a server's `INFO persistence` says it keeps an append-only file
/// (snapshots alone lose what came after the last one).
fn persists(info: &str) -> bool {
    info.lines().any(|line| line.trim() == "aof_enabled:1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_append_only_file_counts_as_persisting() {
        assert!(persists("# Persistence\r\nloading:0\r\naof_enabled:1\r\n"));
        assert!(!persists(
            "# Persistence\r\nrdb_last_save_time:1\r\naof_enabled:0\r\n"
        ));
        assert!(!persists(""));
    }

    #[test]
    fn errors_and_debug_name_the_server_never_its_password() {
        for (url, server) in [
            (
                "redis://:s3cret@cache.internal:6379/2",
                "cache.internal:6379",
            ),
            ("redis://user:s3cret@10.0.0.5:6380", "10.0.0.5:6380"),
            ("redis://127.0.0.1:6379", "127.0.0.1:6379"),
        ] {
            let ledger = RedisLedger::new(url).unwrap();
            assert_eq!(ledger.server(), server);
            assert!(!format!("{ledger:?}").contains("s3cret"));
        }
    }
}
