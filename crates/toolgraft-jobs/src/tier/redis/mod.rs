//! The Redis tier (`redis://host:port[/db]`, Redis 7 or later, standalone):
//! apalis-redis carries the jobs, a list per caller its replies, a hash per
//! submitted job its record, and pub/sub the wake-ups, the withdrawals and the
//! fleet's announcements.

use std::sync::{Arc, Weak};
use std::time::Duration;

use apalis::prelude::{Monitor, Task, TaskSink};
use apalis_redis::{Config, RedisStorage};
use futures_util::StreamExt;
use redis::AsyncCommands;
use redis::aio::{ConnectionManager, MultiplexedConnection};
use tokio::sync::{Mutex, Notify};
use tokio::task::JoinHandle;
use toolgraft::ext::once::Claim;

use super::super::job::{Job, Message, is_job_key, job_key};
use super::super::withdrawals::Withdrawals;
use super::{
    Answer, Cancel, Engine, RECONNECT_FIRST, RECONNECT_LAST, RunJob, STEADY_SUBSCRIPTION, Stored,
    Ticks, Tier, TierError, VACUUM_BATCH, Waiting, decode_replies, decode_reply, millis,
};
use crate::address::server_of;
use crate::clock::now_ms;
use crate::store_connection::CONNECT_WITHIN;

mod scripts;

/// Whether this build has the tier.
pub(super) const BUILT: bool = true;

pub(super) async fn connect(
    url: &str,
    queue: &str,
    engine: Engine,
) -> Result<Arc<dyn Tier>, String> {
    let shown = server_of(url);
    let failed = |error: redis::RedisError| format!("cannot connect to `{shown}`: {error}");
    let client = redis::Client::open(url).map_err(failed)?;
    // One connection of its own first, without the connection manager's
    // retries: a server that is not there, or that speaks TLS where the URL
    // does not (or the other way round), or refuses the certificate or the
    // password, is an error now, not after about 9.5 s of retries.
    let probing = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_WITHIN))
        .set_response_timeout(Some(CONNECT_WITHIN));
    let mut probe = client
        .get_multiplexed_async_connection_with_config(&probing)
        .await
        .map_err(|error| unanswered(&shown, error))?;
    // HELLO (any client may send it, where INFO is an ACL's "dangerous" one):
    // the server's version and mode.
    let hello: Vec<redis::Value> =
        redis::cmd("HELLO")
            .query_async(&mut probe)
            .await
            .map_err(|error| match error.is_timeout() || error.is_io_error() {
                true => unanswered(&shown, error),
                false => {
                    format!("`{shown}`: the job engine needs Redis 7.0 or later (HELLO: {error})")
                }
            })?;
    suitable(&hello_fields(&hello)).map_err(|why| format!("`{shown}`: {why}"))?;
    drop(probe);
    let commands = apalis_redis::connect(url).await.map_err(failed)?;
    let storage = RedisStorage::new(commands.clone()).with_config(config(queue, engine));
    Ok(Arc::new(Redis {
        storage,
        wake_channel: format!("toolgraft:wake:{queue}"),
        withdrawn_channel: format!("toolgraft:withdrawn:{queue}"),
        finished: format!("toolgraft:finished:{queue}"),
        fleet: FleetKeys {
            generation: format!("toolgraft:fleet:{queue}:generation"),
            state: format!("toolgraft:fleet:{queue}:state"),
            members: format!("toolgraft:fleet:{queue}:members"),
            channel: format!("toolgraft:fleet:{queue}"),
        },
        queue: queue.to_owned(),
        engine,
        commands,
        client,
        blocking: Arc::default(),
    }))
}

