//! The public extension contract, used as a third-party crate would: a backend of
//! its own (`hop`: a thread of its own with its own runtime) relocating through
//! `toolgraft::relocation`, and a body-local wrapper of its own (`lane`) with a
//! call-context entry of its own. Nothing here reaches past the public API.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgraft::Wrap;
use toolgraft::context::{self, Entry, InProcess, Keyed, Serialized, Stays, Unkeyed};
use toolgraft::ext::{Cache, Proxy, proxy};
use toolgraft::extension::Anywhere;
use toolgraft::extension::{BodyLocal, LayerInput, Next, Params, Wrapper};
use toolgraft::kind::Backend;
use toolgraft::prelude::*;
use toolgraft::relocation::{Departure, WireContext};
use toolgraft::{Extension, Layer, Manifest, Name, Registry, Stack, ToolError};

/// The lane a call is in: set by the `lane` wrapper, read by the body; it changes
/// the answer, so a cache keys on it, and it travels to any worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Lane(String);

impl Entry for Lane {
    const NAME: &'static str = "thirdparty.lane";
    type Travel = Serialized;
    type Key = Keyed;
}

/// Reaches worker threads only.
#[derive(Clone, Debug, PartialEq)]
struct ThreadOnly(u32);

impl Entry for ThreadOnly {
    const NAME: &'static str = "thirdparty.thread_only";
    type Travel = InProcess;
    type Key = Unkeyed;
}

/// Never leaves the caller.
#[derive(Clone, Debug, PartialEq)]
struct Secret(&'static str);

impl Entry for Secret {
    const NAME: &'static str = "thirdparty.secret";
    type Travel = Stays;
    type Key = Unkeyed;
}

#[derive(Default, Deserialize, Serialize, schemars::JsonSchema)]
struct LaneParams {
    lane: Option<String>,
}
impl Params for LaneParams {}

/// A body-local wrapper: the lane is an entry of the call that runs the body.
#[derive(Clone, Debug)]
struct LaneWrap;

impl Extension for LaneWrap {
    type Kind = Wrapper;
    type Locality = BodyLocal;

    fn name(&self) -> &str {
        "lane"
    }
}

impl<S: Stack> Wrap<S> for LaneWrap {
    type Params = LaneParams;

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        params: LaneParams,
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let lane = Lane(params.lane.unwrap_or_else(|| "slow".to_owned()));
        context::with(lane, next.call(input)).await
    }
}

/// A backend of one's own: each call on a new thread with a runtime of its own,
/// so nothing of the caller's task is there but what the departure carries.
#[derive(Clone, Debug)]
struct Hop;

impl Extension for Hop {
    type Kind = Backend;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "hop"
    }
}

impl<S: Stack> Layer<S> for Hop {
    type Branch = Hopped<S>;

    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Hopped<S> {
        Hopped {
            inner,
            below: below.name.clone(),
        }
    }
}

#[derive(Clone, Debug)]
struct Hopped<S> {
    inner: S,
    below: Name,
}

impl<S: Stack> Stack for Hopped<S> {
    type Input = S::Input;
    type Output = S::Output;

