//! Rule `side-effects`: the hints a tool carries (typed, from a manifest), what
//! each kind's branch presents, and `retry` and `cache` bound only where the hints
//! allow them; `retry` itself; a cache keyed by the caller.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::context::{self, Principal};
use toolgraft::error::Transient;
use toolgraft::ext::cache::CacheConfig;
use toolgraft::ext::retry::{Attempt, RetryConfig};
use toolgraft::ext::{Batch, Cache, Pool, Retry, Trace};
use toolgraft::prelude::*;
use toolgraft::rulebook::Rule;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::tool::{Annotations, Demand};
use toolgraft::toolset::BaseTools;
use toolgraft::{Name, Registry};

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
struct Query {
    q: String,
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Configured::new(Retry::default()))
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(Configured::new(Batch::default()))
        .unwrap()
        .register(Trace)
        .unwrap()
        .register(Pool::new(1).unwrap())
        .unwrap();
    registry
}

/// A tool that fails its first `failing` calls with `error`, then answers; and
/// its call count.
fn flaky(
    failing: u32,
    error: fn() -> toolgraft::error::BoxError,
) -> (
    impl toolgraft::tool::BaseTool<Input = Query, Output = String>
    + toolgraft::tool::Hinted<Hints = toolgraft::tool::ReadOnly>,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    let tool = Tool::builder()
        .name("lookup")
        .description("Look a word up.")
        .read_only()
        .body(move |query: Query| {
            let call = seen.fetch_add(1, Ordering::SeqCst);
            async move {
                if call < failing {
                    return Err(error());
                }
                Ok(format!(
                    "{} (attempt {:?})",
                    query.q,
                    context::get::<Attempt>().map(|a| a.number)
                ))
            }
        })
        .build()
        .unwrap();
    (tool, calls)
}

