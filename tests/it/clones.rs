//! The run-time input's clone through every kind of run-time layer: a typed
//! wrapper over `DynStack` and a run-time wrapper that call the layer below again
//! with clones, over reserved params of typed and run-time wrappers (body-local
//! ones too), a pool, a batch and a transformer over raw arguments, stacked in
//! either order. The body refuses unknown fields, so a reserved param that reached
//! it would fail the call.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolgraft::Wrap;
use toolgraft::ext::{Batch, Cache, Pool, Trace};
use toolgraft::extension::{Anywhere, Next, Placement, Wrapper};
use toolgraft::kind::ExtensionKind;
use toolgraft::prelude::*;
use toolgraft::runtime::{Configured, DynBranch, DynExtension, DynStack};
use toolgraft::toolset::BaseTools;
use toolgraft::{Registry, ToolError};

/// Calls the layer below twice, with a clone and then the input.
#[derive(Clone, Debug)]
struct Twice;

impl Extension for Twice {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "twice"
    }
}

impl<S: Stack<Input: Clone>> Wrap<S> for Twice {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        next.call(input.clone()).await?;
        next.call(input).await
    }
}

#[derive(Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Rec {
    text: String,
}

type Seen = Arc<Mutex<Vec<String>>>;

fn rec(seen: Seen) -> impl BaseTool<Input = Rec, Output = String> {
    Tool::builder()
        .name("rec")
        .description("Record the text.")
        .read_only()
        .body(move |input: Rec| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(input.text.clone());
                Ok(input.text)
            }
        })
        .build()
        .unwrap()
}

fn expiring(name: &'static str, param: &'static str, body_local: bool, log: Seen) -> DynExtension {
    DynExtension::builder()
        .name(name)
        .kind(ExtensionKind::Wrapper)
        .placement(if body_local {
            Placement::BesideBody
        } else {
            Placement::Anywhere
        })
        .reserved(
            schemars::json_schema!({"type": "object", "properties": {param: {"type": "number"}}}),
        )
        .factory(move |layer| {
            let log = log.clone();
            let stack = DynStack::around(
                layer.input.branch.clone(),
                layer.below.clone(),
                move |input, below| {
                    log.lock()
                        .unwrap()
                        .push(serde_json::to_string(&input).unwrap());
                    async move { below.call(input).await }
                },
            );
            Ok(DynBranch::builder().stack(stack).build())
        })
        .build()
}

/// A run-time wrapper that calls below three times: with a clone, a clone of the
/// clone, and the input.
fn again(log: Seen) -> DynExtension {
    DynExtension::builder()
        .name("again")
        .kind(ExtensionKind::Wrapper)
        .reserved(
            schemars::json_schema!({"type": "object", "properties": {"tag": {"type": "string"}}}),
        )
        .factory(move |layer| {
            let log = log.clone();
            let stack = DynStack::around(
                layer.input.branch.clone(),
                layer.below.clone(),
                move |input, below| {
                    let log = log.clone();
                    async move {
                        let copy = input.clone();
                        // A clone shows the arguments as given, as the input does.
                        assert_eq!(format!("{copy:?}"), format!("{input:?}"));
                        assert_eq!(
                            serde_json::to_value(&copy).unwrap(),
                            serde_json::to_value(&input).unwrap()
                        );
                        log.lock().unwrap().push(format!("{copy:?}"));
                        let copy2 = copy.clone();
                        below.call(copy).await?;
                        below.call(copy2).await?;
                        below.call(input).await
                    }
                },
            );
            Ok(DynBranch::builder().stack(stack).build())
        })
        .build()
}

/// A run-time transformer over raw arguments that renames `words` to `text`.
fn renamed() -> DynExtension {
    DynExtension::builder()
        .name("renamed")
        .kind(ExtensionKind::Transformer)
        .factory(|layer| {
            let below = layer.below.clone();
            let stack = DynStack::from_fn(layer.input.branch.clone(), move |mut args| {
                let below = below.clone();
                async move {
                    let words = args.remove("words").unwrap_or(Value::Null);
                    args.insert("text".into(), words);
                    Ok(below.call_json(args).await?)
                }
            });
            Ok(DynBranch::builder()
                .stack(stack)
                .input_schema(schemars::json_schema!({"type": "object", "properties": {"words": {"type": "string"}}, "required": ["words"]}))
                .build())
        })
        .build()
}