struct Redis {
    storage: RedisStorage<Job>,
    /// The pub/sub channel that wakes the queue's idle workers. (apalis-redis
    /// 1.0's push publishes a job as available only when it has no run time,
    /// and it gives every job one: its own event never comes.)
    wake_channel: String,
    /// The pub/sub channel that announces the queue's withdrawn jobs.
    withdrawn_channel: String,
    /// Jobs answered, by when (ms): what the vacuum removes once old.
    finished: String,
    fleet: FleetKeys,
    queue: String,
    engine: Engine,
    commands: ConnectionManager,
    client: redis::Client,
    /// `BLMPOP` blocks its connection: collecting replies gets one of its own,
    /// without the client's default 500 ms response timeout. Only the reply
    /// listener takes it, so the lock is never contended.
    blocking: Arc<Mutex<Option<MultiplexedConnection>>>,
}

/// The keys of the queue's fleet: its generation counter, its state (the
/// generation and its manifest), its members' reports, its announcements.
struct FleetKeys {
    generation: String,
    state: String,
    members: String,
    channel: String,
}

/// The key that says the caller withdrew `job` of `queue`.
fn withdrawn_key(queue: &str, job: &str) -> String {
    format!("toolgraft:withdrawn:{queue}:{job}")
}

/// Why a first connection to `shown` failed: a server that did not answer in
/// time is told apart (a TLS port reached with `redis://` never answers).
fn unanswered(shown: &str, error: redis::RedisError) -> String {
    if error.is_timeout() {
        return format!(
            "`{shown}` did not answer within {CONNECT_WITHIN:?} (a server that speaks TLS \
             needs `rediss://`, with the feature `tls`)"
        );
    }
    format!("cannot connect to `{shown}`: {error}")
}

/// HELLO's answer (RESP2: field, value, field, value...) as `field:value`
/// lines, the fields that are text or numbers.
fn hello_fields(hello: &[redis::Value]) -> String {
    let text = |value: &redis::Value| match value {
        redis::Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        redis::Value::SimpleString(text) => Some(text.clone()),
        redis::Value::Int(number) => Some(number.to_string()),
        _ => None,
    };
    hello
        .chunks_exact(2)
        .filter_map(|pair| Some(format!("{}:{}\n", text(&pair[0])?, text(&pair[1])?)))
        .collect()
}

