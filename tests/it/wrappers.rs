//! One `Wrap` impl serves typed combos and manifests: a retry that calls the layer
//! below again (its input is `Clone` on both paths: the run-time input clones its
//! arguments), and a wrapper over text results (`Text`: a typed `String`, a JSON
//! string), each bound typed and from a manifest, and agreeing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use toolgraft::Wrap;
use toolgraft::error::BoxError;
use toolgraft::ext::cache::CacheParams;
use toolgraft::ext::{Cache, Trace};
use toolgraft::extension::{Anywhere, Next, Params, Resendable, Text, Wrapper};
use toolgraft::kind::ExtensionKind;
use toolgraft::prelude::*;
use toolgraft::runtime::{Configured, DynBranch, DynExtension, DynStack};
use toolgraft::toolset::BaseTools;
use toolgraft::{Registry, ToolError};

use crate::common::Loud;

/// How many attempts, as a reserved param: so the retry's own arguments are
/// taken out before the layer below decodes, on both paths.
#[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Attempts {
    /// Attempts in all (default 3).
    attempts: Option<u32>,
}
impl Params for Attempts {}

/// Calls the layer below again when it fails, up to `attempts` times in all.
#[derive(Clone, Debug)]
struct Retry {
    tries: Arc<AtomicU32>,
}

impl Extension for Retry {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "retry"
    }
}

impl<S: Stack<Input: Resendable>> Wrap<S> for Retry {
    type Params = Attempts;

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        params: Attempts,
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let attempts = params.attempts.unwrap_or(3).max(1);
        let mut made = 0;
        loop {
            made += 1;
            self.tries.fetch_add(1, Ordering::SeqCst);
            match next.call(input.clone()).await {
                Err(ToolError::Body { .. }) if made < attempts => continue,
                result => return result,
            }
        }
    }
}

// Unknown fields refused: a reserved param that reached the body would fail the call.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Flaky {
    text: String,
    /// Calls that fail before one succeeds.
    failures: u32,
}

/// Fails the first `failures` calls (counted across calls), then echoes `text`.
fn flaky(calls: Arc<AtomicU32>) -> impl BaseTool<Input = Flaky, Output = String> {
    Tool::builder()
        .name("flaky")
        .description("Fail a few times, then echo the text.")
        .read_only()
        .body(move |input: Flaky| {
            let calls = calls.clone();
            async move {
                let call = calls.fetch_add(1, Ordering::SeqCst);
                if call < input.failures {
                    return Err(BoxError::from(format!("failure {}", call + 1)));
                }
                Ok(input.text)
            }
        })
        .build()
        .unwrap()
}

fn registry(retry: Retry) -> Registry {
    let mut registry = Registry::new();
    registry
        .register(retry)
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(Trace)
        .unwrap()
        .register(Loud)
        .unwrap();
    registry
}

fn from_manifest(base: &impl BaseTool, registry: &Registry, tool: &str, combos: Value) -> Toolset {
    let toolset = Toolset::new();
    let manifest = toolgraft::Manifest::from_value(&json!({"tools": {tool: combos}})).unwrap();
    for (tool, bound) in toolset.bind_manifest(registry, &BaseTools::new().with(base), &manifest) {
        bound.unwrap_or_else(|err| panic!("{tool}: {err}"));
    }
    toolset
}

