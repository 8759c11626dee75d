// Helpers generic over combos, written with `Takes` and `With` only (no typestate
// names), composed, and applied past one and two segments (8 and 16 layers): the
// combo binds, and calls go through typed and by name.
use toolgraft::combo::{Takes, With};
use toolgraft::ext::{Cache, CacheParams, Trace};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn traced<C: Takes<Trace>>(combo: C) -> With<C, Trace> {
    combo.with(Trace)
}

fn cached<C: Takes<Cache>>(combo: C) -> With<C, Cache> {
    combo.with(Cache::default())
}

/// Two layers, each bound stated on the combo so far.
fn cached_then_traced<C>(combo: C) -> With<With<C, Cache>, Trace>
where
    C: Takes<Cache>,
    With<C, Cache>: Takes<Trace>,
{
    traced(cached(combo))
}

/// Two traces, named once: aliases compose like the helpers.
type Traced2<C> = With<With<C, Trace>, Trace>;

/// Four traces: a helper built on helpers.
fn four<C>(combo: C) -> Traced2<Traced2<C>>
where
    C: Takes<Trace>,
    With<C, Trace>: Takes<Trace>,
    Traced2<C>: Takes<Trace>,
    With<Traced2<C>, Trace>: Takes<Trace>,
{
    traced(traced(traced(traced(combo))))
}

#[tokio::main]
async fn main() {
    let shout = Tool::builder()
        .name("s")
        .description("Return the text.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    // 18 layers: 4 + 4 + 2 + 4 + 4, the helpers' own layers crossing both segments.
    let combo = four(four(cached_then_traced(four(four(shout.combo())))));
    assert_eq!(
        combo.name(),
        "s_trace_trace_trace_trace_trace_trace_trace_trace_cache_trace\
         _trace_trace_trace_trace_trace_trace_trace_trace"
    );
    let toolset = Toolset::new();
    let (branch,) = toolset.bind((combo,)).unwrap();
    let typed = branch
        .params(CacheParams { exp: Some(30.0) })
        .call(Shout { text: "hi".into() })
        .await
        .unwrap();
    assert_eq!(typed, "hi");
    let by_name = toolset
        .call(branch.name(), serde_json::json!({"text": "hi", "exp": 30}))
        .await
        .unwrap();
    assert_eq!(by_name, serde_json::json!("hi"));
}
