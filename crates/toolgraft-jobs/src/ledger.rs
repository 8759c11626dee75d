//! A fleet's approval ledger: `approve`'s used approvals in the Redis the job
//! backends already use, so an approval redeemed on one replica is spent on
//! every other (feature `redis`).

use futures_util::future::BoxFuture;
use redis::aio::ConnectionManager;
use tokio::sync::OnceCell;
use toolgraft::ext::approve::Ledger;

/// [`Ledger`] on a Redis server: one key per used approval,
/// `toolgraft:approval:<id>`, written only if absent (atomic on the server) and
/// gone when the approval expires. Connects at the first redemption; a server
/// that cannot be reached refuses the call (the ledger cannot say).
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
}

impl std::fmt::Debug for RedisLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLedger")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl RedisLedger {
    /// A ledger on the Redis server at `url` (`redis://host:port[/db]`).
    pub fn new(url: &str) -> Result<Self, redis::RedisError> {
        redis::Client::open(url)?;
        Ok(Self {
            url: url.to_owned(),
            connection: OnceCell::new(),
        })
    }
}

impl Ledger for RedisLedger {
    fn redeem(&self, id: &str, expires: u64, now: u64) -> BoxFuture<'_, Result<bool, String>> {
        let key = format!("toolgraft:approval:{id}");
        Box::pin(async move {
            let connection = self
                .connection
                .get_or_try_init(|| apalis_redis::connect(self.url.clone()))
                .await
                .map_err(|error| {
                    format!(
                        "cannot reach the approval ledger at `{}`: {error}",
                        self.url
                    )
                })?;
            // Kept a second past the expiry: an approval is never taken for new
            // while it could still be opened.
            let keep = expires.saturating_sub(now).saturating_add(1);
            let written: Option<String> = redis::cmd("SET")
                .arg(&key)
                .arg(now)
                .arg("NX")
                .arg("EX")
                .arg(keep)
                .query_async(&mut connection.clone())
                .await
                .map_err(|error| format!("the approval ledger failed: {error}"))?;
            Ok(written.is_some())
        })
    }
}
