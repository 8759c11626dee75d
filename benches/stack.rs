//! Per-call cost of typed stacks against the same logic hand-nested and as tower
//! middleware, and of a call by name with JSON against a bare decode-call-encode.
//!
//! Run: `cargo bench --bench stack` (see BENCHMARKS.md).

use std::future::{Future, poll_fn};
use std::hint::black_box;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use criterion::{Criterion, criterion_group, criterion_main};
use frunk::{hlist, hlist_pat};
use futures_util::FutureExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::error::BoxError;
use toolgraft::extension::Around;
use toolgraft::extension::{Anywhere, LayerInput, Next, Wrapped};
use toolgraft::kind::Wrapper;
use toolgraft::prelude::*;
use toolgraft::{Name, ToolError};
use tower::{Service, ServiceBuilder};

#[derive(Clone, Deserialize, Serialize, JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

/// The body every variant runs.
async fn add(input: Add) -> Result<i64, BoxError> {
    Ok(input.a + input.b)
}

fn input() -> Add {
    Add { a: 2, b: 3 }
}

// ---------------------------------------------------------------------------------
// toolgraft: a wrapper that only forwards, and one that does a little work.
// ---------------------------------------------------------------------------------

#[derive(Clone)]
struct Pass;

impl Wrap for Pass {
    type Locality = Anywhere;
    type Params = ();
    fn name(&self) -> &str {
        "pass"
    }

    fn around<S: Stack>(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> impl Future<Output = Result<S::Output, ToolError>> + Send {
        next.call(input)
    }
}

/// Adds one to the result.
#[derive(Clone)]
struct Work;

impl Extension for Work {
    type Kind = Wrapper;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "work"
    }
}

impl<S: Stack<Output = i64>> Around<S> for Work {
    type Params = ();
    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<i64, ToolError> {
        Ok(next.call(input).await? + 1)
    }
}

impl<S: Stack<Output = i64>> Layer<S> for Work {
    type Branch = Wrapped<Self, S>;
    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch {
        Wrapped::new(self, inner, below)
    }
}

// ---------------------------------------------------------------------------------
// The same logic hand-nested: the body as `Tool` runs it (a panic becomes an error),
// then plain async functions.
// ---------------------------------------------------------------------------------

async fn base(input: Add) -> Result<i64, ToolError> {
    match AssertUnwindSafe(add(input)).catch_unwind().await {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(source)) => Err(ToolError::Body {
            tool: Name::new("add").unwrap(),
            source: source.into_inner().into(),
        }),
        Err(_) => Err(ToolError::Panicked {
            tool: Name::new("add").unwrap(),
            message: String::new(),
        }),
    }
}

macro_rules! hand_nested {
    ($( $name:ident => $inner:ident, $work:ident => $work_inner:ident );* $(;)?) => {$(
        async fn $name(input: Add) -> Result<i64, ToolError> {
            $inner(input).await
        }
        async fn $work(input: Add) -> Result<i64, ToolError> {
            Ok($work_inner(input).await? + 1)
        }
    )*};
}

hand_nested! {
    pass_1 => base, work_1 => base;
    pass_2 => pass_1, work_2 => work_1;
    pass_3 => pass_2, work_3 => work_2;
    pass_4 => pass_3, work_4 => work_3;
    pass_5 => pass_4, work_5 => work_4;
    pass_6 => pass_5, work_6 => work_5;
    pass_7 => pass_6, work_7 => work_6;
    pass_8 => pass_7, work_8 => work_7;
}

// ---------------------------------------------------------------------------------
// The same layers as tower middleware.
// ---------------------------------------------------------------------------------

#[derive(Clone)]
struct PassLayer;

#[derive(Clone)]
struct PassService<S>(S);

impl<S> tower::Layer<S> for PassLayer {
    type Service = PassService<S>;
    fn layer(&self, inner: S) -> PassService<S> {
        PassService(inner)
    }
}

impl<S: Service<Add>> Service<Add> for PassService<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Add) -> S::Future {
        self.0.call(request)
    }
}

#[derive(Clone)]
struct WorkLayer;

#[derive(Clone)]
struct WorkService<S>(S);

impl<S> tower::Layer<S> for WorkLayer {
    type Service = WorkService<S>;
    fn layer(&self, inner: S) -> WorkService<S> {
        WorkService(inner)
    }
}

/// Adds one to the inner future's result: a named future, as tower middleware
/// writes it (no boxing, no function pointer).
struct PlusOne<F> {
    inner: F,
}

impl<F: Future<Output = Result<i64, ToolError>>> Future for PlusOne<F> {
    type Output = Result<i64, ToolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `inner` is structurally pinned: never moved out, and `PlusOne` has
        // no `Drop` or `Unpin` impl of its own.
        let inner = unsafe { self.map_unchecked_mut(|this| &mut this.inner) };
        inner.poll(cx).map(|result| Ok(result? + 1))
    }
}

impl<S: Service<Add, Response = i64, Error = ToolError>> Service<Add> for WorkService<S> {
    type Response = i64;
    type Error = ToolError;
    type Future = PlusOne<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Add) -> Self::Future {
        PlusOne {
            inner: self.0.call(request),
        }
    }
}

/// One call the tower way: wait until ready, then call.
fn tower_call<S: Service<Add>>(
    service: &mut S,
    request: Add,
) -> Option<Result<S::Response, S::Error>> {
    let ready = poll_fn(|cx| service.poll_ready(cx)).now_or_never()?;
    match ready {
        Ok(()) => service.call(request).now_or_never(),
        Err(error) => Some(Err(error)),
    }
}

