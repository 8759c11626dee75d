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
use futures_util::FutureExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::Wrap;
use toolgraft::error::BoxError;
use toolgraft::ext::{Cache, Trace};
use toolgraft::extension::{Anywhere, Next};
use toolgraft::prelude::*;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;
use toolgraft::{Name, Registry, ToolError};
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

impl Extension for Pass {
    type Kind = toolgraft::extension::Wrapper;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "pass"
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

/// Adds one to the result.
#[derive(Clone)]
struct Work;

/// An output `Work` can add one to: the typed `i64`, and the run-time JSON number
/// (so `Work` fits `DynStack` too, as every wrapper must).
trait Countable: Send + 'static {
    fn plus_one(self) -> Self;
}

impl Countable for i64 {
    #[inline]
    fn plus_one(self) -> Self {
        self + 1
    }
}

impl Countable for serde_json::Value {
    fn plus_one(self) -> Self {
        self.as_i64().map_or(self, |n| (n + 1).into())
    }
}

impl Extension for Work {
    type Kind = toolgraft::extension::Wrapper;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "work"
    }
}

impl<S: Stack<Output: Countable>> Wrap<S> for Work {
    type Params = ();
    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        Ok(next.call(input).await?.plus_one())
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

/// Deeper pass-through stacks, for the depth series (typed at 64 against 8).
macro_rules! hand_nested_pass {
    ($( $name:ident => $inner:ident );* $(;)?) => {$(
        async fn $name(input: Add) -> Result<i64, ToolError> {
            $inner(input).await
        }
    )*};
}

hand_nested_pass! {
    pass_9 => pass_8;
    pass_10 => pass_9;
    pass_11 => pass_10;
    pass_12 => pass_11;
    pass_13 => pass_12;
    pass_14 => pass_13;
    pass_15 => pass_14;
    pass_16 => pass_15;
    pass_17 => pass_16;
    pass_18 => pass_17;
    pass_19 => pass_18;
    pass_20 => pass_19;
    pass_21 => pass_20;
    pass_22 => pass_21;
    pass_23 => pass_22;
    pass_24 => pass_23;
    pass_25 => pass_24;
    pass_26 => pass_25;
    pass_27 => pass_26;
    pass_28 => pass_27;
    pass_29 => pass_28;
    pass_30 => pass_29;
    pass_31 => pass_30;
    pass_32 => pass_31;
    pass_33 => pass_32;
    pass_34 => pass_33;
    pass_35 => pass_34;
    pass_36 => pass_35;
    pass_37 => pass_36;
    pass_38 => pass_37;
    pass_39 => pass_38;
    pass_40 => pass_39;
    pass_41 => pass_40;
    pass_42 => pass_41;
    pass_43 => pass_42;
    pass_44 => pass_43;
    pass_45 => pass_44;
    pass_46 => pass_45;
    pass_47 => pass_46;
    pass_48 => pass_47;
    pass_49 => pass_48;
    pass_50 => pass_49;
    pass_51 => pass_50;
    pass_52 => pass_51;
    pass_53 => pass_52;
    pass_54 => pass_53;
    pass_55 => pass_54;
    pass_56 => pass_55;
    pass_57 => pass_56;
    pass_58 => pass_57;
    pass_59 => pass_58;
    pass_60 => pass_59;
    pass_61 => pass_60;
    pass_62 => pass_61;
    pass_63 => pass_62;
    pass_64 => pass_63;
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
        .read_only()
        .body(add)
        .build()
        .unwrap()
}

/// `$start` with `.$method($layer)` applied once per token after the `;`.
macro_rules! layered {
    ($start:expr, $method:ident($layer:expr); $($times:tt)*) => {
        layered!(@ $start, $method, $layer; $($times)*)
    };
    (@ $acc:expr, $method:ident, $layer:expr; ) => { $acc };
    (@ $acc:expr, $method:ident, $layer:expr; $head:tt $($rest:tt)*) => {
        layered!(@ $acc.$method($layer), $method, $layer; $($rest)*)
    };
}

/// A toolset that binds a 64-element combo (and its 128-byte names).
fn deep_toolset() -> Toolset {
    let limits = toolgraft::limits::Limits::default()
        .with_max_combo_len(64)
        .with_max_name_len(1024);
    Toolset::with_limits(limits).unwrap()
}

fn pass_through(c: &mut Criterion) {
    let tool = tool();
    let toolset = deep_toolset();
    let (one, four, eight, sixteen, sixty_four) = toolset
        .bind((
            layered!(tool.combo(), with(Pass); x),
            layered!(tool.combo(), with(Pass); x x x x),
            layered!(tool.combo(), with(Pass); x x x x x x x x),
            layered!(tool.combo(), with(Pass); x x x x x x x x x x x x x x x x),
            layered!(tool.combo(), with(Pass); x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x),
        ))
        .unwrap();
    let service = tower::service_fn(base);
    let mut tower_1 = layered!(ServiceBuilder::new(), layer(PassLayer); x).service(service);
    let mut tower_4 = layered!(ServiceBuilder::new(), layer(PassLayer); x x x x).service(service);
    let mut tower_8 =
        layered!(ServiceBuilder::new(), layer(PassLayer); x x x x x x x x).service(service);
    let mut tower_16 =
        layered!(ServiceBuilder::new(), layer(PassLayer); x x x x x x x x x x x x x x x x)
            .service(service);
    let mut tower_64 = layered!(ServiceBuilder::new(), layer(PassLayer); x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x).service(service);
    for answer in [
        one.call(input()).now_or_never(),
        sixty_four.call(input()).now_or_never(),
        pass_64(input()).now_or_never(),
        tower_call(&mut tower_64, input()),
    ] {
        assert_eq!(answer.unwrap().unwrap(), 5);
    }

    let mut group = c.benchmark_group("pass-through");
    macro_rules! depth {
        ($depth:literal, $typed:ident, $hand:ident, $tower:ident) => {
            group.bench_function(concat!($depth, "/typed"), |b| {
                b.iter(|| $typed.call(black_box(input())).now_or_never())
            });
            group.bench_function(concat!($depth, "/hand-nested"), |b| {
                b.iter(|| $hand(black_box(input())).now_or_never())
            });
            group.bench_function(concat!($depth, "/tower"), |b| {
                b.iter(|| tower_call(&mut $tower, black_box(input())))
            });
        };
    }
    depth!(1, one, pass_1, tower_1);
    depth!(4, four, pass_4, tower_4);
    depth!(8, eight, pass_8, tower_8);
    depth!(16, sixteen, pass_16, tower_16);
    depth!(64, sixty_four, pass_64, tower_64);
    group.finish();
}

fn working(c: &mut Criterion) {
    let tool = tool();
    let toolset = Toolset::new();
    let (eight,) = toolset
        .bind((tool
            .combo()
            .with(Work)
            .with(Work)
            .with(Work)
            .with(Work)
            .with(Work)
            .with(Work)
            .with(Work)
            .with(Work),))
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
        .bind((layered!(tool.combo(), with(Pass); x x x x),))
        .unwrap();
    let name = "add_pass_pass_pass_pass";
    let args = json!({"a": 2, "b": 3});
    assert_eq!(call(&toolset, name, &args), json!(5));

    let mut group = c.benchmark_group("json");
    group.bench_function("decode-call-encode by hand", |b| {
        b.iter(|| {
            let input: Add = serde_json::from_value(black_box(args.clone())).unwrap();
            let output = base(input).now_or_never().unwrap().unwrap();
            serde_json::to_value(output).unwrap()
        })
    });
    group.bench_function("by name, base", |b| {
        b.iter(|| {
            toolset
                .call(black_box("add"), black_box(args.clone()))
                .now_or_never()
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

/// One call by name, answered at once.
fn call(toolset: &Toolset, name: &str, args: &serde_json::Value) -> serde_json::Value {
    toolset
        .call(name, args.clone())
        .now_or_never()
        .expect("a ready body answers at once")
        .unwrap()
}

/// The same pass-through branch bound typed and bound from a manifest, called by
/// name: what a run-time layer costs over a typed one.
fn run_time_layers(c: &mut Criterion) {
    let tool = tool();
    let typed = Toolset::new();
    typed
        .bind((layered!(tool.combo(), with(Pass); x x x x),))
        .unwrap();
    let mut registry = Registry::new();
    registry.register(Pass).unwrap();
    let manifest =
        Manifest::from_json(r#"{"tools": {"add": [["pass", "pass", "pass", "pass"]]}}"#).unwrap();
    let mut bases = BaseTools::new();
    bases.add(&tool);
    let from_manifest = Toolset::new();
    for (tool, bound) in from_manifest.bind_manifest(&registry, &bases, &manifest) {
        bound.unwrap_or_else(|err| panic!("{tool}: {err}"));
    }
    let args = json!({"a": 2, "b": 3});
    let names = [
        "add",
        "add_pass",
        "add_pass_pass",
        "add_pass_pass_pass_pass",
    ];
    for name in names {
        assert_eq!(call(&typed, name, &args), json!(5));
        assert_eq!(call(&from_manifest, name, &args), json!(5));
    }

    let mut group = c.benchmark_group("run-time layers");
    for (layers, name) in [0, 1, 2, 4].into_iter().zip(names) {
        for (bound, toolset) in [("typed", &typed), ("manifest", &from_manifest)] {
            group.bench_function(format!("{layers}/{bound}"), |b| {
                b.iter(|| {
                    toolset
                        .call(black_box(name), black_box(args.clone()))
                        .now_or_never()
                })
            });
        }
    }
    group.finish();
}

/// `[trace, cache]` answering from the cache: a typed call of the branch, and by
/// name, bound typed and from a manifest.
fn trace_cache_hit(c: &mut Criterion) {
    let tool = tool();
    let typed = Toolset::new();
    let (branch,) = typed
        .bind((tool.combo().with(Trace).with(Cache::default()),))
        .unwrap();
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap();
    let manifest = Manifest::from_json(r#"{"tools": {"add": ["trace", "cache"]}}"#).unwrap();
    let mut bases = BaseTools::new();
    bases.add(&tool);
    let from_manifest = Toolset::new();
    for (tool, bound) in from_manifest.bind_manifest(&registry, &bases, &manifest) {
        bound.unwrap_or_else(|err| panic!("{tool}: {err}"));
    }
    let name = "add_trace_cache";
    let args = json!({"a": 2, "b": 3});
    // The first calls fill the caches; everything timed below is a hit.
    assert_eq!(branch.call(input()).now_or_never().unwrap().unwrap(), 5);
    assert_eq!(call(&typed, name, &args), json!(5));
    assert_eq!(call(&from_manifest, name, &args), json!(5));

    let mut group = c.benchmark_group("trace+cache hit");
    group.bench_function("typed call", |b| {
        b.iter(|| branch.call(black_box(input())).now_or_never())
    });
    for (bound, toolset) in [("typed", &typed), ("manifest", &from_manifest)] {
        group.bench_function(format!("by name, bound {bound}"), |b| {
            b.iter(|| {
                toolset
                    .call(black_box(name), black_box(args.clone()))
                    .now_or_never()
            })
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    pass_through,
    working,
    by_name,
    run_time_layers,
    trace_cache_hit
);
criterion_main!(benches);
