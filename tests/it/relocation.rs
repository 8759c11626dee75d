//! Rules `relocation`, `cardinality` and `locality-inside-relocation` at run time:
//! where layers really run (scenarios 10, 11, 13, 14, 32). The compile-time side is
//! in `ui-tests/`.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Ping, Shout};
use serde_json::json;
use toolgraft::Wrap;
use toolgraft::ext::{Batch, BatchInput, Cache, Pool, Proxy, ProxyParams, Trace, proxy};
use toolgraft::extension::Wrapper;
use toolgraft::prelude::*;
use toolgraft::toolset::Site;
use toolgraft::{Name, ToolError};

fn thread_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .to_owned()
}

#[derive(Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Fetch {
    url: String,
}

#[tokio::test]
async fn proxy_inside_pool_travels_with_the_body() {
    // [proxy, pool]: the body runs on a pool thread and reads the route
    // that `proxy` chose, because `proxy` runs there too.
    let fetch = Tool::builder()
        .name("fetch")
        .description("Fetch a page.")
        .read_only()
        .body(|input: Fetch| async move {
            Ok(json!({"url": input.url, "thread": thread_name(), "route": proxy::current_route()}))
        })
        .build()
        .unwrap();
    let pool = Pool::new(2).unwrap();
    let toolset = Toolset::new();
    let (remote,) = toolset
        .bind((fetch
            .combo()
            .with(Proxy::allow(["egress-a", "egress-b"]))
            .with(pool.clone()),))
        .unwrap();
    assert_eq!(
        toolset.names(),
        ["fetch", "fetch_proxy", "fetch_proxy_pool"]
    );

    let out = toolset
        .call(
            "fetch_proxy_pool",
            json!({"url": "/", "proxies": ["egress-b"]}),
        )
        .await
        .unwrap();
    assert_eq!(out["thread"], "toolgraft-pool");
    assert_eq!(out["route"], "egress-b");
    assert!(!thread_name().starts_with("toolgraft-pool"));

    // The typed call takes the same path.
    let input = WithParams::new(
        ProxyParams::default(),
        Fetch {
            url: "/typed".into(),
        },
    );
    let out = remote.call(input).await.unwrap();
    assert_eq!(
        (out["thread"].as_str(), out["route"].as_str()),
        (Some("toolgraft-pool"), Some("egress-a"))
    );
    assert_eq!(pool.jobs_started(), 2);

    // Where each layer runs, as the toolset reports it.
    let info = toolset.info("fetch_proxy_pool").unwrap();
    let pool_name = Name::new("pool").unwrap();
    assert_eq!(
        info.sites(),
        [
            Site::Relocated {
                by: pool_name.clone()
            },
            Site::Caller
        ]
    );
    assert_eq!(info.body_site(), Site::Relocated { by: pool_name });
    // No route leaks into the caller's task.
    assert_eq!(proxy::current_route(), None);
}

#[tokio::test]
async fn an_extension_outside_the_backend_runs_in_the_caller() {
    // [trace, pool, cache]: a second identical call within the TTL is
    // served by the cache in the calling process and never reaches the pool.
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .read_only()
        .body(move |input: Shout| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { Ok(format!("{} on {}", input.text, thread_name())) }
        })
        .build()
        .unwrap();
    let pool = Pool::new(1).unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((shout
            .combo()
            .with(Trace)
            .with(pool.clone())
            .with(Cache::default()),))
        .unwrap();
    for _ in 0..3 {
        let out = toolset
            .call("shout_trace_pool_cache", json!({"text": "hi", "exp": 60}))
            .await
            .unwrap();
        assert_eq!(out, json!("hi on toolgraft-pool"));
    }
    assert_eq!(pool.jobs_started(), 1);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let info = toolset.info("shout_trace_pool_cache").unwrap();
    let sites: Vec<String> = info.sites().iter().map(ToString::to_string).collect();
    assert_eq!(sites, ["via pool", "caller", "caller"]);
}