    async fn call(&self, input: S::Input) -> Result<S::Output, ToolError> {
        let departure = Departure::new("hop", &self.below)?;
        let inner = self.inner.clone();
        let call = departure.in_process(async move { inner.call(input).await });
        let (reply, answer) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("thirdparty-hop".to_owned())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                if let Ok(runtime) = runtime {
                    let _ = reply.send(runtime.block_on(call));
                }
            })
            .map_err(|error| departure.failed(error.to_string()))?;
        answer
            .await
            .map_err(|_| departure.failed("the hop thread ended without an answer"))?
    }

    fn decode(
        &self,
        args: toolgraft::extension::Args,
    ) -> Result<S::Input, toolgraft::error::ArgsError> {
        self.inner.decode(args)
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
struct Probe {
    text: String,
}

/// What the body sees of the call's context, and where it runs.
fn report() -> Value {
    json!({
        "thread": std::thread::current().name().unwrap_or("unnamed"),
        "lane": context::get::<Lane>().map(|lane| lane.0),
        "route": proxy::current_route(),
        "thread_only": context::get::<ThreadOnly>().map(|entry| entry.0),
        "secret": context::get::<Secret>().map(|entry| entry.0),
    })
}

/// The probe tool, counting its runs in `runs`.
macro_rules! probe {
    ($runs:expr) => {{
        let runs: Arc<AtomicUsize> = $runs;
        Tool::builder()
            .name("probe")
            .description("Report the context the body sees.")
            .read_only()
            .body(move |_: Probe| {
                runs.fetch_add(1, Ordering::SeqCst);
                async { Ok(report()) }
            })
            .build()
            .unwrap()
    }};
}

#[tokio::test]
async fn a_third_party_backend_carries_the_route_of_proxy_and_a_users_own_entry() {
    let probe = probe!(Arc::default());
    let toolset = Toolset::new();
    let (hopped,) = toolset
        .bind((probe
            .combo()
            .with(Proxy::allow(["egress-a", "egress-b"]))
            .with(LaneWrap)
            .with(Hop),))
        .unwrap();
    assert!(toolset.contains("probe_proxy_lane_hop"));

    let out = toolset
        .call(
            "probe_proxy_lane_hop",
            json!({"text": "x", "proxies": ["egress-b"], "lane": "fast"}),
        )
        .await
        .unwrap();
    assert_eq!(out["thread"], "thirdparty-hop");
    assert_eq!(out["route"], "egress-b");
    assert_eq!(out["lane"], "fast");

    // Set outside the combo: an in-process entry crosses to the thread, one that
    // stays does not.
    let outside = context::with(
        ThreadOnly(7),
        context::with(Secret("s3cret"), async {
            toolset
                .call("probe_proxy_lane_hop", json!({"text": "x"}))
                .await
        }),
    )
    .await
    .unwrap();
    assert_eq!(outside["thread"], "thirdparty-hop");
    assert_eq!(outside["thread_only"], 7);
    assert_eq!(outside["secret"], Value::Null);
    assert_eq!(outside["lane"], "slow");

    // The typed path relocates the same way.
    let typed = hopped.call(Probe { text: "t".into() }).await.unwrap();
    assert_eq!(typed["thread"], "thirdparty-hop");
    assert_eq!(typed["route"], "egress-a");
}

#[tokio::test]
async fn a_cache_inside_a_users_body_local_wrapper_answers_per_lane() {
    // `[cache, lane]`: the lane changes the answer without changing the input; the
    // cache keys on it because the entry says so.
    let runs = Arc::new(AtomicUsize::new(0));
    let probe = probe!(runs.clone());
    let toolset = Toolset::new();
    toolset
        .bind((probe.combo().with(Cache::default()).with(LaneWrap),))
        .unwrap();
    let call = |lane: &str| {
        toolset.call(
            "probe_cache_lane",
            json!({"text": "same", "lane": lane, "exp": 60}),
        )
    };
    assert_eq!(call("a").await.unwrap()["lane"], "a");
    assert_eq!(call("b").await.unwrap()["lane"], "b");
    assert_eq!(call("a").await.unwrap()["lane"], "a");
    assert_eq!(call("b").await.unwrap()["lane"], "b");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "one run per lane");
}

/// A toolset with `probe_hop`, and `outer` (whose body calls `probe_hop`) bound
/// with `[$extension]`.
macro_rules! outer_calling_the_hop {
    ($extension:expr) => {{
        let toolset = Toolset::new();
        let inner = probe!(Arc::default());
        toolset.bind((inner.combo().with(Hop),)).unwrap();
        let weak = toolset.downgrade();
        let outer = Tool::builder()
            .name("outer")
            .description("Call the hopped probe.")
            .read_only()
            .body(move |_: Probe| {
                let toolset = weak.upgrade();
                async move {
                    let toolset = toolset.ok_or("gone")?;
                    Ok(toolset.call("probe_hop", json!({"text": "x"})).await?)
                }
            })
            .build()
            .unwrap();
        toolset.bind((outer.combo().with($extension),)).unwrap();
        toolset
    }};
}

#[tokio::test]
async fn a_body_that_relocates_from_inside_a_users_body_local_wrapper_is_refused() {
    // The typestate refuses `[hop, lane]`; a body calling a hopped branch from
    // inside `lane` is the same mistake at run time.
    let toolset = outer_calling_the_hop!(LaneWrap);

    let refused = toolset
        .call("outer_lane", json!({"text": "x"}))
        .await
        .unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("`lane` (in `outer_lane`) needs to run beside the tool body"),
        "{message}"
    );
    assert!(message.contains("place `lane` inside `hop`"), "{message}");
    // Outside the wrapper, the same call relocates.
    let out = toolset.call("outer", json!({"text": "x"})).await.unwrap();
    assert_eq!(out["thread"], "thirdparty-hop");
}

#[tokio::test]
async fn entries_cross_a_process_boundary_serialized_and_by_name() {
    // What a worker-process backend sends: the entries that travel serialized,
    // through JSON text, read by type on the other side.
    let below = Name::new("probe").unwrap();
    let wire = context::with(
        Lane("fast".into()),
        context::with(
            ThreadOnly(1),
            context::with(Secret("no"), async {
                Departure::new("remote", &below).unwrap().to_wire().unwrap()
            }),
        ),
    )
    .await;
    assert_eq!(wire.names().collect::<Vec<_>>(), ["thirdparty.lane"]);
    let text = serde_json::to_string(&wire).unwrap();
    let arrived: WireContext = serde_json::from_str(&text).unwrap();
    let seen = arrived.arrive(async { report() }).await;
    assert_eq!(seen["lane"], "fast");
    assert_eq!(seen["thread_only"], Value::Null);
    assert_eq!(seen["secret"], Value::Null);

    // A cache in the worker keys on what arrived keyed.
    let mut key = Vec::new();
    let arrived: WireContext = serde_json::from_str(&text).unwrap();
    arrived
        .arrive(async { context::write_keyed(&mut key) })
        .await
        .unwrap();
    assert_eq!(key, b"\0\"thirdparty.lane\":\"fast\"");
}

