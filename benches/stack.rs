//! Per-call cost of a typed stack against the same logic hand-nested, and of a
//! by-name JSON call.
//!
//! Run: `cargo bench --bench stack`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use frunk::{hlist, hlist_pat};
use futures_util::FutureExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::prelude::*;
use toolgraft::{Anywhere, BoxError, LayerInput, Next, ToolError, Wrapped, Wrapper};

#[derive(Clone, Deserialize, Serialize, JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

async fn add(input: Add) -> Result<i64, BoxError> {
    Ok(input.a + input.b)
}

/// A wrapper that only forwards.
#[derive(Clone)]
struct Pass(&'static str);

impl Extension for Pass {
    type Kind = Wrapper;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        self.0
    }
}

impl<S: Stack> Wrap<S> for Pass {
    type Params = ();
    fn around(
        &self,
        next: Next<'_, S>,
        (): (),
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send {
        next.call(input)
    }
}

impl<S: Stack> Layer<S> for Pass {
    type Branch = Wrapped<Self, S>;
    fn layer(self, inner: S, below: &LayerInput<'_>) -> Self::Branch {
        Wrapped::new(self, inner, below)
    }
}

// The same logic, hand-nested.
async fn hand_body(input: Add) -> Result<i64, ToolError> {
    add(input).await.map_err(|source| ToolError::Body {
        tool: toolgraft::Name::new("add").unwrap(),
        source: source.into_inner().into(),
    })
}
/// The body as `Tool` runs it: a panic becomes an error.
async fn hand_safe_body(input: Add) -> Result<i64, ToolError> {
    match std::panic::AssertUnwindSafe(hand_body(input))
        .catch_unwind()
        .await
    {
        Ok(result) => result,
        Err(_) => Err(ToolError::Panicked {
            tool: toolgraft::Name::new("add").unwrap(),
            message: String::new(),
        }),
    }
}
async fn hand_1(input: Add) -> Result<i64, ToolError> {
    hand_safe_body(input).await
}
async fn hand_2(input: Add) -> Result<i64, ToolError> {
    hand_1(input).await
}
async fn hand_3(input: Add) -> Result<i64, ToolError> {
    hand_2(input).await
}
async fn hand_4(input: Add) -> Result<i64, ToolError> {
    hand_3(input).await
}

fn calls(c: &mut Criterion) {
    let tool = Tool::builder()
        .name("add")
        .description("Add two numbers.")
        .body(add)
        .build()
        .unwrap();
    let toolset = Toolset::new();
    let hlist_pat![four] = toolset
        .bind(
            &tool,
            hlist![
                tool.combo()
                    .with(Pass("p1"))
                    .with(Pass("p2"))
                    .with(Pass("p3"))
                    .with(Pass("p4"))
            ],
        )
        .unwrap();
    let input = || Add { a: 2, b: 3 };

    let mut group = c.benchmark_group("per call");
    group.bench_function("hand-nested, 0 layers", |b| {
        b.iter(|| hand_body(black_box(input())).now_or_never())
    });
    group.bench_function("hand-nested panic-safe body, 0 layers", |b| {
        b.iter(|| hand_safe_body(black_box(input())).now_or_never())
    });
    group.bench_function("typed tool, 0 layers", |b| {
        b.iter(|| tool.call(black_box(input())).now_or_never())
    });
    group.bench_function("hand-nested, 4 layers", |b| {
        b.iter(|| hand_4(black_box(input())).now_or_never())
    });
    group.bench_function("typed stack, 4 layers", |b| {
        b.iter(|| four.call(black_box(input())).now_or_never())
    });
    let args = json!({"a": 2, "b": 3});
    group.bench_function("decode-call-encode by hand, 0 layers", |b| {
        b.iter(|| {
            let input: Add = serde_json::from_value(black_box(args.clone())).unwrap();
            let out = hand_body(input).now_or_never().unwrap().unwrap();
            serde_json::to_value(out).unwrap()
        })
    });
    group.bench_function("by name with JSON, 4 layers", |b| {
        b.iter(|| {
            toolset
                .call("add_p1_p2_p3_p4", black_box(args.clone()))
                .now_or_never()
        })
    });
    group.finish();
}

criterion_group!(benches, calls);
criterion_main!(benches);
