//! The built-in extensions.
//!
//! | extension | kind | body locality | reserved params | what it does |
//! |---|---|---|---|---|
//! | [`Trace`] | wrapper | no | — | a `tracing` span per call, recording failure |
//! | [`Cache`] | wrapper | no | `exp` | per-branch LRU store with a TTL; concurrent identical calls run once |
//! | [`Proxy`] | wrapper | **yes** | `proxies` | an egress route from an allow-list (the context entry [`proxy::Route`]) |
//! | [`Batch`] | transformer | no | — | runs a list of inputs, sequentially or in parallel |
//! | [`Pool`] | backend | no | — | runs the layer below on a dedicated pool of worker threads |
//! | [`OutputSchema`] | transformer | no | — | declares an output schema and validates every result against it |
//! | [`Chain`] | transformer | no | — | feeds (a selection of) the result into another bound tool, by name (a JSON Pointer, or a jq expression with the `jq` feature) |
//! | [`Timeout`] | wrapper | no | — | cancels the layer below at a deadline: [`ToolError::TimedOut`](crate::ToolError::TimedOut) |
//! | [`Retry`] | wrapper | no | — | makes a call again after a [transient](crate::ToolError::is_transient) failure, with backoff, jitter and a deadline; only on read-only or idempotent tools ([side-effects](crate::rulebook#side-effects)) |
//! | [`RateLimit`] | wrapper | no | — | at most `calls` per period (GCRA), per branch and optionally per principal, in process or fleet-wide ([`limit::LimitStore`]): [`ToolError::Overloaded`](crate::ToolError::Overloaded) with the time to retry |
//! | [`Concurrency`] | wrapper | no | — | at most `max` calls at once, a bounded queue, load shedding beyond it: [`ToolError::Overloaded`](crate::ToolError::Overloaded) |
//! | `Metrics` (feature `metrics`) | wrapper | no | — | per bound name: calls by outcome, errors by kind, a duration histogram, through the `metrics` facade |
//! | `tower::Tower` (feature `tower`) | wrapper | no | — | any `tower::Layer` (`ConcurrencyLimit`, `RateLimit`, `LoadShed`, `Timeout`, ..) over every call of its branch, its errors as [`ToolError::Overloaded`](crate::ToolError::Overloaded) and [`ToolError::TimedOut`](crate::ToolError::TimedOut); tower's own registered from config; and a branch as a `tower::Service` |

pub mod approve;
pub mod batch;
pub mod cache;
pub mod chain;
#[cfg(feature = "jq")]
pub mod jq;
pub mod limit;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod output_schema;
pub mod pool;
pub mod proxy;
pub mod retry;
pub mod timeout;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
pub mod trace;

pub use approve::Approve;
pub use batch::{Batch, BatchInput, BatchItem};
pub use cache::{Cache, CacheParams, Cacheable};
pub use chain::Chain;
pub use limit::{Concurrency, RateLimit};
#[cfg(feature = "metrics")]
pub use metrics::Metrics;
pub use output_schema::OutputSchema;
pub use pool::Pool;
pub use proxy::{Proxy, ProxyParams};
pub use retry::Retry;
pub use timeout::Timeout;
pub use trace::Trace;
