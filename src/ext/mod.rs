//! The built-in extensions, each behind the cargo feature of its name (`trace`,
//! `cache`, `proxy`, `batch`, `pool`, `output-schema`, `chain`, `timeout`, `retry`,
//! `limit` for `rate_limit` and `concurrency`, `approve`, `once`: all in `default`;
//! `metrics`, `jq` and `tower` opt in). A build with `default-features = false`
//! names the ones it uses.
//!
//! | extension | kind | body locality | reserved params | what it does |
//! |---|---|---|---|---|
//! | [`Trace`] | wrapper | no | — | a `tracing` span per call, recording failure |
//! | [`Cache`] | wrapper | no | `exp` | per-branch LRU store with a TTL; concurrent identical calls run once |
//! | [`Proxy`] | wrapper | **yes** | `proxies` | an egress route from an allow-list (the context entry [`proxy::Route`]) |
//! | [`Batch`] | transformer | no | — | runs a list of inputs, sequentially or in parallel |
//! | [`Pool`] | backend | no | — | runs the layer below on a dedicated pool of worker threads |
//! | [`OutputSchema`] | transformer | no | — | declares an output schema and validates every result against it |
//! | [`Chain`] | transformer | no | — | feeds (a selection of) the result into another tool, by a published name (a JSON Pointer, or a jq expression with the `jq` feature) |
//! | [`Timeout`] | wrapper | no | — | cancels the layer below at a deadline: [`ToolError::TimedOut`](crate::ToolError::TimedOut) |
//! | [`Retry`] | wrapper | no | — | makes a call again after a [transient](crate::ToolError::is_transient) failure, with backoff, jitter and a deadline; only on read-only or idempotent tools ([side-effects](crate::rulebook#side-effects)) |
//! | [`OncePerKey`] | wrapper | no | `idempotency_key` | runs a call once per key (the caller's, a retry's, a redelivered job's) and answers repeats from the first outcome: its branch is idempotent, so a `retry` may sit outside it on any tool ([side-effects](crate::rulebook#side-effects)) |
//! | [`RateLimit`] | wrapper | no | — | `calls` per period, a period's calls at once unless a burst says otherwise (GCRA), per branch and optionally per principal, in process or fleet-wide ([`limit::LimitStore`]): [`ToolError::Overloaded`](crate::ToolError::Overloaded) with the time to retry |
//! | [`Concurrency`] | wrapper | no | — | at most `max` calls at once, a bounded queue, load shedding beyond it: [`ToolError::Overloaded`](crate::ToolError::Overloaded) |
//! | `Metrics` (feature `metrics`) | wrapper | no | — | per bound name: calls by outcome, errors by kind, a duration histogram, through the `metrics` facade |
//! | `tower::Tower` (feature `tower`) | wrapper | no | — | any `tower::Layer` (`ConcurrencyLimit`, `RateLimit`, `LoadShed`, `Timeout`, ..) over every call of its branch, its errors as [`ToolError::Overloaded`](crate::ToolError::Overloaded) and [`ToolError::TimedOut`](crate::ToolError::TimedOut); tower's own registered from config; and a branch as a `tower::Service` |

#[cfg(feature = "approve")]
#[cfg_attr(docsrs, doc(cfg(feature = "approve")))]
pub mod approve;
#[cfg(feature = "authorize")]
#[cfg_attr(docsrs, doc(cfg(feature = "authorize")))]
pub mod authorize;
#[cfg(feature = "batch")]
#[cfg_attr(docsrs, doc(cfg(feature = "batch")))]
pub mod batch;
#[cfg(feature = "cache")]
#[cfg_attr(docsrs, doc(cfg(feature = "cache")))]
pub mod cache;
#[cfg(feature = "chain")]
#[cfg_attr(docsrs, doc(cfg(feature = "chain")))]
pub mod chain;
#[cfg(feature = "jq")]
#[cfg_attr(docsrs, doc(cfg(feature = "jq")))]
pub mod jq;
#[cfg(feature = "limit")]
#[cfg_attr(docsrs, doc(cfg(feature = "limit")))]
pub mod limit;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
#[cfg(feature = "once")]
#[cfg_attr(docsrs, doc(cfg(feature = "once")))]
pub mod once;
#[cfg(feature = "output-schema")]
#[cfg_attr(docsrs, doc(cfg(feature = "output-schema")))]
pub mod output_schema;
#[cfg(feature = "pool")]
#[cfg_attr(docsrs, doc(cfg(feature = "pool")))]
pub mod pool;
#[cfg(feature = "proxy")]
#[cfg_attr(docsrs, doc(cfg(feature = "proxy")))]
pub mod proxy;
#[cfg(feature = "retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "retry")))]
pub mod retry;
#[cfg(feature = "timeout")]
#[cfg_attr(docsrs, doc(cfg(feature = "timeout")))]
pub mod timeout;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
#[cfg(feature = "trace")]
#[cfg_attr(docsrs, doc(cfg(feature = "trace")))]
pub mod trace;

#[cfg(feature = "approve")]
#[cfg_attr(docsrs, doc(cfg(feature = "approve")))]
pub use approve::Approve;
#[cfg(feature = "authorize")]
#[cfg_attr(docsrs, doc(cfg(feature = "authorize")))]
pub use authorize::Authorize;
#[cfg(feature = "batch")]
#[cfg_attr(docsrs, doc(cfg(feature = "batch")))]
pub use batch::{Batch, BatchInput, BatchItem};
#[cfg(feature = "cache")]
#[cfg_attr(docsrs, doc(cfg(feature = "cache")))]
pub use cache::{Cache, CacheParams, Cacheable};
#[cfg(feature = "chain")]
#[cfg_attr(docsrs, doc(cfg(feature = "chain")))]
pub use chain::Chain;
#[cfg(feature = "limit")]
#[cfg_attr(docsrs, doc(cfg(feature = "limit")))]
pub use limit::{Concurrency, RateLimit};
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use metrics::Metrics;
#[cfg(feature = "once")]
#[cfg_attr(docsrs, doc(cfg(feature = "once")))]
pub use once::OncePerKey;
#[cfg(feature = "output-schema")]
#[cfg_attr(docsrs, doc(cfg(feature = "output-schema")))]
pub use output_schema::OutputSchema;
#[cfg(feature = "pool")]
#[cfg_attr(docsrs, doc(cfg(feature = "pool")))]
pub use pool::Pool;
#[cfg(feature = "proxy")]
#[cfg_attr(docsrs, doc(cfg(feature = "proxy")))]
pub use proxy::{Proxy, ProxyParams};
#[cfg(feature = "retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "retry")))]
pub use retry::Retry;
#[cfg(feature = "timeout")]
#[cfg_attr(docsrs, doc(cfg(feature = "timeout")))]
pub use timeout::Timeout;
#[cfg(feature = "trace")]
#[cfg_attr(docsrs, doc(cfg(feature = "trace")))]
pub use trace::Trace;
