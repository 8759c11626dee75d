//! Binding 10,000 tools with 4 combos each from a manifest.
//!
//! Run: `cargo bench --bench bind` (see BENCHMARKS.md).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::FutureExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::error::BoxError;
use toolgraft::ext::{Batch, Cache, Trace};
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;
use toolgraft::{Registry, Tool, Toolset};

#[derive(Deserialize, Serialize, JsonSchema)]
struct Lookup {
    /// What to look up.
    key: String,
    /// How many results.
    #[serde(default)]
    limit: Option<u32>,
}

async fn lookup(input: Lookup) -> Result<String, BoxError> {
    Ok(input.key)
}

/// How many tools a run binds: 10,000 when it measures; 100 when it only shows
/// the bench still runs (criterion's test mode, one run of each:
/// `cargo test --benches`, or `cargo bench -- --test`), where 10,000 would take
/// minutes in a debug build.
fn tools() -> usize {
    let arg = |name: &str| std::env::args().any(|arg| arg == name);
    if arg("--bench") && !arg("--test") {
        10_000
    } else {
        100
    }
}

fn bind(c: &mut Criterion) {
    let tools = tools();
    let mut bases = BaseTools::new();
    let mut first_two = BaseTools::new();
    for at in 0..tools {
        let tool = Tool::builder()
            .name(format!("lookup{at}"))
            .description("Look a key up.")
            .read_only()
            .body(lookup)
            .build()
            .unwrap();
        bases.add(&tool);
        if at < 2 {
            first_two.add(&tool);
        }
    }
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(Configured::new(Batch::default()))
        .unwrap();
    let combos = json!([["trace"], ["cache"], ["trace", "cache"], ["batch"]]);
    let entries: serde_json::Map<String, serde_json::Value> = (0..tools)
        .map(|at| (format!("lookup{at}"), combos.clone()))
        .collect();
    let manifest = Manifest::from_value(&json!({ "tools": entries })).unwrap();

    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry, &bases, &manifest);
    assert!(outcome.iter().all(|(_, result)| result.is_ok()));
    // Each tool: itself, _trace, _cache, _trace_cache, _batch.
    assert_eq!(toolset.names().len(), tools * 5);

    let mut group = c.benchmark_group("bind");
    group.sample_size(10);
    group.bench_function("10,000 tools x 4 combos, from a manifest", |b| {
        b.iter_with_large_drop(|| {
            let toolset = Toolset::new();
            black_box(toolset.bind_manifest(&registry, &bases, black_box(&manifest)));
            toolset
        })
    });
    group.bench_function("10,000 tools x 4 combos, bind and drop", |b| {
        b.iter(|| {
            let toolset = Toolset::new();
            black_box(toolset.bind_manifest(&registry, &bases, black_box(&manifest)));
            drop(black_box(toolset));
        })
    });
    group.finish();

    // The same call among 50,000 bound names and among 10.
    let few = Toolset::new();
    let two_tools =
        Manifest::from_value(&json!({"tools": {"lookup0": combos, "lookup1": combos}})).unwrap();
    let outcome = few.bind_manifest(&registry, &first_two, &two_tools);
    assert!(outcome.iter().all(|(_, result)| result.is_ok()));
    assert_eq!(few.names().len(), 10);
    let args = json!({"key": "k"});
    let mut group = c.benchmark_group("lookup");
    for (names, toolset) in [("10 names", &few), ("50,000 names", &toolset)] {
        assert_eq!(
            toolset
                .call("lookup1_trace", args.clone())
                .now_or_never()
                .unwrap()
                .unwrap(),
            json!("k")
        );
        group.bench_function(format!("call among {names}"), |b| {
            b.iter(|| {
                toolset
                    .call(black_box("lookup1_trace"), black_box(args.clone()))
                    .now_or_never()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bind);
criterion_main!(benches);