/// The server, from its HELLO (`version`, `mode`), is one this tier works
/// with: Redis 7 or later (replies are read with `BLMPOP`), standalone (the
/// scripts touch several keys of a queue, apalis-redis's among them, which no
/// hash tag keeps in one slot of a cluster; a Sentinel serves no data).
fn suitable(hello: &str) -> Result<(), String> {
    let field = |name: &str| {
        hello
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    match field("mode") {
        Some("standalone") => {}
        Some("cluster") => {
            return Err(
                "a Redis Cluster node: the job engine's scripts move several keys of a \
                 queue at once (apalis-redis's among them), which a cluster keeps in different \
                 slots; use a standalone server (or a primary with replicas)"
                    .into(),
            );
        }
        Some(mode) => {
            return Err(format!(
                "a Redis in `{mode}` mode: the job engine needs a standalone server (a Sentinel \
                 serves no data: connect to the primary it names)"
            ));
        }
        None => return Err("the server did not say its mode (HELLO has no `mode`)".into()),
    }
    let version = field("version").unwrap_or("unknown");
    let major = version
        .split('.')
        .next()
        .and_then(|major| major.parse::<u32>().ok());
    match major {
        Some(major) if major >= 7 => Ok(()),
        _ => Err(format!(
            "Redis {version}: the job engine needs Redis 7.0 or later (it reads replies with BLMPOP)"
        )),
    }
}

/// The engine's settings, and no pub/sub events from apalis-redis's scripts:
/// nothing here listens to them (a job's wake-up is this tier's own), and each
/// is server work at every lease, result and beat.
fn config(queue: &str, engine: Engine) -> Config {
    engine_config!(Config, queue, engine).emit_events(false)
}

fn now_s() -> u64 {
    now_ms() / 1000
}

/// A call's key for `once`: the engine's, not a queue's.
fn outcome_key(digest: &str) -> String {
    format!("toolgraft:once:{digest}")
}

fn text(error: impl Into<TierError>) -> TierError {
    error.into()
}

impl Redis {
    /// Wakes the queue's idle workers. A lost wake-up only delays the job to
    /// the workers' next poll, so a failure is logged, not returned.
    async fn wake_workers(&self) {
        let mut commands = self.commands.clone();
        if let Err(error) = commands.publish::<_, _, ()>(&self.wake_channel, "").await {
            tracing::warn!(%error, "could not wake the workers; they find the job at their next poll");
        }
    }
}

impl Tier for Redis {
    fn enqueue(&self, task: Task<Job>) -> Answer<'_, ()> {
        Box::pin(async move {
            self.storage
                .clone()
                .push_task(task)
                .await
                .map_err(TierError::engine)?;
            self.wake_workers().await;
            Ok(())
        })
    }

    fn serve(&self, worker: &str, ticks: Ticks, concurrency: usize, run: RunJob) -> Monitor {
        serve!(self.storage.clone(), worker, ticks, concurrency, run)
    }

    fn listen(&self, wake: Arc<Notify>, withdrawals: Arc<Withdrawals>) -> JoinHandle<()> {
        let client = self.client.clone();
        let channels = [self.wake_channel.clone(), self.withdrawn_channel.clone()];
        let mut commands = self.commands.clone();
        let queue = self.queue.clone();
        tokio::spawn(async move {
            let mut backoff = RECONNECT_FIRST;
            loop {
                match client.get_async_pubsub().await {
                    Ok(mut pubsub) => match pubsub.subscribe(&channels).await {
                        Ok(()) => {
                            let subscribed = std::time::Instant::now();
                            // Jobs may have come while nobody listened, and
                            // running jobs may have been withdrawn.
                            wake.notify_one();
                            let running = withdrawals.listening();
                            // One pipeline for them all; if it fails, a running
                            // job's withdrawal could go unheard: listen again.
                            let mut exists = redis::pipe();
                            for job in &running {
                                exists.exists(withdrawn_key(&queue, job));
                            }
                            let looked: Result<Vec<bool>, _> = match running.is_empty() {
                                true => Ok(Vec::new()),
                                false => exists.query_async(&mut commands).await,
                            };
                            match looked {
                                Ok(looked) => {
                                    for (job, withdrawn) in running.iter().zip(looked) {
                                        if withdrawn {
                                            withdrawals.heard(job);
                                        }
                                    }
                                    let mut messages = pubsub.on_message();
                                    while let Some(message) = messages.next().await {
                                        if message.get_channel_name() != channels[1] {
                                            wake.notify_one();
                                        } else if let Ok(job) =
                                            std::str::from_utf8(message.get_payload_bytes())
                                        {
                                            // `heard` keeps no id longer than a job's.
                                            withdrawals.heard(job);
                                        }
                                    }
                                    tracing::warn!("the wake-up channel closed; listening again");
                                }
                                Err(error) => tracing::warn!(
                                    %error,
                                    "cannot look up the running jobs' withdrawals; listening again"
                                ),
                            }
                            withdrawals.deaf();
                            // The backoff starts over only after a subscription
                            // that lasted: one cut at once, again and again (a
                            // flood past the output buffer's limit), backs off.
                            if subscribed.elapsed() >= STEADY_SUBSCRIPTION {
                                backoff = RECONNECT_FIRST;
                            }
                        }
                        Err(error) => {
                            tracing::warn!(%error, "cannot subscribe to wake-ups; retrying")
                        }
                    },
                    Err(error) => {
                        tracing::warn!(%error, "cannot connect for wake-ups; retrying")
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RECONNECT_LAST);
            }
        })
    }

    fn vacuum(&self) -> Answer<'_, u64> {
        Box::pin(async move {
            let now = now_ms();
            let cutoff = now.saturating_sub(self.engine.keep_finished().as_millis() as u64);
            redis::Script::new(scripts::VACUUM)
                .key(&self.finished)
                .key(format!("{}:data", self.queue))
                .key(format!("{}:done", self.queue))
                .key(format!("{}:dead", self.queue))
                .arg(cutoff)
                .arg(format!("{}:meta:", self.queue))
                .arg(VACUUM_BATCH)
                .invoke_async(&mut self.commands.clone())
                .await
                .map_err(text)
        })
    }

    fn take_replies<'a>(&'a self, reply_to: &'a str, wait: Duration) -> Answer<'a, Vec<Message>> {
        Box::pin(async move {
            let mut slot = self.blocking.lock().await;
            let connection = match &mut *slot {
                Some(connection) => connection,
                None => {
                    // Longer than the longest BLMPOP, so a connection that died
                    // silently fails instead of hanging the router.
                    let config = redis::AsyncConnectionConfig::new()
                        .set_response_timeout(Some(wait + Duration::from_secs(5)));
                    let connection = self
                        .client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await
                        .map_err(text)?;
                    slot.insert(connection)
                }
            };
            // Every message waiting, up to 256, in one round trip.
            let popped: Option<(String, Vec<String>)> = match redis::cmd("BLMPOP")
                .arg(wait.as_secs_f64())
                .arg(1)
                .arg(reply_to)
                .arg("LEFT")
                .arg("COUNT")
                .arg(256)
                .query_async(connection)
                .await
            {
                Ok(popped) => popped,
                Err(error) => {
                    // A multiplexed connection does not come back: open a new one
                    // next time.
                    *slot = None;
                    return Err(error.into());
                }
            };
            let bodies = popped.map(|(_, bodies)| bodies).unwrap_or_default();
            Ok(decode_replies(bodies))
        })
    }

    fn withdraw<'a>(&'a self, job: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            let retention = self.engine.retention.as_secs();
            // Remembered for the workers that look it up (a job sent while they
            // were not listening), announced to the ones listening.
            redis::pipe()
                .set_ex(withdrawn_key(&self.queue, job), 1, retention.max(1))
                .ignore()
                .publish(&self.withdrawn_channel, job)
                .ignore()
                .query_async::<()>(&mut self.commands.clone())
                .await
                .map_err(text)
        })
    }

    fn is_withdrawn<'a>(&'a self, job: &'a str) -> Answer<'a, bool> {
        Box::pin(async move {
            self.commands
                .clone()
                .exists::<_, bool>(withdrawn_key(&self.queue, job))
                .await
                .map_err(text)
        })
    }

    fn count_run<'a>(&'a self, call: &'a str) -> Answer<'a, u64> {
        Box::pin(async move {
            let key = format!("toolgraft:runs:{}:{call}", self.queue);
            let retention =
                i64::try_from(self.engine.retention.as_secs().max(1)).unwrap_or(i64::MAX);
            let (runs,): (u64,) = redis::pipe()
                .atomic()
                .incr(&key, 1)
                .expire(&key, retention)
                .ignore()
                .query_async(&mut self.commands.clone())
                .await
                .map_err(text)?;
            Ok(runs)
        })
    }

    fn claim_outcome<'a>(
        &'a self,
        key: &'a str,
        lease: Duration,
        keep: Duration,
    ) -> Answer<'a, Claim> {
        Box::pin(async move {
            let (state, held): (String, String) = redis::Script::new(scripts::CLAIM_OUTCOME)
                .key(outcome_key(key))
                .arg(millis(lease))
                .arg(millis(keep.max(lease)))
                .invoke_async(&mut self.commands.clone())
                .await
                .map_err(text)?;
            Ok(match state.as_str() {
                "granted" => Claim::Granted,
                "answered" => Claim::Answered(held),
                "running" => Claim::Running {
                    left: Duration::from_millis(held.parse().unwrap_or(1)),
                },
                _ => Claim::Lapsed,
            })
        })
    }

    fn record_outcome<'a>(
        &'a self,
        key: &'a str,
        outcome: &'a str,
        keep: Duration,
    ) -> Answer<'a, ()> {
        Box::pin(async move {
            redis::cmd("SET")
                .arg(outcome_key(key))
                .arg(format!("a{outcome}"))
                .arg("PX")
                .arg(millis(keep))
                .query_async::<()>(&mut self.commands.clone())
                .await
                .map_err(text)
        })
    }

    fn release_outcome<'a>(&'a self, key: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            redis::Script::new(scripts::RELEASE_OUTCOME)
                .key(outcome_key(key))
                .invoke_async::<()>(&mut self.commands.clone())
                .await
                .map_err(text)
        })
    }

    fn put_report<'a>(
        &'a self,
        reply_to: &'a str,
        _job: &'a str,
        _seq: u64,
        body: &'a str,
    ) -> Answer<'a, ()> {
        Box::pin(async move {
            let retention = i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX);
            redis::pipe()
                .atomic()
                .rpush(reply_to, body)
                .ignore()
                .expire(reply_to, retention)
                .ignore()
                .query_async::<()>(&mut self.commands.clone())
                .await
                .map_err(text)
        })
    }

    fn put_reply<'a>(&'a self, reply_to: &'a str, job: &'a str, body: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            let mut commands = self.commands.clone();
            let now = now_ms();
            let retention = i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX);
            if is_job_key(reply_to) {
                // A submitted job: the first reply stays in its record, which is
                // kept for the retention from now.
                return redis::pipe()
                    .atomic()
                    .zadd(&self.finished, job, now)
                    .ignore()
                    .hset_nx(reply_to, "result", body)
                    .ignore()
                    .expire(reply_to, retention)
                    .ignore()
                    .query_async::<()>(&mut commands)
                    .await
                    .map_err(text);
            }
            redis::pipe()
                .atomic()
                .zadd(&self.finished, job, now)
                .ignore()
                .rpush(reply_to, body)
                .ignore()
                .expire(reply_to, retention)
                .ignore()
                .query_async::<()>(&mut commands)
                .await
                .map_err(text)
        })
    }

    fn record<'a>(&'a self, id: &'a str, record: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            let mut commands = self.commands.clone();
            commands
                .hset::<_, _, _, ()>(job_key(&self.queue, id), "record", record)
                .await
                .map_err(text)
        })
    }

    fn expire_record<'a>(&'a self, id: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            let retention = i64::try_from(self.engine.retention.as_secs()).unwrap_or(i64::MAX);
            let mut commands = self.commands.clone();
            commands
                .expire::<_, ()>(job_key(&self.queue, id), retention)
                .await
                .map_err(text)
        })
    }

    fn stored<'a>(&'a self, id: &'a str) -> Answer<'a, Option<Stored>> {
        Box::pin(async move {
            let found: Option<(String, String, String, String)> =
                redis::Script::new(scripts::STORED)
                    .key(job_key(&self.queue, id))
                    .key(format!("{}:scheduled", self.queue))
                    .key(format!("{}:active", self.queue))
                    .key(format!("{}:meta:{id}", self.queue))
                    .arg(id)
                    .arg(now_s())
                    .invoke_async(&mut self.commands.clone())
                    .await
                    .map_err(text)?;
            Ok(found.map(|(record, reply, cancelled, engine)| Stored {
                record,
                reply: Some(reply)
                    .filter(|reply| !reply.is_empty())
                    .and_then(|reply| decode_reply(&reply)),
                cancelled: !cancelled.is_empty(),
                engine: match engine.as_str() {
                    "scheduled" => Waiting::Scheduled,
                    "running" => Waiting::Running,
                    "not_enqueued" => Waiting::NotEnqueued,
                    _ => Waiting::Queued,
                },
            }))
        })
    }

    fn cancel<'a>(&'a self, id: &'a str) -> Answer<'a, Cancel> {
        Box::pin(async move {
            let outcome: String = redis::Script::new(scripts::CANCEL)
                .key(job_key(&self.queue, id))
                .key(format!("{}:scheduled", self.queue))
                .key(format!("{}:active", self.queue))
                .key(format!("{}:meta:{id}", self.queue))
                .key(&self.finished)
                .arg(id)
                .arg(now_ms())
                .arg(self.engine.retention.as_secs())
                .invoke_async(&mut self.commands.clone())
                .await
                .map_err(text)?;
            Ok(match outcome.as_str() {
                "unknown" => Cancel::Unknown,
                "cancelled" => Cancel::Cancelled,
                _ => Cancel::TooLate,
            })
        })
    }

    fn publish<'a>(&'a self, manifest: &'a str) -> Answer<'a, u64> {
        Box::pin(async move {
            redis::Script::new(scripts::PUBLISH)
                .key(&self.fleet.generation)
                .key(&self.fleet.state)
                .key(&self.fleet.channel)
                .arg(manifest)
                .invoke_async(&mut self.commands.clone())
                .await
                .map_err(text)
        })
    }

    fn current(&self) -> Answer<'_, Option<(u64, String)>> {
        Box::pin(async move {
            let state: Option<String> = self
                .commands
                .clone()
                .get(&self.fleet.state)
                .await
                .map_err(text)?;
            Ok(state.and_then(|state| {
                let (generation, manifest) = state.split_once('\n')?;
                Some((generation.parse().ok()?, manifest.to_owned()))
            }))
        })
    }

    fn report<'a>(&'a self, process: &'a str, member: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            self.commands
                .clone()
                .hset::<_, _, _, ()>(&self.fleet.members, process, member)
                .await
                .map_err(text)
        })
    }

    fn members(&self) -> Answer<'_, Vec<String>> {
        Box::pin(async move {
            self.commands
                .clone()
                .hvals(&self.fleet.members)
                .await
                .map_err(text)
        })
    }

    fn leave<'a>(&'a self, process: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            self.commands
                .clone()
                .hdel::<_, _, ()>(&self.fleet.members, process)
                .await
                .map_err(text)
        })
    }

    fn announcements(&self, kick: Weak<Notify>) -> JoinHandle<()> {
        let client = self.client.clone();
        let channel = self.fleet.channel.clone();
        tokio::spawn(async move {
            let mut backoff = RECONNECT_FIRST;
            loop {
                if let Ok(mut pubsub) = client.get_async_pubsub().await
                    && pubsub.subscribe(&channel).await.is_ok()
                {
                    backoff = RECONNECT_FIRST;
                    let mut messages = pubsub.on_message();
                    // Announcements may have come while nobody listened.
                    let mut next = Some(());
                    while next.is_some() {
                        let Some(kick) = kick.upgrade() else { return };
                        kick.notify_one();
                        drop(kick);
                        next = messages.next().await.map(drop);
                    }
                }
                if kick.strong_count() == 0 {
                    return;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RECONNECT_LAST);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::suitable;

    #[test]
    fn the_tier_takes_a_standalone_redis_7() {
        let hello = |version: &str, mode: &str| {
            let text = |text: &str| redis::Value::BulkString(text.as_bytes().to_vec());
            super::hello_fields(&[
                text("server"),
                text("redis"),
                text("version"),
                text(version),
                text("proto"),
                redis::Value::Int(2),
                text("mode"),
                text(mode),
                text("modules"),
                redis::Value::Array(Vec::new()),
            ])
        };
        assert_eq!(suitable(&hello("7.0.15", "standalone")), Ok(()));
        assert_eq!(suitable(&hello("8.2.1", "standalone")), Ok(()));
        let old = suitable(&hello("6.2.14", "standalone")).unwrap_err();
        assert!(
            old.contains("Redis 6.2.14") && old.contains("7.0 or later"),
            "{old}"
        );
        let cluster = suitable(&hello("7.0.15", "cluster")).unwrap_err();
        assert!(cluster.contains("Redis Cluster"), "{cluster}");
        let sentinel = suitable(&hello("7.0.15", "sentinel")).unwrap_err();
        assert!(sentinel.contains("`sentinel` mode"), "{sentinel}");
        assert!(suitable("").unwrap_err().contains("did not say its mode"));
    }
}
