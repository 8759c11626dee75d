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
//! | [`RateLimit`] | wrapper | no | — | at most `calls` per period (GCRA), per branch and optionally per principal, in process or fleet-wide ([`limit::LimitStore`]): [`ToolError::Overloaded`](crate::ToolError::Overloaded) with the time to retry |
//! | [`Concurrency`] | wrapper | no | — | at most `max` calls at once, a bounded queue, load shedding beyond it: [`ToolError::Overloaded`](crate::ToolError::Overloaded) |
//! | `Metrics` (feature `metrics`) | wrapper | no | — | per bound name: calls by outcome, errors by kind, a duration histogram, through the `metrics` facade |

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
pub mod timeout;
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
pub use timeout::Timeout;
pub use trace::Trace;
