//! The connection of the stores a call waits on inline (`RedisLimits`,
//! `RedisLedger`): a lost server is retried once, each attempt and each answer
//! bounded, so that while it is down a call is refused within about 2 s
//! (`RedisLimits::REFUSED_WITHIN`). The connection manager's own default, six
//! retries with backoff, held every call about 9.5 s, past most callers'
//! deadlines.

use std::time::Duration;

use redis::RedisResult;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// How long the first connection may take; the call is refused past it (the
/// Redis tier's first connection is bounded by it too).
pub(crate) const CONNECT_WITHIN: Duration = Duration::from_secs(2);

fn config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(200))
        .set_connection_timeout(Some(Duration::from_millis(500)))
        .set_response_timeout(Some(Duration::from_secs(1)))
}

/// A connection to the Redis at `url`, made within [`CONNECT_WITHIN`].
pub(crate) async fn connect(url: &str) -> RedisResult<ConnectionManager> {
    let connect = async {
        redis::Client::open(url)?
            .get_connection_manager_with_config(config())
            .await
    };
    tokio::time::timeout(CONNECT_WITHIN, connect)
        .await
        .unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {CONNECT_WITHIN:?}"),
            )
            .into())
        })
}