fn send_mail() -> impl toolgraft::tool::BaseTool<Input = Query, Output = String> {
    Tool::builder()
        .name("send_mail")
        .description("Send a mail.")
        .body(|query: Query| async move { Ok(query.q) })
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn retry_makes_a_transient_failure_again_and_stops_at_the_attempts() {
    let (lookup, calls) = flaky(2, || Transient::new("the index is warming up").into());
    let (retried,) = Toolset::new()
        .bind((lookup.combo().with(Retry::attempts(3)),))
        .unwrap();
    let answer = retried.call(Query { q: "rust".into() }).await.unwrap();
    assert_eq!(answer, "rust (attempt Some(3))");
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    // Two attempts are not enough for two failures: the last failure answers.
    let (lookup, calls) = flaky(2, || Transient::new("the index is warming up").into());
    let (retried,) = Toolset::new()
        .bind((lookup.combo().with(Retry::attempts(2)),))
        .unwrap();
    let err = retried.call(Query { q: "rust".into() }).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("warming up"), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn the_layers_inside_a_retry_see_the_attempt() {
    let (lookup, _) = flaky(1, || Transient::new("busy").into());
    let toolset = Toolset::new();
    // `trace` inside the retry: the body sees the attempt through it.
    toolset
        .bind((lookup.combo().with(Trace).with(Retry::attempts(3)),))
        .unwrap();
    let answer = toolset
        .call("lookup_trace_retry", json!({"q": "rust"}))
        .await
        .unwrap();
    assert_eq!(answer, json!("rust (attempt Some(2))"));
}

#[tokio::test(start_paused = true)]
async fn retry_never_makes_a_body_error_invalid_arguments_or_a_panic_again() {
    let (lookup, calls) = flaky(1, || std::io::Error::other("no such word").into());
    let toolset = Toolset::new();
    toolset
        .bind((lookup.combo().with(Retry::attempts(5)),))
        .unwrap();
    let err = toolset
        .call("lookup_retry", json!({"q": "rust"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Body { .. }), "{err}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "a body's own error is not retried"
    );

    let err = toolset
        .call("lookup_retry", json!({"q": 5}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "invalid arguments never reach the body"
    );

    let panics = Tool::builder()
        .name("panics")
        .description("Panic.")
        .read_only()
        .body({
            let calls = calls.clone();
            move |_: Query| {
                calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    if true {
                        panic!("boom");
                    }
                    Ok("never")
                }
            }
        })
        .build()
        .unwrap();
    toolset
        .bind((panics.combo().with(Retry::attempts(5)),))
        .unwrap();
    let err = toolset
        .call("panics_retry", json!({"q": "x"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Panicked { .. }), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "a panic is not retried");
}

#[tokio::test(start_paused = true)]
async fn retry_waits_with_backoff_and_gives_up_at_its_deadline() {
    let (lookup, calls) = flaky(100, || Transient::new("down").into());
    let retry = Retry::new(RetryConfig {
        attempts: 10,
        backoff_ms: 100,
        max_backoff_ms: 400,
        deadline_ms: 1_000,
    });
    let (retried,) = Toolset::new().bind((lookup.combo().with(retry),)).unwrap();
    let started = tokio::time::Instant::now();
    let err = retried.call(Query { q: "x".into() }).await.unwrap_err();
    let waited = started.elapsed();
    assert!(err.is_transient());
    let made = calls.load(Ordering::SeqCst);
    // Waits of 50..=100, 100..=200, 200..=400, then 200..=400 each: the deadline
    // stops it after at least 4 and at most 8 calls, never past 1 s.
    assert!((4..=8).contains(&made), "{made} calls");
    assert!(waited <= Duration::from_secs(1), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn retry_waits_for_a_limit_that_says_when() {
    let calls = Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    let limited = Tool::builder()
        .name("limited")
        .description("Answer once a second.")
        .idempotent()
        .body(move |query: Query| {
            let call = seen.fetch_add(1, Ordering::SeqCst);
            async move {
                if call == 0 {
                    let over = ToolError::Overloaded {
                        tool: Name::new("limited")?,
                        extension: Name::new("rate_limit")?,
                        reason: "over 1 call per 1s".into(),
                        retry_after: Some(Duration::from_millis(700)),
                    };
                    return Err(over.into());
                }
                Ok(query.q)
            }
        })
        .build()
        .unwrap();
    let (retried,) = Toolset::new()
        .bind((limited.combo().with(Retry::attempts(2)),))
        .unwrap();
    let started = tokio::time::Instant::now();
    assert_eq!(retried.call(Query { q: "x".into() }).await.unwrap(), "x");
    assert!(started.elapsed() >= Duration::from_millis(700));
}

#[test]
fn retry_configs_out_of_range_are_refused_naming_the_field() {
    for (config, field) in [
        (json!({"attempts": 0}), "attempts"),
        (json!({"attempts": 21}), "attempts"),
        (json!({"backoff_ms": 0}), "backoff_ms"),
        (json!({"backoff_ms": 6000}), "backoff_ms"),
        (json!({"max_backoff_ms": 3_600_001}), "max_backoff_ms"),
        (json!({"deadline_ms": 0}), "deadline_ms"),
    ] {
        let manifest = Manifest::from_value(
            &json!({"tools": {"lookup": [[{"name": "retry", "config": config}]]}}),
        )
        .unwrap();
        let (lookup, _) = flaky(0, || "x".into());
        let outcome =
            Toolset::new().bind_manifest(&registry(), &BaseTools::new().with(&lookup), &manifest);
        match &outcome[0].1 {
            Err(BindError::InvalidConfig { field: at, .. }) => assert_eq!(at, field, "{config}"),
            other => panic!("{config}: {other:?}"),
        }
    }
}

#[test]
fn a_manifest_retry_on_a_tool_not_idempotent_is_refused_with_the_rule_and_the_fix() {
    let send = send_mail();
    let manifest = Manifest::from_json(r#"{"tools": {"send_mail": ["retry"]}}"#).unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry(), &BaseTools::new().with(&send), &manifest);
    let err = outcome[0].1.as_ref().unwrap_err();
    eprintln!("manifest error: {err}");
    assert_eq!(err.rule(), Some(Rule::SideEffects));
    assert!(matches!(
        err,
        BindError::SideEffects {
            demand: Demand::Repeatable,
            transformer: None,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "on `send_mail`, `retry` makes a call again after a failure, but `send_mail` is not annotated read-only or idempotent; \
         if a second call does no more than the first, annotate `send_mail` idempotent (`.idempotent()` in its builder, \
         `#[tool(annotations(idempotent_hint = true))]` on an rmcp tool, \
         or \"annotations\": {\"idempotentHint\": true} for it in the manifest); otherwise put `once` inside `retry` \
         (it answers a repeated call with the first one's outcome), or leave `retry` off"
    );
    assert!(toolset.names().is_empty(), "nothing of the tool is bound");

    // The operator asserts idempotence in the manifest: it binds, and clients see it.
    let manifest = Manifest::from_json(
        r#"{"tools": {"send_mail": {"combos": [["retry"]], "annotations": {"idempotentHint": true}}}}"#,
    )
    .unwrap();
    let outcome = toolset.bind_manifest(&registry(), &BaseTools::new().with(&send), &manifest);
    assert!(outcome[0].1.is_ok(), "{:?}", outcome[0].1);
    for name in ["send_mail", "send_mail_retry"] {
        let hints = &toolset.info(name).unwrap().presentation.annotations;
        assert_eq!(hints.idempotent, Some(true), "{name}");
    }
}

#[test]
fn a_retry_or_a_cache_outside_a_transformer_is_refused_naming_it() {
    let (lookup, _) = flaky(0, || "x".into());
    let manifest = Manifest::from_json(r#"{"tools": {"lookup": [["batch", "retry"]]}}"#).unwrap();
    let outcome =
        Toolset::new().bind_manifest(&registry(), &BaseTools::new().with(&lookup), &manifest);
    let err = outcome[0].1.as_ref().unwrap_err();
    assert!(
        matches!(err, BindError::SideEffects { transformer: Some(t), .. } if t == "batch"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("place `retry` inside `batch`"),
        "{err}"
    );

    // Inside it, it binds: each item is retried.
    let manifest =
        Manifest::from_json(r#"{"tools": {"lookup": [["retry", "cache", "batch"]]}}"#).unwrap();
    let outcome =
        Toolset::new().bind_manifest(&registry(), &BaseTools::new().with(&lookup), &manifest);
    assert!(outcome[0].1.is_ok(), "{:?}", outcome[0].1);
}

#[test]
fn wrappers_and_backends_keep_the_hints_a_transformer_says_nothing() {
    let search = Tool::builder()
        .name("search")
        .description("Search.")
        .read_only()
        .open_world(true)
        .title("Search")
        .body(|query: Query| async move { Ok(query.q) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((search
            .combo()
            .with(Trace)
            .with(Pool::new(1).unwrap())
            .with(Batch::default()),))
        .unwrap();
    let hints = |name: &str| toolset.info(name).unwrap().presentation.annotations.clone();
    for kept in ["search", "search_trace", "search_trace_pool"] {
        assert_eq!(hints(kept).read_only, Some(true), "{kept}");
    }
    let batch = hints("search_trace_pool_batch");
    assert_eq!(
        (batch.read_only, batch.idempotent, batch.destructive),
        (None, None, None)
    );
    assert_eq!(
        batch.open_world,
        Some(true),
        "hints that are not about side effects stay"
    );
    assert_eq!(
        toolset
            .info("search_trace_pool_batch")
            .unwrap()
            .presentation
            .title
            .as_deref(),
        Some("Search")
    );
}

#[test]
fn a_cache_binds_only_where_a_call_not_made_loses_nothing() {
    let send = send_mail();
    let toolset = Toolset::new();
    let err = toolset
        .bind((send.combo().with(Cache::default()),))
        .unwrap_err();
    assert!(
        matches!(
            err,
            BindError::SideEffects {
                demand: Demand::Skippable,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("\"side_effects\": \"allowed\""),
        "{err}"
    );

    // Idempotent but destructive (a delete): a cache would skip deleting.
    let delete = Tool::builder()
        .name("delete")
        .description("Delete a file.")
        .idempotent()
        .destructive(true)
        .body(|query: Query| async move { Ok(query.q) })
        .build()
        .unwrap();
    assert!(matches!(
        toolset.bind((delete.clone().combo().with(Cache::default()),)),
        Err(BindError::SideEffects { .. })
    ));
    // A retry is fine there: deleting twice is deleting once.
    assert!(
        toolset
            .bind((delete.combo().with(Retry::default()),))
            .is_ok()
    );

    // The operator opts in, typed or in the manifest's config.
    assert!(
        toolset
            .bind((send
                .clone()
                .combo()
                .with(Cache::default().with_side_effects_allowed()),))
            .is_ok()
    );
    let manifest = Manifest::from_json(
        r#"{"tools": {"send_mail": [[{"name": "cache", "config": {"side_effects": "allowed"}}]]}}"#,
    )
    .unwrap();
    let outcome =
        Toolset::new().bind_manifest(&registry(), &BaseTools::new().with(&send), &manifest);
    assert!(outcome[0].1.is_ok(), "{:?}", outcome[0].1);
}

fn whoami() -> impl toolgraft::tool::BaseTool<Input = Query, Output = String> {
    Tool::builder()
        .name("whoami")
        .description("Say who asks.")
        .read_only()
        .body(|query: Query| async move {
            let who = context::get::<Principal>().map(|p| p.as_str().to_owned());
            Ok(format!(
                "{} for {}",
                query.q,
                who.unwrap_or_else(|| "nobody".into())
            ))
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn two_principals_calling_a_cached_tool_get_two_entries_each_their_own() {
    let (cached,) = Toolset::new()
        .bind((whoami().combo().with(Cache::default()),))
        .unwrap();
    let call = |who: &'static str| {
        let cached = cached.clone();
        async move {
            context::with(
                Principal::new(who),
                cached.call(Query { q: "hello".into() }),
            )
            .await
            .unwrap()
        }
    };
    for _ in 0..2 {
        assert_eq!(call("alice").await, "hello for alice");
        assert_eq!(call("bob").await, "hello for bob");
    }
    let entries = cached.stack().wrapper().len();
    eprintln!("two principals, same arguments: {entries} cache entries");
    assert_eq!(entries, 2);

    // Public answers: one entry serves both (the body saw the first caller).
    let (public,) = Toolset::new()
        .bind((whoami().combo().with(Cache::new(CacheConfig {
            public: true,
            ..CacheConfig::default()
        })),))
        .unwrap();
    for who in ["alice", "bob"] {
        let answer = context::with(
            Principal::new(who),
            public.call(Query { q: "hello".into() }),
        )
        .await
        .unwrap();
        assert_eq!(answer, "hello for alice");
    }
    assert_eq!(public.stack().wrapper().len(), 1);
}

#[test]
fn manifest_annotations_are_checked_and_a_later_manifest_without_them_restores_the_tools_own() {
    for (hints, problem) in [
        (json!({"readOnlyHint": "yes"}), "not a boolean"),
        (json!({"readonly": true}), "unknown annotation `readonly`"),
        (json!(true), "has `annotations` of true"),
    ] {
        let err =
            Manifest::from_value(&json!({"tools": {"x": {"combos": [], "annotations": hints}}}))
                .unwrap_err();
        assert_eq!(err.rule(), Some(Rule::ManifestShape));
        assert!(err.to_string().contains(problem), "{err}");
    }

    let send = send_mail();
    let toolset = Toolset::new();
    toolset.bind((send.combo(),)).unwrap();
    let registry = registry();
    let read_only = Manifest::from_json(
        r#"{"tools": {"send_mail": {"combos": [["cache"]], "annotations": {"readOnlyHint": true, "title": "Mail"}}}}"#,
    )
    .unwrap();
    let outcome = toolset.apply_manifest(&registry, &read_only);
    assert!(outcome[0].1.is_ok(), "{:?}", outcome[0].1);
    let info = toolset.info("send_mail_cache").unwrap();
    assert_eq!(info.presentation.annotations.read_only, Some(true));
    assert_eq!(info.presentation.annotations.title.as_deref(), Some("Mail"));

    // The next manifest says nothing: the tool's own hints again, and the cache
    // is refused on them.
    let plain = Manifest::from_json(r#"{"tools": {"send_mail": [["cache"]]}}"#).unwrap();
    let outcome = toolset.apply_manifest(&registry, &plain);
    assert!(
        matches!(outcome[0].1, Err(BindError::SideEffects { .. })),
        "{:?}",
        outcome[0].1
    );
    let trace = Manifest::from_json(r#"{"tools": {"send_mail": [["trace"]]}}"#).unwrap();
    assert!(toolset.apply_manifest(&registry, &trace)[0].1.is_ok());
    assert_eq!(
        toolset.info("send_mail").unwrap().presentation.annotations,
        Annotations::default()
    );
}

/// A manifest's `annotations` bound the first time (`bind_manifest`) are the
/// operator's, not the tool's own: a later manifest that no longer says them
/// gets the tool's own back, and `retry` on it is refused again.
#[test]
fn first_manifest_annotations_do_not_become_the_tools_own() {
    let send = send_mail();
    let toolset = Toolset::new();
    let registry = registry();
    let asserted = Manifest::from_json(
        r#"{"tools": {"send_mail": {"combos": [["retry"]], "annotations": {"idempotentHint": true}}}}"#,
    )
    .unwrap();
    let outcome = toolset.bind_manifest(&registry, &BaseTools::new().with(&send), &asserted);
    assert!(outcome[0].1.is_ok(), "{:?}", outcome[0].1);

    // The operator withdraws the assertion: the tool's own hints again.
    let plain = Manifest::from_json(r#"{"tools": {"send_mail": [["retry"]]}}"#).unwrap();
    let outcome = toolset.apply_manifest(&registry, &plain);
    assert!(
        matches!(outcome[0].1, Err(BindError::SideEffects { .. })),
        "retry still bound on a tool no longer annotated idempotent: {:?}; hints now {:?}",
        outcome[0].1,
        toolset.info("send_mail").unwrap().presentation.annotations
    );
}

/// MCP reads an unsaid `destructiveHint` as destructive: an idempotent tool
/// that never said `.destructive(false)` (a delete) is not cached without the
/// operator's opt-in; one that said it is.
#[test]
fn cache_on_an_idempotent_tool_that_does_not_say_it_is_not_destructive_is_refused() {
    let delete = Tool::builder()
        .name("delete")
        .description("Delete a file.")
        .idempotent()
        .body(|query: Query| async move { Ok(query.q) })
        .build()
        .unwrap();
    let outcome = Toolset::new().bind((delete.combo().with(Cache::default()),));
    assert!(
        matches!(outcome, Err(BindError::SideEffects { .. })),
        "cache bound on a tool MCP considers destructive (destructiveHint unsaid => true)"
    );
    let put = Tool::builder()
        .name("put")
        .description("Store a key.")
        .idempotent()
        .destructive(false)
        .body(|query: Query| async move { Ok(query.q) })
        .build()
        .unwrap();
    Toolset::new()
        .bind((put.combo().with(Cache::default()),))
        .unwrap();
}

/// A body that relays a limit's answer (it called a limited branch, or a
/// remote that said when): a huge `retry_after` must not panic retry's
/// `Instant + Duration`.
#[tokio::test]
async fn retry_given_a_wait_past_any_deadline_gives_up_without_panicking() {
    let tool = Tool::builder()
        .name("lookup")
        .description("Look up.")
        .read_only()
        .body(|_: Query| async move {
            Err::<String, _>(
                ToolError::Overloaded {
                    tool: toolgraft::Name::new("upstream").unwrap(),
                    extension: toolgraft::Name::new("rate_limit").unwrap(),
                    reason: "closed for maintenance".into(),
                    retry_after: Some(Duration::MAX),
                }
                .into(),
            )
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((tool.combo().with(Retry::attempts(3)),))
        .unwrap();
    let err = toolset
        .call("lookup_retry", json!({"q": "x"}))
        .await
        .unwrap_err();
    assert!(
        !matches!(err, ToolError::Panicked { .. })
            && err.to_string().contains("closed for maintenance"),
        "{err}"
    );
}

/// Typed configs out of range are refused at bind, as a manifest's are.
#[test]
fn typed_limit_and_retry_configs_out_of_range_are_refused_at_bind() {
    use toolgraft::ext::{Concurrency, RateLimit};
    let tool = || {
        Tool::builder()
            .name("lookup")
            .description("Look up.")
            .read_only()
            .body(|q: Query| async move { Ok(q.q) })
            .build()
            .unwrap()
    };
    assert!(
        Toolset::new()
            .bind((tool().combo().with(Retry::attempts(0)),))
            .is_err(),
        "attempts 0"
    );
    assert!(
        Toolset::new()
            .bind((tool().combo().with(Concurrency::at_most(0)),))
            .is_err(),
        "max 0"
    );
    assert!(
        Toolset::new()
            .bind((tool().combo().with(RateLimit::per_second(0)),))
            .is_err(),
        "calls 0"
    );
    assert!(
        Toolset::new()
            .bind((tool().combo().with(RateLimit::per_second(1).with_burst(0)),))
            .is_err(),
        "burst 0"
    );
}