fn registry(log: Seen) -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Twice)
        .unwrap()
        // Stores nothing (no result fits a byte), so every call runs through:
        // what is counted is the clones, not the cache's hits.
        .register(Configured::new(Cache::new(
            toolgraft::ext::cache::CacheConfig {
                max_bytes: 1,
                ..Default::default()
            },
        )))
        .unwrap()
        .register(Configured::new(Batch::default()))
        .unwrap()
        .register(Trace)
        .unwrap()
        .register(Pool::new(1).unwrap())
        .unwrap()
        .register(expiring("expiring", "exp_a", false, log.clone()))
        .unwrap()
        .register(expiring("local", "exp_b", true, log.clone()))
        .unwrap()
        .register(expiring("expiring2", "exp_c", false, log.clone()))
        .unwrap()
        .register(again(log))
        .unwrap()
        .register(renamed())
        .unwrap();
    registry
}

fn bound(seen: &Seen, log: &Seen, combos: Value) -> Toolset {
    let toolset = Toolset::new();
    let manifest = toolgraft::Manifest::from_value(&json!({"tools": {"rec": combos}})).unwrap();
    let base = rec(seen.clone());
    for (tool, bound) in toolset.bind_manifest(
        &registry(log.clone()),
        &BaseTools::new().with(&base),
        &manifest,
    ) {
        bound.unwrap_or_else(|err| panic!("{tool}: {err}"));
    }
    toolset
}

async fn run(
    combo: Value,
    name: &str,
    args: Value,
) -> (Result<Value, ToolError>, Vec<String>, Vec<String>) {
    let seen = Seen::default();
    let log = Seen::default();
    let toolset = bound(&seen, &log, json!([combo]));
    let result = toolset.call(name, args).await;
    let seen = seen.lock().unwrap().clone();
    let log = log.lock().unwrap().clone();
    (result, seen, log)
}

