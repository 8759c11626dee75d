//! A fleet's limits: `rate_limit`'s and `concurrency`'s counts in the Redis the
//! job backends already use, so that every replica holds one limit (feature
//! `redis`).

use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{AsyncCommands, Script};
use tokio::sync::OnceCell;
use toolgraft::ext::limit::{Admission, Lease, LimitKey, LimitStore, Rate};
use toolgraft::store::{StoreError, StoreFuture};

/// GCRA on the server: the key holds the theoretical arrival time (µs, by the
/// server's clock, so the replicas' clocks do not matter) and expires when it
/// would be the same as none. `0`: admitted; otherwise the wait in µs.
const ADMIT: &str = r"
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local interval = tonumber(ARGV[1])
    local tolerance = tonumber(ARGV[2])
    local tat = tonumber(redis.call('GET', KEYS[1])) or now
    if tat < now then tat = now end
    local wait = tat - tolerance - now
    if wait > 0 then return wait end
    local next = tat + interval
    redis.call('SET', KEYS[1], string.format('%d', next), 'PX', math.ceil((next - now) / 1000) + 1)
    return 0
";

/// A permit: a lease in a sorted set scored by its expiry (ms, by the server's
/// clock); expired leases (a replica that crashed) are purged first. `1`:
/// taken; `0`: all taken.
const ACQUIRE: &str = r"
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
    if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
    local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
    redis.call('PEXPIREAT', KEYS[1], last[2])
    return 1
";

/// Extends a lease the set still has. `1`: renewed; `0`: it expired.
const RENEW: &str = r"
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
    if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
    redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[2])
    local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
    redis.call('PEXPIREAT', KEYS[1], last[2])
    return 1
";

/// [`LimitStore`] on a Redis server: the counts of `rate_limit` and
/// `concurrency` that every replica of a fleet shares, each answer one Lua
/// script run atomically on the server.
///
/// - A rate is GCRA: one key per limit key, `<prefix>:rate:<digest>`, holding
///   the theoretical arrival time by the server's clock (`TIME`), with a `PX`
///   expiry at which it is the same as none.
/// - Permits are leases in a sorted set per limit key,
///   `<prefix>:permits:<digest>`, scored by their expiry: a running call renews
///   its lease, and expired ones (a replica that crashed holding them) are
///   purged before any permit is taken.
///
/// Keys are the limit key's SHA-256 (64 hex digits, whatever a principal's
/// length), under `toolgraft:limit` unless [`with_prefix`](RedisLimits::with_prefix) says.
/// It connects at the first call. A server that cannot be reached **refuses
/// the call** (`ToolError::Overloaded`, transient, its reason naming the
/// server without its credentials), within [`RedisLimits::REFUSED_WITHIN`] of the call: a
/// limit never admits what it cannot count, and never holds a caller past the
/// deadline it would have set itself.
///
/// ```no_run
/// use toolgraft::Registry;
/// use toolgraft::ext::{Concurrency, RateLimit};
/// use toolgraft::runtime::Refined;
/// use toolgraft_jobs::RedisLimits;
/// let limits = RedisLimits::new("redis://127.0.0.1:6379")?;
/// // Typed: 5 a second, bursts of 10, per caller, for the whole fleet.
/// let limit = RateLimit::per_second(5).with_burst(10).with_per_principal().with_store(limits.clone());
/// # let _ = limit;
/// // From manifests: elements' config refines instances that count in Redis.
/// let mut registry = Registry::new();
/// registry
///     .register(Refined::new(RateLimit::per_second(1).with_store(limits.clone()), RateLimit::configured))?
///     .register(Refined::new(Concurrency::at_most(1).with_store(limits), Concurrency::configured))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct RedisLimits {
    url: String,
    prefix: String,
    connection: std::sync::Arc<OnceCell<ConnectionManager>>,
    scripts: std::sync::Arc<Scripts>,
}

struct Scripts {
    admit: Script,
    acquire: Script,
    renew: Script,
}

impl std::fmt::Debug for RedisLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLimits")
            .field("server", &self.server())
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisLimits {
    /// The longest a call waits on a server that stopped answering before it is
    /// refused: a retry's delay, two connection attempts and an answer's
    /// timeout, with room for the scheduler.
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolgraft_jobs::RedisLimits;
    /// // Shorter than the deadlines callers usually set.
    /// assert!(RedisLimits::REFUSED_WITHIN <= Duration::from_secs(3));
    /// ```
    pub const REFUSED_WITHIN: Duration = Duration::from_millis(2_500);

    /// Limits on the Redis server at `url` (`redis://host:port[/db]`), under the
    /// prefix `toolgraft:limit`.
    pub fn new(url: &str) -> Result<Self, redis::RedisError> {
        redis::Client::open(url)?;
        Ok(Self {
            url: url.to_owned(),
            prefix: "toolgraft:limit".to_owned(),
            connection: std::sync::Arc::default(),
            scripts: std::sync::Arc::new(Scripts {
                admit: Script::new(ADMIT),
                acquire: Script::new(ACQUIRE),
                renew: Script::new(RENEW),
            }),
        })
    }

    /// Keys under `prefix` (two fleets on one server, each its own limits).
    ///
    /// ```
    /// let limits = toolgraft_jobs::RedisLimits::new("redis://127.0.0.1:6379")?.with_prefix("shop:limits");
    /// assert!(format!("{limits:?}").contains("shop:limits"));
    /// # Ok::<(), redis::RedisError>(())
    /// ```
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The server's host and port, never its credentials: what errors and
    /// `Debug` show (errors reach callers).
    fn server(&self) -> String {
        toolgraft::error::shorten(crate::address::host_of(&self.url)).into_owned()
    }

    fn key(&self, kind: &str, key: &LimitKey) -> String {
        format!("{}:{kind}:{}", self.prefix, key.hex())
    }

    async fn connection(&self) -> Result<ConnectionManager, StoreError> {
        let connect = self
            .connection
            .get_or_try_init(|| crate::store_connection::connect(&self.url))
            .await;
        connect.cloned().map_err(|error| {
            StoreError::new(format!(
                "cannot reach the Redis at `{}`: {error}",
                self.server()
            ))
        })
    }

    fn failed(&self, error: &redis::RedisError) -> StoreError {
        StoreError::new(format_args!(
            "the Redis at `{}` answered: {error}",
            self.server()
        ))
        .with_source(error.clone())
    }
}