#[tokio::test]
async fn batch_outside_the_pool_is_one_hop_inside_it_one_hop_per_item() {
    // `[batch, pool]` runs the whole batch as one pool job; `[pool, batch]` one job per
    // item.
    #[derive(Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
    struct Square {
        n: i64,
    }
    let square = Tool::builder()
        .name("square")
        .description("Square a number.")
        .read_only()
        .body(|input: Square| async move { Ok(input.n * input.n) })
        .build()
        .unwrap();
    let (outer, inner) = (Pool::new(2).unwrap(), Pool::new(2).unwrap());
    let toolset = Toolset::new();
    toolset
        .bind((
            // [batch, pool]: pool(batch(square)), the whole batch in one job.
            square.combo().with(Batch::default()).with(outer.clone()),
            // [pool, batch]: batch(pool(square)), one job per item.
            square.combo().with(inner.clone()).with(Batch::default()),
        ))
        .unwrap();
    let items = json!({"items": [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}], "parallel": true});
    let once = toolset
        .call("square_batch_pool", items.clone())
        .await
        .unwrap();
    let per_item = toolset.call("square_pool_batch", items).await.unwrap();
    assert_eq!(once, json!([1, 4, 9, 16]));
    assert_eq!(per_item, once);
    assert_eq!(outer.jobs_started(), 1);
    assert_eq!(inner.jobs_started(), 4);
}

#[tokio::test]
async fn two_backends_in_two_combos_of_one_tool_both_bind() {
    // One backend per combo, not per tool: `[[pool], [other_backend]]` binds both.
    let ping = Tool::builder()
        .name("ping")
        .description("Say where it runs.")
        .read_only()
        .body(|_: Ping| async { Ok(thread_name()) })
        .build()
        .unwrap();
    let (pool, other) = (
        Pool::new(1).unwrap(),
        Pool::new(1).unwrap().with_name("other_backend"),
    );
    let toolset = Toolset::new();
    toolset
        .bind((
            ping.combo().with(pool.clone()),
            ping.combo().with(other.clone()),
        ))
        .unwrap();
    assert_eq!(toolset.names(), ["ping", "ping_other_backend", "ping_pool"]);
    for name in ["ping_pool", "ping_other_backend"] {
        assert_eq!(
            toolset.call(name, json!({})).await.unwrap(),
            json!("toolgraft-pool")
        );
    }
    assert_eq!((pool.jobs_started(), other.jobs_started()), (1, 1));
}

#[tokio::test]
async fn a_panicking_body_is_a_typed_error_and_the_pool_keeps_serving() {
    // A panicking body is a typed error, and the pool's thread keeps serving.
    let flaky = Tool::builder()
        .name("flaky")
        .description("Panics on request.")
        .read_only()
        .body(|input: Shout| async move {
            if input.text == "panic" {
                panic!("asked to panic");
            }
            Ok(input.text)
        })
        .build()
        .unwrap();
    let pool = Pool::new(1).unwrap();
    let toolset = Toolset::new();
    toolset.bind((flaky.combo().with(pool.clone()),)).unwrap();
    for name in ["flaky", "flaky_pool"] {
        let err = toolset
            .call(name, json!({"text": "panic"}))
            .await
            .unwrap_err();
        match err {
            ToolError::Panicked { tool, message } => {
                assert_eq!(tool, "flaky");
                assert_eq!(message, "asked to panic");
            }
            other => panic!("expected a panic error, got {other:?}"),
        }
        assert!(
            toolset
                .call(name, json!({"text": "panic"}))
                .await
                .unwrap_err()
                .to_string()
                .contains("panicked")
        );
        // Still serving, on the same single pool thread.
        assert_eq!(
            toolset.call(name, json!({"text": "ok"})).await.unwrap(),
            json!("ok")
        );
    }
    assert_eq!(pool.jobs_started(), 3);
}

#[tokio::test]
async fn batches_through_a_pool_keep_input_order_and_per_item_errors() {
    let checker = Tool::builder()
        .name("check")
        .description("Fails on `bad`.")
        .read_only()
        .body(|input: Shout| async move {
            if input.text == "bad" {
                return Err("bad input".into());
            }
            Ok(input.text)
        })
        .build()
        .unwrap();
    let pool = Pool::new(2).unwrap();
    let toolset = Toolset::new();
    let (batched,) = toolset
        .bind((checker.combo().with(pool).with(Batch::default()),))
        .unwrap();
    let input = BatchInput::parallel(vec![Shout::new("a"), Shout::new("bad"), Shout::new("c")])
        .with_keep_going();
    let out = batched.call(input).await.unwrap();
    assert_eq!(out.len(), 3);
    assert!(
        matches!(&out[1], toolgraft::ext::BatchItem::Err(e) if e.to_string().contains("bad input"))
    );
    let values: Vec<_> = out.into_iter().map(|item| item.ok()).collect();
    assert_eq!(values, [Some("a".to_owned()), None, Some("c".to_owned())]);
}

