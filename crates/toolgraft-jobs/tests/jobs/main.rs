//! Relocation to worker processes on apalis: every test runs against each tier
//! built in (Redis, SQLite), with workers that are real processes: this test
//! binary started again as `support::worker_process`, binding the same toolset with the
//! same code (`support::toolset`), as the rulebook's `relocation` asks.
//!
//! Redis: `TOOLGRAFT_REDIS_URL` names a running server (`scripts/test` starts one);
//! without it each test starts its own `redis-server` on a free loopback port.
//!
//! One test binary (one link), a module per area; `support` holds the harness.
//! A new case goes in its area's file, and into that file's `on_every_tier!`
//! list when it takes an [`Env`](support::Env).

#[macro_use]
mod support;

mod access;
mod delivery;
mod fleet;
mod imported;
mod layout;
mod limits;
#[cfg(feature = "otel")]
mod otel;
#[cfg(feature = "otel")]
#[path = "../../examples/otlp/mod.rs"]
mod otlp;
#[cfg(feature = "otel")]
#[path = "../../examples/otlp_receiver/receiver.rs"]
mod otlp_receiver;
mod outages;
mod relocation;
#[cfg(feature = "postgres")]
mod postgres_faults;
#[cfg(feature = "redis")]
mod servers;
mod submit;
mod tasks;
#[cfg(all(feature = "tls", feature = "redis"))]
mod tls;
mod trace;
#[cfg(feature = "redis")]
mod traffic;