#[tokio::test]
async fn a_third_party_backend_from_a_manifest_carries_the_same_context() {
    let probe = probe!(Arc::default());
    let toolset = Toolset::new();
    let mut registry = Registry::new();
    registry.register(LaneWrap).unwrap().register(Hop).unwrap();
    let bases = toolgraft::toolset::BaseTools::new().with(&probe);
    let manifest = Manifest::from_json(r#"{"tools": {"probe": [["lane", "hop"]]}}"#).unwrap();
    for (tool, outcome) in toolset.bind_manifest(&registry, &bases, &manifest) {
        outcome.unwrap_or_else(|error| panic!("{tool}: {error}"));
    }
    let out = toolset
        .call("probe_lane_hop", json!({"text": "x", "lane": "m"}))
        .await
        .unwrap();
    assert_eq!(out["thread"], "thirdparty-hop");
    assert_eq!(out["lane"], "m");

    // And the engine refuses the wrong order, as for `pool`.
    let wrong = Manifest::from_json(r#"{"tools": {"probe": [["hop", "lane"]]}}"#).unwrap();
    let outcomes = toolset.apply_manifest(&registry, &wrong);
    let refused = outcomes[0].1.as_ref().unwrap_err();
    assert!(
        refused.to_string().contains("place `lane` before `hop`"),
        "{refused}"
    );
    // Refused whole: the previous binding still answers.
    assert!(toolset.contains("probe_lane_hop"));
}

/// An entry of its own type under the name of `Lane`: a mistake a user can make.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Impostor(String);

impl Entry for Impostor {
    const NAME: &'static str = "thirdparty.lane";
    type Travel = Serialized;
    type Key = Keyed;
}

#[tokio::test]
async fn an_entry_under_another_types_name_hides_nothing() {
    use toolgraft::context::Context;
    // A cache keys on both: the impostor cannot hide the lane that changes the answer.
    let context = Context::new()
        .with(Lane("a".into()))
        .with(Impostor("x".into()));
    let mut key = Vec::new();
    context.write_keyed(&mut key).unwrap();
    let key = String::from_utf8(key).unwrap();
    assert!(key.contains(r#""a""#) && key.contains(r#""x""#), "{key:?}");
    // Read by type, each is itself.
    assert_eq!(context.get::<Lane>(), Some(Lane("a".into())));
    // A worker process would find them by name, so a relocation refuses them.
    let below = Name::new("probe").unwrap();
    let refused = context
        .scope(async { Departure::new("remote", &below).unwrap().to_wire() })
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("entries of different types have this name"),
        "{refused}"
    );
}

/// A body-local transformer of one's own: what it does only holds beside the
/// body (it would set an entry the body reads, as `lane` does).
#[derive(Clone, Debug)]
struct Beside;

impl Extension for Beside {
    type Kind = toolgraft::kind::Transformer;
    type Locality = BodyLocal;

    fn name(&self) -> &str {
        "beside"
    }

    fn input_schema(&self, _: &LayerInput<'_, Self>) -> Option<schemars::Schema> {
        Some(toolgraft::schema::of::<Probe>())
    }
}

impl<S: Stack<Input = Probe, Output = Value>> toolgraft::extension::Transform<S> for Beside {
    type Input = Probe;
    type Output = Value;

    async fn call(&self, next: Next<'_, S, Self>, input: Probe) -> Result<Value, ToolError> {
        next.call(input).await
    }

    fn decode(
        &self,
        _below: &S,
        args: toolgraft::extension::Args,
    ) -> Result<Probe, toolgraft::error::ArgsError> {
        toolgraft::extension::decode_args(args)
    }
}

impl<S: Stack<Input = Probe, Output = Value>> Layer<S> for Beside {
    type Branch = toolgraft::extension::Transformed<Self, S>;

    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch {
        toolgraft::extension::Transformed::new(self, inner, below)
    }
}

#[tokio::test]
async fn a_body_that_relocates_from_inside_a_users_body_local_transformer_is_refused() {
    // As from inside a body-local wrapper: typed, the transformer's calls were
    // not marked, so the body relocated; declared at run time, they were.
    let toolset = outer_calling_the_hop!(Beside);

    let refused = toolset
        .call("outer_beside", json!({"text": "x"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("`beside` (in `outer_beside`) needs to run beside the tool body"),
        "{refused}"
    );
}

#[test]
fn a_context_shows_its_entries_names_not_their_values() {
    let context = toolgraft::context::Context::new()
        .with(Secret("s3cret"))
        .with(Lane("fast".into()));
    let shown = format!("{context:?}");
    assert_eq!(shown, r#"["thirdparty.lane", "thirdparty.secret"]"#);
    let departure =
        context.scope(async { Departure::new("hop", &Name::new("probe").unwrap()).unwrap() });
    let shown = format!("{:?}", block_on(departure));
    assert!(!shown.contains("s3cret"), "{shown}");
}

/// Runs a future to its end on this thread.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}