/// A permit the server may have taken for a caller that is gone: an `acquire`
/// dropped while its script is in flight (the caller gave up, a timeout) or
/// whose answer was lost (a connection cut after the script ran). Given back at
/// once, or it would hold a permit nobody uses until its lease expires. The
/// release goes down the same multiplexed connection, after the script.
struct InFlight {
    store: RedisLimits,
    lease: Option<Lease>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(self.store.release(lease));
        }
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl LimitStore for RedisLimits {
    fn admit<'a>(&'a self, key: &'a LimitKey, rate: Rate) -> StoreFuture<'a, Admission> {
        Box::pin(async move {
            let mut connection = self.connection().await?;
            let interval = micros(rate.interval());
            // The rate says the rule (its interval and tolerance), as it does
            // for the in-process store: this script only keeps the count.
            let tolerance = micros(rate.tolerance());
            let wait: u64 = self
                .scripts
                .admit
                .key(self.key("rate", key))
                .arg(interval)
                .arg(tolerance)
                .invoke_async(&mut connection)
                .await
                .map_err(|error| self.failed(&error))?;
            Ok(match wait {
                0 => Admission::Admitted,
                wait => Admission::Refused {
                    retry_after: Duration::from_micros(wait),
                },
            })
        })
    }

    fn acquire<'a>(
        &'a self,
        key: &'a LimitKey,
        max: u32,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(async move {
            let mut connection = self.connection().await?;
            let id = ulid::Ulid::generate().to_string();
            let mut in_flight = InFlight {
                store: self.clone(),
                lease: Some(Lease::new(key.clone(), id.clone())),
            };
            let taken: u8 = self
                .scripts
                .acquire
                .key(self.key("permits", key))
                .arg(max)
                .arg(millis(ttl))
                .arg(&id)
                .invoke_async(&mut connection)
                .await
                .map_err(|error| self.failed(&error))?;
            let lease = in_flight.lease.take();
            Ok(lease.filter(|_| taken == 1))
        })
    }

    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut connection = self.connection().await?;
            let renewed: u8 = self
                .scripts
                .renew
                .key(self.key("permits", lease.key()))
                .arg(millis(ttl))
                .arg(lease.id())
                .invoke_async(&mut connection)
                .await
                .map_err(|error| self.failed(&error))?;
            Ok(renewed == 1)
        })
    }

    fn release(&self, lease: Lease) -> StoreFuture<'static, ()> {
        let store = self.clone();
        Box::pin(async move {
            let mut connection = store.connection().await?;
            let set = store.key("permits", lease.key());
            connection
                .zrem::<_, _, ()>(set, lease.id())
                .await
                .map_err(|error| store.failed(&error))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgraft::Name;

    #[test]
    fn errors_and_debug_name_the_server_never_its_password_and_keys_are_bounded() {
        let limits = RedisLimits::new("redis://:s3cret@cache.internal:6379/2").unwrap();
        assert_eq!(limits.server(), "cache.internal:6379");
        assert!(!format!("{limits:?}").contains("s3cret"));
        let hostile = toolgraft::context::Principal::new("m".repeat(1 << 20));
        let key = LimitKey::new(Name::new("x_rate_limit").unwrap(), Some(hostile));
        assert_eq!(
            limits.key("rate", &key).len(),
            "toolgraft:limit:rate:".len() + 64
        );
    }

    #[tokio::test]
    async fn an_unreachable_server_is_an_error_naming_it_not_an_admission() {
        // A port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let limits = RedisLimits::new(&format!("redis://:pw@127.0.0.1:{port}")).unwrap();
        let key = LimitKey::new(Name::new("x_rate_limit").unwrap(), None);
        let rate = Rate::new(1, Duration::from_secs(1)).unwrap();
        let error = limits.admit(&key, rate).await.unwrap_err().to_string();
        assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
        assert!(!error.contains("pw"), "{error}");
        assert!(
            limits
                .acquire(&key, 1, Duration::from_secs(5))
                .await
                .is_err()
        );
    }
}
