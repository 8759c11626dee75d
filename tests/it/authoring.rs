//! The author's and caller's side of the typed API: typed calls with reserved
//! params by type, `wrap_fn` wrappers, and what a wrapper can and cannot return.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use toolgraft::combo::StartCombo;
use toolgraft::error::ToolError;
use toolgraft::ext::{Cache, CacheParams, Proxy, ProxyParams, Trace, proxy};
use toolgraft::extension::{Anywhere, Call, Done, Next, Stack, WithParams, Wrapper, wrap_fn};
use toolgraft::{Extension, Tool, Toolset, Wrap};

use crate::common::{Shout, shout};

/// `route {text} -> "<text> via <route>"`: shows the proxy route the body saw.
fn route() -> impl toolgraft::tool::BaseTool<Input = Shout, Output = String> {
    Tool::builder()
        .name("route")
        .description("Say which route the body saw.")
        .read_only()
        .body(|input: Shout| async move {
            Ok(format!("{} via {:?}", input.text, proxy::current_route()))
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn reserved_params_are_set_by_type_in_any_order_and_default_when_unset() {
    let tool = route();
    let (branch,) = Toolset::new()
        .bind((tool
            .combo()
            .with(Proxy::allow(["eu", "us"]))
            .with(Cache::default()),))
        .unwrap();
    let text = || Shout { text: "hi".into() };

    // Unset: the proxy takes the first allowed route, the cache its default TTL.
    assert_eq!(branch.call(text()).await.unwrap(), "hi via Some(\"eu\")");

    let us = || ProxyParams {
        proxies: Some(vec!["us".into()]),
    };
    // The proxy's params are part of the cache's key (it sits above the proxy):
    // each route is its own entry.
    let ttl = || CacheParams { exp: Some(5.0) };
    let one = branch
        .params(us())
        .params(ttl())
        .call(text())
        .await
        .unwrap();
    let other = branch
        .params(ttl())
        .params(us())
        .call(text())
        .await
        .unwrap();
    assert_eq!(one, "hi via Some(\"us\")");
    assert_eq!(one, other);

    // The whole nested input still works, and means the same.
    let nested = WithParams::new(ttl(), WithParams::new(us(), text()));
    assert_eq!(branch.call(nested).await.unwrap(), one);

    // A later `.params` of the same type replaces the earlier one.
    let replaced = branch
        .params(us())
        .params(ProxyParams {
            proxies: Some(vec!["eu".into()]),
        })
        .params(ttl())
        .call(text())
        .await
        .unwrap();
    assert_eq!(replaced, "hi via Some(\"eu\")");
}

#[tokio::test]
async fn reserved_params_keep_their_checks_on_typed_calls() {
    let tool = route();
    let (branch,) = Toolset::new()
        .bind((tool.combo().with(Proxy::allow(["eu"])).with(Trace),))
        .unwrap();
    let refused = branch
        .params(ProxyParams {
            proxies: Some(vec!["elsewhere".into()]),
        })
        .call(Shout { text: "hi".into() })
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ToolError::Refused { tool, .. } if tool.as_str() == "route_proxy"),
        "{refused}"
    );
    let bad_ttl = Toolset::new()
        .bind((route().combo().with(Cache::default()),))
        .unwrap()
        .0
        .params(CacheParams { exp: Some(-1.0) })
        .call(Shout { text: "hi".into() })
        .await
        .unwrap_err();
    assert!(bad_ttl.to_string().contains("exp"), "{bad_ttl}");
}

#[tokio::test]
async fn a_wrap_fn_decides_whether_the_call_runs_and_sees_its_outcome() {
    let calls = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let (counted, failed) = (calls.clone(), failures.clone());
    let audit = wrap_fn("audit", move |call: Call| {
        counted.fetch_add(1, Ordering::SeqCst);
        let failed = failed.clone();
        async move {
            let outcome = call.run().await;
            if outcome.is_err() {
                failed.fetch_add(1, Ordering::SeqCst);
            }
            outcome
        }
    });
    let closed = wrap_fn("closed", |call: Call| async move {
        Err::<Done, _>(ToolError::Reported {
            message: format!("`{}` is closed", call.name()),
        })
    });
    let toolset = Toolset::new();
    let tool = shout();
    toolset
        .bind((tool.combo().with(audit), tool.combo().with(closed)))
        .unwrap();

    let answer = toolset
        .call("shout_audit", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(answer, json!("hi"));
    assert!(
        toolset
            .call("shout_audit", json!({"text": 1}))
            .await
            .is_err()
    );
    // A bad argument is refused by the layer below when decoding, before the wrapper.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(failures.load(Ordering::SeqCst), 0);

    let refused = toolset
        .call("shout_closed", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("`shout` is closed"),
        "{refused}"
    );
}

/// A wrapper whose `around` returns the outcome of another call is refused: a `Done`
/// only carries the output of the layer below it came from.
#[tokio::test]
async fn a_wrap_fn_cannot_return_an_output_it_did_not_get_from_its_call() {
    let stash: Arc<std::sync::Mutex<Option<Done>>> = Arc::default();
    let kept = stash.clone();
    // Answers with a kept outcome when it has one (from a call of another tool).
    let forger = wrap_fn("forger", move |call: Call| {
        let kept = kept.clone();
        async move {
            let held = kept.lock().unwrap().take();
            match held {
                Some(done) => Ok(done),
                None => call.run().await,
            }
        }
    });
    let toolset = Toolset::new();
    let text = shout();
    let number = Tool::builder()
        .name("number")
        .description("A number.")
        .read_only()
        .body(|_: crate::common::Ping| async { Ok(7_u32) })
        .build()
        .unwrap();
    toolset.bind((text.combo().with(forger),)).unwrap();
    // An outcome of `number`, handed out of its wrapper instead of returned.
    let done = {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx = Arc::new(std::sync::Mutex::new(Some(tx)));
        let grab = wrap_fn("grab", move |call: Call| {
            let tx = tx.clone();
            async move {
                let outcome = call.run().await?;
                // Hand the outcome out instead of returning it.
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(outcome);
                }
                Err(ToolError::Reported {
                    message: "kept".into(),
                })
            }
        });
        let grabbing = Toolset::new();
        grabbing.bind((number.combo().with(grab),)).unwrap();
        let _ = grabbing.call("number_grab", json!({})).await;
        rx.await.unwrap()
    };
    *stash.lock().unwrap() = Some(done);
    let forged = toolset
        .call("shout_forger", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert!(
        forged.to_string().contains("outcome of another call"),
        "{forged}"
    );
}

/// A `Wrap` written by a user: the blanket impls make it an extension and a layer.
#[derive(Clone, Debug)]
struct Tagged;

impl Extension for Tagged {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "tagged"
    }

    fn describe(&self, running: &str) -> Option<String> {
        Some(format!("{running} (tagged)"))
    }
}

impl<S: Stack> Wrap<S> for Tagged {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        assert_eq!(next.branch().as_str(), "shout_tagged");
        next.call(input).await
    }
}

#[tokio::test]
async fn a_user_wrap_is_an_extension_with_its_own_description() {
    let toolset = Toolset::new();
    let tool = shout();
    let (tagged,) = toolset.bind((tool.combo().with(Tagged),)).unwrap();
    assert_eq!(tagged.call(Shout { text: "x".into() }).await.unwrap(), "x");
    let info = toolset.info("shout_tagged").unwrap();
    assert_eq!(info.description, "Return the text. (tagged)");
}