#[tokio::test]
async fn a_caller_that_gives_up_takes_its_pool_job_with_it() {
    let finished = Arc::new(AtomicUsize::new(0));
    let counter = finished.clone();
    let slow = Tool::builder()
        .name("slow")
        .description("Takes a while.")
        .read_only()
        .body(move |_: Ping| {
            let counter = counter.clone();
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .build()
        .unwrap();
    let pool = Pool::new(1).unwrap();
    let toolset = Toolset::new();
    toolset.bind((slow.combo().with(pool.clone()),)).unwrap();
    let call = toolset.call("slow_pool", json!({}));
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(50), call)
            .await
            .is_err()
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(pool.jobs_started(), 1);
    assert_eq!(
        finished.load(Ordering::SeqCst),
        0,
        "the job was aborted, not left running"
    );
}

/// A wrapper that panics on "boom": a panic in a layer, not in the body.
#[derive(Clone)]
struct Explosive;

impl Extension for Explosive {
    type Kind = Wrapper;
    type Locality = toolgraft::extension::Anywhere;

    fn name(&self) -> &str {
        "explosive"
    }
}

impl<S: Stack<Input: serde::Serialize>> Wrap<S> for Explosive {
    type Params = ();

    async fn around(
        &self,
        next: toolgraft::extension::Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        if serde_json::to_value(&input).is_ok_and(|args| args["text"] == "boom") {
            panic!("the layer exploded");
        }
        next.call(input).await
    }
}

#[tokio::test]
async fn a_layer_panicking_on_the_pool_is_a_typed_error_and_the_pool_survives() {
    let shout = common::shout();
    let pool = Pool::new(1).unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((shout.combo().with(Explosive).with(pool.clone()),))
        .unwrap();
    let err = toolset
        .call("shout_explosive_pool", json!({"text": "boom"}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::Panicked { ref tool, ref message } if tool == "shout_explosive" && message == "the layer exploded"),
        "{err:?}"
    );
    assert_eq!(
        toolset
            .call("shout_explosive_pool", json!({"text": "ok"}))
            .await
            .unwrap(),
        json!("ok")
    );
}

/// A tool body that calls a pooled branch hides the pool from the rules of its own
/// combos: a proxy on that tool sits outside the pool in fact. The pool refuses to
/// relocate from inside the proxy's call, naming both, instead of running the body
/// without the route.
#[tokio::test]
async fn a_backend_reached_from_inside_a_body_local_layer_refuses_to_relocate() {
    use toolgraft::ext::{Pool, Proxy, proxy};

    let fetch = toolgraft::Tool::builder()
        .name("fetch")
        .description("Say the route.")
        .read_only()
        .body(|input: Shout| async move {
            Ok(format!("{} via {:?}", input.text, proxy::current_route()))
        })
        .build()
        .unwrap();
    let toolset = toolgraft::Toolset::new();
    let (pooled, inside) = toolset
        .bind((
            fetch.combo().with(Pool::new(1).unwrap()),
            fetch
                .combo()
                .with(Proxy::allow(["eu"]))
                .with(Pool::new(1).unwrap()),
        ))
        .unwrap();
    // The right order: the proxy runs beside the body, on the pool's thread.
    assert_eq!(
        inside.call(Shout { text: "a".into() }).await.unwrap(),
        "a via Some(\"eu\")"
    );

    // A base whose body calls the pooled branch: a laundered backend.
    let launder = toolgraft::Tool::builder()
        .name("launder")
        .description("Fetch through the pool.")
        .read_only()
        .body(move |input: Shout| {
            let pooled = pooled.clone();
            async move { pooled.call(input).await.map_err(Into::into) }
        })
        .build()
        .unwrap();
    let (outside,) = toolset
        .bind((launder.combo().with(Proxy::allow(["eu"])),))
        .unwrap();
    assert_eq!(
        toolset
            .call("launder", serde_json::json!({"text": "b"}))
            .await
            .unwrap(),
        serde_json::json!("b via None")
    );
    let refused = outside.call(Shout { text: "c".into() }).await.unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("`proxy` (in `launder_proxy`)")
            && message.contains("locality-inside-relocation"),
        "{message}"
    );
    // The body's error is the pool's refusal, which cites the rule.
    assert_eq!(
        refused.rule(),
        Some(toolgraft::rulebook::Rule::LocalityInsideRelocation)
    );
    let by_name = toolset
        .call("launder_proxy", serde_json::json!({"text": "d"}))
        .await
        .unwrap_err();
    assert!(
        by_name
            .to_string()
            .contains("needs to run beside the tool body"),
        "{by_name}"
    );
    assert_eq!(
        by_name.rule(),
        Some(toolgraft::rulebook::Rule::LocalityInsideRelocation)
    );
}