fn tool() -> impl BaseTool<Input = Add, Output = i64> {
    Tool::builder()
        .name("add")
        .description("Add two numbers.")
        .body(add)
        .build()
        .unwrap()
}

fn pass_through(c: &mut Criterion) {
    let tool = tool();
    let toolset = Toolset::new();
    let hlist_pat![one, four, eight] = toolset
        .bind(
            &tool,
            hlist![
                tool.combo().with(Pass),
                tool.combo().with(Pass).with(Pass).with(Pass).with(Pass),
                tool.combo()
                    .with(Pass)
                    .with(Pass)
                    .with(Pass)
                    .with(Pass)
                    .with(Pass)
                    .with(Pass)
                    .with(Pass)
                    .with(Pass),
            ],
        )
        .unwrap();
    let service = tower::service_fn(base);
    let mut tower_1 = ServiceBuilder::new().layer(PassLayer).service(service);
    let mut tower_4 = ServiceBuilder::new()
        .layer(PassLayer)
        .layer(PassLayer)
        .layer(PassLayer)
        .layer(PassLayer)
        .service(service);
    let mut tower_8 = ServiceBuilder::new()
        .layer(PassLayer)
        .layer(PassLayer)
        .layer(PassLayer)
        .layer(PassLayer)
        .layer(PassLayer)
        .layer(PassLayer)
        .layer(PassLayer)
        .layer(PassLayer)
        .service(service);

    let mut group = c.benchmark_group("pass-through");
    group.bench_function("1/typed", |b| {
        b.iter(|| one.call(black_box(input())).now_or_never())
    });
    group.bench_function("1/hand-nested", |b| {
        b.iter(|| pass_1(black_box(input())).now_or_never())
    });
    group.bench_function("1/tower", |b| {
        b.iter(|| tower_call(&mut tower_1, black_box(input())))
    });
    group.bench_function("4/typed", |b| {
        b.iter(|| four.call(black_box(input())).now_or_never())
    });
    group.bench_function("4/hand-nested", |b| {
        b.iter(|| pass_4(black_box(input())).now_or_never())
    });
    group.bench_function("4/tower", |b| {
        b.iter(|| tower_call(&mut tower_4, black_box(input())))
    });
    group.bench_function("8/typed", |b| {
        b.iter(|| eight.call(black_box(input())).now_or_never())
    });
    group.bench_function("8/hand-nested", |b| {
        b.iter(|| pass_8(black_box(input())).now_or_never())
    });
    group.bench_function("8/tower", |b| {
        b.iter(|| tower_call(&mut tower_8, black_box(input())))
    });
    group.finish();
}

fn working(c: &mut Criterion) {
    let tool = tool();
    let toolset = Toolset::new();
    let hlist_pat![eight] = toolset
        .bind(
            &tool,
            hlist![
                tool.combo()
                    .with(Work)
                    .with(Work)
                    .with(Work)
                    .with(Work)
                    .with(Work)
                    .with(Work)
                    .with(Work)
                    .with(Work)
            ],
        )
        .unwrap();
    let mut tower_8 = ServiceBuilder::new()
        .layer(WorkLayer)
        .layer(WorkLayer)
        .layer(WorkLayer)
        .layer(WorkLayer)
        .layer(WorkLayer)
        .layer(WorkLayer)
        .layer(WorkLayer)
        .layer(WorkLayer)
        .service(tower::service_fn(base));
    assert_eq!(eight.call(input()).now_or_never().unwrap().unwrap(), 13);
    assert_eq!(work_8(input()).now_or_never().unwrap().unwrap(), 13);
    assert_eq!(tower_call(&mut tower_8, input()).unwrap().unwrap(), 13);

    let mut group = c.benchmark_group("working");
    group.bench_function("8/typed", |b| {
        b.iter(|| eight.call(black_box(input())).now_or_never())
    });
    group.bench_function("8/hand-nested", |b| {
        b.iter(|| work_8(black_box(input())).now_or_never())
    });
    group.bench_function("8/tower", |b| {
        b.iter(|| tower_call(&mut tower_8, black_box(input())))
    });
    group.finish();
}

fn by_name(c: &mut Criterion) {
    let tool = tool();
    let toolset = Toolset::new();
    toolset
        .bind(
            &tool,
            hlist![tool.combo().with(Pass).with(Pass).with(Pass).with(Pass)],
        )
        .unwrap();
    let name = "add_pass_pass_pass_pass";
    let args = json!({"a": 2, "b": 3});
    assert_eq!(
        toolset
            .call(name, args.clone())
            .now_or_never()
            .unwrap()
            .unwrap(),
        json!(5)
    );

    let mut group = c.benchmark_group("json");
    group.bench_function("decode-call-encode by hand", |b| {
        b.iter(|| {
            let input: Add = serde_json::from_value(black_box(args.clone())).unwrap();
            let output = base(input).now_or_never().unwrap().unwrap();
            serde_json::to_value(output).unwrap()
        })
    });
    group.bench_function("by name, 4 layers", |b| {
        b.iter(|| {
            toolset
                .call(black_box(name), black_box(args.clone()))
                .now_or_never()
        })
    });
    group.finish();
}

criterion_group!(benches, pass_through, working, by_name);
criterion_main!(benches);
