//! Per-call cost of the resilience built-ins when they let the call through:
//! `retry` (no failure), `concurrency` and `rate_limit` (in process), `once`
//! (a first call's claim and record, and a repeat's answer, in memory), and tower's
//! `ConcurrencyLimit` put on a tool with `ext::tower::Tower`, each against the
//! same logic written by hand around the body (a semaphore, a governor limiter,
//! a loop on `is_transient`).
//!
//! Run: `cargo bench --features tower --bench resilience` (see BENCHMARKS.md).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use governor::{Quota, RateLimiter};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgraft::error::BoxError;
use toolgraft::ext::once::{MemoryOutcomes, OnceParams};
use toolgraft::ext::tower::Tower;
use toolgraft::ext::{Concurrency, OncePerKey, RateLimit, Retry};
use toolgraft::extension::WithParams;
use toolgraft::prelude::*;
use toolgraft::tool::{Hinted, ReadOnly};
use toolgraft::{ToolError, Toolset};
use tower::limit::ConcurrencyLimitLayer;

#[derive(Clone, Deserialize, Serialize, JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

async fn add(input: Add) -> Result<i64, BoxError> {
    Ok(input.a + input.b)
}

/// The body as the hand-written variants call it: its error typed, as a
/// layer below a wrapper sees it.
async fn body(input: Add) -> Result<i64, ToolError> {
    Ok(input.a + input.b)
}

fn input() -> Add {
    Add { a: 2, b: 3 }
}

fn tool() -> impl BaseTool<Input = Add, Output = i64> + Hinted<Hints = ReadOnly> + Clone {
    Tool::builder()
        .name("add")
        .description("Add two numbers.")
        .read_only()
        .body(add)
        .build()
        .unwrap()
}

/// The most calls a rate limit may admit at once: a burst this big, then calls
/// at its rate. A run makes more calls than that, so each chunk of calls meets
/// a limit made fresh for it, made outside the time measured.
const CHUNK: u64 = 1_000_000;

async fn hand_retry(input: Add) -> Result<i64, ToolError> {
    let mut attempt = 1;
    loop {
        match body(input.clone()).await {
            Err(error) if error.is_transient() && attempt < 3 => attempt += 1,
            outcome => return outcome,
        }
    }
}