#[tokio::test]
async fn clones_through_every_run_time_layer() {
    let cases: Vec<(Value, &str, Value, usize)> = vec![
        // (combo, branch called, arguments, calls of the body)
        (json!(["twice"]), "rec_twice", json!({"text": "a"}), 2),
        (
            json!(["twice", "twice"]),
            "rec_twice_twice",
            json!({"text": "a"}),
            4,
        ),
        (
            json!(["pool", "twice"]),
            "rec_pool_twice",
            json!({"text": "a"}),
            2,
        ),
        (
            json!(["twice", "pool"]),
            "rec_twice_pool",
            json!({"text": "a"}),
            2,
        ),
        (
            json!(["cache", "twice"]),
            "rec_cache_twice",
            json!({"text": "a", "exp": 1}),
            2,
        ),
        (
            json!(["twice", "cache"]),
            "rec_twice_cache",
            json!({"text": "a", "exp": 1}),
            2,
        ),
        (
            json!(["expiring", "twice"]),
            "rec_expiring_twice",
            json!({"text": "a", "exp_a": 1}),
            2,
        ),
        (
            json!(["twice", "expiring"]),
            "rec_twice_expiring",
            json!({"text": "a", "exp_a": 1}),
            2,
        ),
        (
            json!(["local", "twice"]),
            "rec_local_twice",
            json!({"text": "a", "exp_b": 1}),
            2,
        ),
        (
            json!(["local", "twice", "pool"]),
            "rec_local_twice_pool",
            json!({"text": "a", "exp_b": 1}),
            2,
        ),
        (
            json!(["expiring", "cache", "local", "twice", "expiring2"]),
            "rec_expiring_cache_local_twice_expiring2",
            json!({"text": "a", "exp_a": 1, "exp": 1, "exp_b": 2, "exp_c": 3}),
            2,
        ),
        (
            json!(["again"]),
            "rec_again",
            json!({"text": "a", "tag": "t"}),
            3,
        ),
        (
            json!(["twice", "again"]),
            "rec_twice_again",
            json!({"text": "a", "tag": "t"}),
            6,
        ),
        (
            json!(["cache", "again"]),
            "rec_cache_again",
            json!({"text": "a", "tag": "t", "exp": 1}),
            3,
        ),
        (
            json!(["expiring", "cache", "again", "twice"]),
            "rec_expiring_cache_again_twice",
            json!({"text": "a", "tag": "t", "exp": 1, "exp_a": 3}),
            6,
        ),
        (
            json!(["batch", "twice"]),
            "rec_batch_twice",
            json!({"items": [{"text": "a"}, {"text": "b"}]}),
            4,
        ),
        (
            json!(["expiring", "batch", "again"]),
            "rec_expiring_batch_again",
            json!({"items": [{"text": "a", "exp_a": 1}, {"text": "b", "exp_a": 2}], "tag": "x", "parallel": false}),
            6,
        ),
        (
            json!(["cache", "batch", "twice"]),
            "rec_cache_batch_twice",
            json!({"items": [{"text": "a", "exp": 1}, {"text": "b", "exp": 1}], "max_concurrent": 1, "parallel": true}),
            4,
        ),
        (
            json!(["renamed", "twice"]),
            "rec_renamed_twice",
            json!({"words": "a"}),
            2,
        ),
        (
            json!(["renamed", "again"]),
            "rec_renamed_again",
            json!({"words": "a", "tag": "q"}),
            3,
        ),
        (
            json!(["twice", "renamed", "again"]),
            "rec_twice_renamed_again",
            json!({"words": "a", "tag": "q"}),
            6,
        ),
    ];
    let mut failures = Vec::new();
    for (combo, name, args, calls) in cases {
        let (result, seen, log) = run(combo.clone(), name, args.clone()).await;
        let ok = result.is_ok() && seen.len() == calls;
        if !ok {
            failures.push(format!(
                "{combo} {args}: {result:?} seen {seen:?} log {log:?}"
            ));
        } else {
            eprintln!("ok {combo}: log {log:?}");
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Panics making its per-branch state, or declaring its output schema.
#[derive(Clone, Debug)]
struct Fragile {
    in_for_branch: bool,
}

impl Extension for Fragile {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "fragile"
    }

    fn output_schema(
        &self,
        below: &toolgraft::extension::LayerInput<'_, Self>,
    ) -> Option<schemars::Schema> {
        assert!(self.in_for_branch, "no schema for this branch");
        below.output_schema.cloned()
    }
}

impl<S: Stack> Wrap<S> for Fragile {
    type Params = ();

    fn for_branch(self, _: &toolgraft::extension::LayerInput<'_, Self>) -> Self {
        assert!(!self.in_for_branch, "no state for this branch");
        self
    }

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        next.call(input).await
    }
}

#[test]
fn a_panic_in_for_branch_or_output_schema_refuses_the_tool_from_a_manifest() {
    for in_for_branch in [true, false] {
        let mut registry = Registry::new();
        registry.register(Fragile { in_for_branch }).unwrap();
        let seen = Seen::default();
        let base = rec(seen);
        let toolset = Toolset::new();
        let manifest =
            toolgraft::Manifest::from_value(&json!({"tools": {"rec": [["fragile"]]}})).unwrap();
        let results = toolset.bind_manifest(&registry, &BaseTools::new().with(&base), &manifest);
        let err = results.into_iter().next().unwrap().1.unwrap_err();
        assert!(
            matches!(err, toolgraft::BindError::ExtensionFailed { .. }),
            "{err}"
        );
        let expected = if in_for_branch {
            "no state"
        } else {
            "no schema"
        };
        assert!(err.to_string().contains(expected), "{err}");
        assert!(toolset.names().is_empty());
        // The toolset still binds after a refused tool.
        toolset
            .bind((rec(Seen::default()).combo().with(Trace),))
            .unwrap();
    }
}