#[tokio::test]
async fn one_retry_impl_retries_typed_and_from_a_manifest() {
    // Typed: the input is `Flaky`, which is `Clone`.
    let calls = Arc::new(AtomicU32::new(0));
    let tries = Arc::new(AtomicU32::new(0));
    let retry = Retry {
        tries: tries.clone(),
    };
    let toolset = Toolset::new();
    let (typed,) = toolset
        .bind((flaky(calls.clone()).combo().with(retry.clone()),))
        .unwrap();
    let echoed = typed
        .call(Flaky {
            text: "hi".into(),
            failures: 2,
        })
        .await
        .unwrap();
    assert_eq!(echoed, "hi");
    assert_eq!(
        (calls.load(Ordering::SeqCst), tries.load(Ordering::SeqCst)),
        (3, 3)
    );

    // The same impl from a manifest: over `DynStack`, whose input is a
    // `DynInput`; each clone is decoded again by the typed tool below.
    let calls = Arc::new(AtomicU32::new(0));
    let tries = Arc::new(AtomicU32::new(0));
    let registry = registry(Retry {
        tries: tries.clone(),
    });
    let toolset = from_manifest(
        &flaky(calls.clone()),
        &registry,
        "flaky",
        json!([["retry"]]),
    );
    let answer = toolset
        .call("flaky_retry", json!({"text": "hi", "failures": 2}))
        .await
        .unwrap();
    assert_eq!(answer, json!("hi"));
    assert_eq!(
        (calls.load(Ordering::SeqCst), tries.load(Ordering::SeqCst)),
        (3, 3)
    );

    // Its reserved param is its own on both paths: one attempt fails as the body does.
    calls.store(0, Ordering::SeqCst);
    let err = toolset
        .call(
            "flaky_retry",
            json!({"text": "hi", "failures": 5, "attempts": 1}),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Body { .. }), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_retried_run_time_input_keeps_the_reserved_params_of_the_layers_above_and_below() {
    // [cache, retry, trace]: the retry clones a cache branch's input (reserved
    // `exp` included) and the trace above it; every attempt sees the same arguments.
    let calls = Arc::new(AtomicU32::new(0));
    let tries = Arc::new(AtomicU32::new(0));
    let registry = registry(Retry {
        tries: tries.clone(),
    });
    let toolset = from_manifest(
        &flaky(calls.clone()),
        &registry,
        "flaky",
        json!([["cache", "retry", "trace"]]),
    );
    let args = json!({"text": "hi", "failures": 2, "exp": 60, "attempts": 4});
    assert_eq!(
        toolset
            .call("flaky_cache_retry_trace", args.clone())
            .await
            .unwrap(),
        json!("hi")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // The cache below the retry kept the answer under the same key: no new call.
    assert_eq!(
        toolset.call("flaky_cache_retry", args).await.unwrap(),
        json!("hi")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    // Bad arguments are refused once, before any attempt, naming the tool called.
    let err = toolset
        .call("flaky_cache_retry_trace", json!({"text": 3, "failures": 0}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
    assert!(err.to_string().contains("flaky_cache_retry_trace"), "{err}");
    // Three attempts for the first call, one (answered by the cache) for the second.
    assert_eq!(tries.load(Ordering::SeqCst), 4);

    // Typed, the cache's params and the retry's are set by type.
    let typed_calls = Arc::new(AtomicU32::new(0));
    let typed = Toolset::new();
    let (branch,) = typed
        .bind((flaky(typed_calls.clone())
            .combo()
            .with(Cache::default())
            .with(Retry { tries })
            .with(Trace),))
        .unwrap();
    let echoed = branch
        .params(CacheParams { exp: Some(60.0) })
        .params(Attempts { attempts: Some(4) })
        .call(Flaky {
            text: "hi".into(),
            failures: 2,
        })
        .await
        .unwrap();
    assert_eq!(echoed, "hi");
    assert_eq!(typed_calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_retry_over_a_run_time_wrapper_sends_every_attempt_its_reserved_params() {
    // A wrapper defined at run time, reserving `exp`, below the retry: each
    // attempt's clone shows it `exp` as given, and the body never sees it.
    let calls = Arc::new(AtomicU32::new(0));
    let mut registry = registry(Retry {
        tries: Arc::default(),
    });
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    registry
        .register(
            DynExtension::builder()
                .name("expiring")
                .kind(ExtensionKind::Wrapper)
                .reserved(schemars::json_schema!({"type": "object", "properties": {"exp": {"type": "number"}}}))
                .factory(move |layer| {
                    let record = record.clone();
                    let stack = DynStack::around(
                        layer.input.branch.clone(),
                        layer.below.clone(),
                        move |input, below| {
                            record.lock().unwrap().push(input.args().clone());
                            async move { below.call(input).await }
                        },
                    );
                    Ok(DynBranch::builder().stack(stack).build())
                })
                .build(),
        )
        .unwrap();
    let toolset = from_manifest(
        &flaky(calls.clone()),
        &registry,
        "flaky",
        json!([["expiring", "retry"], ["retry", "expiring"]]),
    );
    let args = json!({"text": "hi", "failures": 2, "exp": 30});
    assert_eq!(
        toolset.call("flaky_expiring_retry", args).await.unwrap(),
        json!("hi")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let expected = json!({"text": "hi", "failures": 2, "exp": 30});
    let seen_args: Vec<Value> = seen.lock().unwrap().drain(..).map(Value::Object).collect();
    assert_eq!(seen_args, [expected.clone(), expected.clone(), expected]);

    // The other way round, the retry's clone is of the typed tool's input.
    calls.store(0, Ordering::SeqCst);
    let args = json!({"text": "hi", "failures": 1, "exp": 30, "attempts": 2});
    assert_eq!(
        toolset.call("flaky_retry_expiring", args).await.unwrap(),
        json!("hi")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(seen.lock().unwrap().len(), 1, "one call through `expiring`");
}

#[derive(Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

#[tokio::test]
async fn a_text_wrapper_edits_a_typed_string_and_a_json_string_alike() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let typed = Toolset::new();
    let (loud,) = typed.bind((shout.combo().with(Loud),)).unwrap();
    assert_eq!(loud.call(Shout { text: "hi".into() }).await.unwrap(), "HI");

    let registry = registry(Retry {
        tries: Arc::default(),
    });
    let by_manifest = from_manifest(&shout, &registry, "shout", json!([["trace", "loud"]]));
    let args = json!({"text": "hi"});
    assert_eq!(
        by_manifest
            .call("shout_trace_loud", args.clone())
            .await
            .unwrap(),
        typed.call("shout_loud", args).await.unwrap()
    );
    // Text is a view: a result that is not text passes through unchanged.
    assert_eq!(json!(3).text(), None);
}