fn resilience(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let tool = tool();
    let (bare, retry, concurrency, tower_limit) = Toolset::new()
        .bind((
            tool.combo(),
            tool.combo().with(Retry::default()),
            tool.combo().with(Concurrency::at_most(64)),
            tool.combo()
                .with(Tower::new("limit", ConcurrencyLimitLayer::new(64))),
        ))
        .unwrap();
    let semaphore = tokio::sync::Semaphore::new(64);
    let hand_concurrency = async |input: Add| {
        let _permit = semaphore.acquire().await.expect("open");
        body(input).await
    };
    let fresh_rate_limit = || {
        let limit = RateLimit::per_second(1_000_000).with_burst(1_000_000);
        let (limited,) = Toolset::new().bind((tool.combo().with(limit),)).unwrap();
        limited
    };
    let fresh_governor = || {
        let max = NonZeroU32::new(1_000_000).unwrap();
        RateLimiter::direct(Quota::per_second(max).allow_burst(max))
    };

    let limited = fresh_rate_limit();
    for answer in [
        runtime.block_on(bare.call(input())),
        runtime.block_on(retry.call(input())),
        runtime.block_on(concurrency.call(input())),
        runtime.block_on(tower_limit.call(input())),
        runtime.block_on(limited.call(input())),
        runtime.block_on(hand_concurrency(input())),
        runtime.block_on(hand_retry(input())),
    ] {
        assert_eq!(answer.expect("admitted"), 5);
    }

    // `once`: each chunk of first calls on a store made fresh for it (a
    // store keeps every key it answered); repeats of one answered key.
    let fresh_once = || {
        let once = OncePerKey::default().with_store(MemoryOutcomes::new(CHUNK as usize));
        let (once,) = Toolset::new().bind((tool.combo().with(once),)).unwrap();
        once
    };
    let keyed = |key: String| {
        WithParams::new(
            OnceParams {
                idempotency_key: Some(key),
            },
            input(),
        )
    };
    let once = fresh_once();
    runtime
        .block_on(once.call(keyed("answered".into())))
        .expect("answered");
    let hand_store = std::sync::Mutex::new(std::collections::HashMap::<String, String>::new());
    let hand_once = async |key: String, input: Add| {
        if let Some(kept) = hand_store.lock().unwrap().get(&key) {
            return Ok(serde_json::from_str::<i64>(kept).expect("kept"));
        }
        hand_store
            .lock()
            .unwrap()
            .insert(key.clone(), String::new());
        let answer = body(input).await?;
        let kept = serde_json::to_string(&answer).expect("json");
        hand_store.lock().unwrap().insert(key, kept);
        Ok::<i64, ToolError>(answer)
    };

    let mut group = c.benchmark_group("resilience");
    group.bench_function("bare/typed", |b| {
        b.iter(|| runtime.block_on(bare.call(black_box(input()))))
    });
    group.bench_function("bare/hand", |b| {
        b.iter(|| runtime.block_on(body(black_box(input()))))
    });
    group.bench_function("retry/typed", |b| {
        b.iter(|| runtime.block_on(retry.call(black_box(input()))))
    });
    group.bench_function("retry/hand", |b| {
        b.iter(|| runtime.block_on(hand_retry(black_box(input()))))
    });
    group.bench_function("concurrency/typed", |b| {
        b.iter(|| runtime.block_on(concurrency.call(black_box(input()))))
    });
    group.bench_function("concurrency/hand", |b| {
        b.iter(|| runtime.block_on(hand_concurrency(black_box(input()))))
    });
    group.bench_function("concurrency/tower ConcurrencyLimit", |b| {
        b.iter(|| runtime.block_on(tower_limit.call(black_box(input()))))
    });
    group.bench_function("rate_limit/typed", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let chunk = left.min(CHUNK);
                let limited = fresh_rate_limit();
                let started = Instant::now();
                for _ in 0..chunk {
                    let answer = runtime.block_on(limited.call(black_box(input())));
                    debug_assert!(matches!(answer, Ok(5)));
                    let _ = black_box(answer);
                }
                spent += started.elapsed();
                left -= chunk;
            }
            spent
        })
    });
    group.bench_function("rate_limit/hand", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let chunk = left.min(CHUNK);
                let limiter = fresh_governor();
                let started = Instant::now();
                for _ in 0..chunk {
                    // The limit is never reached within a chunk.
                    let answer = limiter
                        .check()
                        .map(|()| runtime.block_on(body(black_box(input()))));
                    let _ = black_box(answer);
                }
                spent += started.elapsed();
                left -= chunk;
            }
            spent
        })
    });
    group.bench_function("once/typed first call", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let chunk = left.min(CHUNK);
                let once = fresh_once();
                let keys: Vec<String> = (0..chunk).map(|n| format!("order-{n}")).collect();
                let started = Instant::now();
                for key in keys {
                    let answer = runtime.block_on(once.call(black_box(keyed(key))));
                    debug_assert!(matches!(answer, Ok(5)));
                    let _ = black_box(answer);
                }
                spent += started.elapsed();
                left -= chunk;
            }
            spent
        })
    });
    group.bench_function("once/hand first call", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let chunk = left.min(CHUNK);
                hand_store.lock().unwrap().clear();
                let keys: Vec<String> = (0..chunk).map(|n| format!("order-{n}")).collect();
                let started = Instant::now();
                for key in keys {
                    let answer = runtime.block_on(hand_once(black_box(key), black_box(input())));
                    let _ = black_box(answer);
                }
                spent += started.elapsed();
                left -= chunk;
            }
            spent
        })
    });
    group.bench_function("once/typed repeat", |b| {
        b.iter(|| runtime.block_on(once.call(black_box(keyed("answered".into())))))
    });
    group.bench_function("once/hand repeat", |b| {
        b.iter(|| runtime.block_on(hand_once(black_box("answered".into()), black_box(input()))))
    });
    group.finish();
}

criterion_group!(benches, resilience);
criterion_main!(benches);
