//! Binding 10,000 tools with 4 combos each from a manifest.
//!
//! Run: `cargo bench --bench bind` (see BENCHMARKS.md).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::error::BoxError;
use toolgraft::ext::{Batch, Cache, Trace};
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

const TOOLS: usize = 10_000;

fn bind(c: &mut Criterion) {
    let mut bases = BaseTools::new();
    for at in 0..TOOLS {
        let tool = Tool::builder()
            .name(format!("lookup{at}"))
            .description("Look a key up.")
            .body(lookup)
            .build()
            .unwrap();
        bases.add(&tool);
    }
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register_configurable(Cache::default())
        .unwrap()
        .register_configurable(Batch::default())
        .unwrap();
    let combos = json!([["trace"], ["cache"], ["trace", "cache"], ["batch"]]);
    let tools: serde_json::Map<String, serde_json::Value> = (0..TOOLS)
        .map(|at| (format!("lookup{at}"), combos.clone()))
        .collect();
    let manifest = Manifest::from_value(&json!({ "tools": tools })).unwrap();

    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry, &bases, &manifest);
    assert!(outcome.iter().all(|(_, result)| result.is_ok()));
    // Each tool: itself, _trace, _cache, _trace_cache, _batch.
    assert_eq!(toolset.names().len(), TOOLS * 5);

    let mut group = c.benchmark_group("bind");
    group.sample_size(10);
    group.bench_function("10,000 tools x 4 combos, from a manifest", |b| {
        // Tearing the 50,000 names down again is not binding: dropped untimed.
        b.iter_with_large_drop(|| {
            let toolset = Toolset::new();
            black_box(toolset.bind_manifest(&registry, &bases, black_box(&manifest)));
            toolset
        })
    });
    group.finish();
}

criterion_group!(benches, bind);
criterion_main!(benches);
