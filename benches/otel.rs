//! The cost of the `otel` feature on a typed three-layer call: run once
//! without the feature (`cargo bench --bench otel`) and once with it
//! (`--features otel`), and compare the `no subscriber` rows of the two runs;
//! with the feature, the same call under a subscriber whose sampler keeps every
//! span (exported to memory, then dropped) and one whose sampler drops them.
//!
//! Run: `cargo bench --bench otel [--features otel]` (see BENCHMARKS.md).

use std::future::Future;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::FutureExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgraft::Wrap;
use toolgraft::error::BoxError;
use toolgraft::extension::{Anywhere, Next};
use toolgraft::prelude::*;
use toolgraft::{ToolError, Toolset};

#[derive(Clone, Deserialize, Serialize, JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

async fn add(input: Add) -> Result<i64, BoxError> {
    Ok(input.a + input.b)
}

/// A wrapper that only forwards: what is measured is the layer's own cost.
#[derive(Clone)]
struct Pass(&'static str);

impl Extension for Pass {
    type Kind = toolgraft::extension::Wrapper;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        self.0
    }
}

impl<S: Stack> Wrap<S> for Pass {
    type Params = ();

    fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send {
        next.call(input)
    }
}

fn bench(c: &mut Criterion) {
    let tool = Tool::builder()
        .name("add")
        .description("Add two numbers.")
        .body(add)
        .build()
        .unwrap();
    let (three,) = Toolset::new()
        .bind((tool
            .combo()
            .with(Pass("one"))
            .with(Pass("two"))
            .with(Pass("three")),))
        .unwrap();
    let input = || Add { a: 2, b: 3 };
    assert_eq!(three.call(input()).now_or_never().unwrap().unwrap(), 5);

    let mut group = c.benchmark_group("otel");
    let feature = if cfg!(feature = "otel") { "on" } else { "off" };
    group.bench_function(
        format!("three layers, feature {feature}, no subscriber"),
        |b| b.iter(|| three.call(black_box(input())).now_or_never()),
    );
    #[cfg(feature = "otel")]
    {
        use opentelemetry::trace::TracerProvider as _;
        use opentelemetry_sdk::trace::{InMemorySpanExporter, Sampler, SdkTracerProvider};
        use tracing_subscriber::layer::SubscriberExt;

        for (name, sampler) in [
            ("keeps every span", Sampler::AlwaysOn),
            ("drops every span", Sampler::AlwaysOff),
        ] {
            let exporter = InMemorySpanExporter::default();
            let provider = SdkTracerProvider::builder()
                .with_sampler(sampler)
                .with_simple_exporter(exporter.clone())
                .build();
            let subscriber = tracing_subscriber::registry()
                .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("bench")));
            tracing::subscriber::with_default(subscriber, || {
                group.bench_function(
                    format!("three layers, feature on, a sampler that {name}"),
                    |b| {
                        b.iter(|| {
                            let answer = three.call(black_box(input())).now_or_never();
                            // The exporter's memory, not the spans, would grow.
                            exporter.reset();
                            answer
                        })
                    },
                );
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
