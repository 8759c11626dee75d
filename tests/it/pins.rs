//! Reserved params an operator pins: not advertised, refused from the caller,
//! passed on every call.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use toolgraft::ext::{Cache, Timeout};
use toolgraft::prelude::*;
use toolgraft::rulebook::Rule;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;
use toolgraft::{BindError, Registry, ToolError};

use crate::common::Shout;

fn counted(calls: Arc<AtomicUsize>) -> impl BaseTool<Input = Shout, Output = String> + Clone {
    Tool::builder()
        .name("search")
        .description("Search.")
        .read_only()
        .body(move |input: Shout| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { Ok(input.text) }
        })
        .build()
        .unwrap()
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register(Cache::default()).unwrap();
    registry
        .register(Timeout::new(std::time::Duration::from_secs(5)))
        .unwrap();
    registry
}

fn bind(manifest: &str, calls: &Arc<AtomicUsize>) -> (Toolset, Result<(), BindError>) {
    let toolset = Toolset::new();
    let manifest = Manifest::from_json(manifest).unwrap();
    let bases = BaseTools::new().with(&counted(calls.clone()));
    let mut outcome = toolset.bind_manifest(&registry(), &bases, &manifest);
    (toolset, outcome.remove(0).1)
}

#[tokio::test(start_paused = true)]
async fn a_pinned_param_is_not_advertised_refused_from_the_caller_and_always_passed() {
    let calls = Arc::new(AtomicUsize::new(0));
    // `exp: 1` against the default 60: a call 2 s later runs the body again.
    let (toolset, bound) = bind(
        r#"{"tools": {"search": [[{"name": "cache", "pin": {"exp": 1}}, "timeout"]]}}"#,
        &calls,
    );
    bound.unwrap();
    for name in ["search_cache", "search_cache_timeout"] {
        let schema = toolset.info(name).unwrap().input_schema;
        assert!(
            schema.get("properties").unwrap().get("exp").is_none(),
            "{name}: {schema:?}"
        );
        let refused = toolset
            .call(name, json!({"text": "tea", "exp": 60}))
            .await
            .unwrap_err();
        let ToolError::InvalidArguments { field, .. } = &refused else {
            panic!("{refused}")
        };
        assert_eq!(field.as_deref(), Some("exp"));
        assert!(
            refused.to_string().contains("the operator pins it"),
            "{refused}"
        );
    }
    for _ in 0..3 {
        let found = toolset
            .call("search_cache_timeout", json!({"text": "tea"}))
            .await
            .unwrap();
        assert_eq!(found, json!("tea"));
        tokio::time::advance(std::time::Duration::from_secs(2)).await;
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "the pinned `exp: 1` reached the cache"
    );
    assert_eq!(
        toolset.combos("search").unwrap()[0][0].to_string(),
        r#"cache pin{"exp":1}"#
    );
}

#[test]
fn only_reserved_params_are_pinned_and_the_manifest_says_how() {
    let calls = Arc::new(AtomicUsize::new(0));
    let (toolset, bound) = bind(
        r#"{"tools": {"search": [[{"name": "cache", "pin": {"ttl": 5}}]]}}"#,
        &calls,
    );
    let err = bound.unwrap_err();
    assert!(matches!(err, BindError::PinNotReserved { .. }), "{err}");
    assert_eq!(err.rule(), Some(Rule::ReservedParams));
    assert!(err.to_string().contains("it reserves: exp"), "{err}");
    assert!(toolset.names().is_empty());

    let err =
        Manifest::from_json(r#"{"tools": {"s": [[{"name": "cache", "pin": 5}]]}}"#).unwrap_err();
    assert!(
        err.to_string()
            .contains("has a `pin` that is not a mapping"),
        "{err}"
    );
}

/// Operator config is checked when bound: a pin of a type (or range) the
/// reserved param's schema does not admit is refused then, naming the param, the
/// value and what it takes, rather than bound to refuse every call as if the
/// caller had sent it.
#[test]
fn a_pin_its_schema_does_not_admit_is_refused_when_bound() {
    let calls = Arc::new(AtomicUsize::new(0));
    for (pin, takes) in [
        (r#"{"exp": "sixty"}"#, "not a string"),
        (r#"{"exp": -1}"#, "at least 1"),
        (r#"{"exp": 0}"#, "at least 1"),
        (r#"{"exp": true}"#, "a number, not a boolean"),
        (r#"{"exp": 86401}"#, "at most 86400"),
        (r#"{"exp": 1e300}"#, "at most 86400"),
    ] {
        let manifest =
            format!(r#"{{"tools": {{"search": [[{{"name": "cache", "pin": {pin}}}]]}}}}"#);
        let (toolset, bound) = bind(&manifest, &calls);
        let err = bound.unwrap_err();
        assert!(
            matches!(&err, BindError::PinMisfits { param, .. } if param == "exp"),
            "{pin}: {err}"
        );
        assert_eq!(err.rule(), Some(Rule::ReservedParams));
        assert!(err.to_string().contains(takes), "{pin}: {err}");
        assert!(toolset.names().is_empty(), "{pin}: nothing bound");
    }
    for pin in ["60", "1.5", "1", "86400"] {
        let manifest = format!(
            r#"{{"tools": {{"search": [[{{"name": "cache", "pin": {{"exp": {pin}}}}}]]}}}}"#
        );
        let (_, bound) = bind(&manifest, &calls);
        bound.unwrap_or_else(|err| panic!("a pin it takes binds: {pin}: {err}"));
    }
}

fn registry_with_batch() -> Registry {
    let mut registry = registry();
    registry
        .register(toolgraft::runtime::Configured::new(
            toolgraft::ext::Batch::default(),
        ))
        .unwrap();
    registry
}

/// Issue 36, item 11: a pin of a layer below a batch lands where that layer's
/// params live, on each item (not on the batch's own arguments), and an item
/// that sends it is refused as a caller who sends a pinned param is.
#[tokio::test(start_paused = true)]
async fn a_pin_below_a_batch_applies_to_each_item() {
    let calls = Arc::new(AtomicUsize::new(0));
    let toolset = Toolset::new();
    let manifest = Manifest::from_json(
        r#"{"tools": {"search": [[{"name": "cache", "pin": {"exp": 1}}, "batch"]]}}"#,
    )
    .unwrap();
    let bases = BaseTools::new().with(&counted(calls.clone()));
    let mut outcome = toolset.bind_manifest(&registry_with_batch(), &bases, &manifest);
    outcome.remove(0).1.unwrap();
    let schema = toolset.info("search_cache_batch").unwrap().input_schema;
    let item = &schema.get("properties").unwrap()["items"]["items"];
    assert!(item["properties"].get("exp").is_none(), "{item}");

    let args = json!({"items": [{"text": "a"}, {"text": "a"}, {"text": "b"}]});
    for _ in 0..2 {
        let found = toolset
            .call("search_cache_batch", args.clone())
            .await
            .unwrap();
        assert_eq!(found, json!(["a", "a", "b"]));
        tokio::time::advance(std::time::Duration::from_secs(2)).await;
    }
    // The pinned `exp: 1` reached the cache of every item: the second `a` of
    // a call is a hit, and 2 s later (not 60) both run again.
    assert_eq!(calls.load(Ordering::SeqCst), 4);

    let refused = toolset
        .call(
            "search_cache_batch",
            json!({"items": [{"text": "a", "exp": 60}]}),
        )
        .await
        .unwrap_err();
    let ToolError::InvalidArguments { field, .. } = &refused else {
        panic!("{refused}")
    };
    assert_eq!(field.as_deref(), Some("items[0].exp"), "{refused}");
    assert!(
        refused.to_string().contains("the operator pins it"),
        "{refused}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

/// Issue 36, item 6: an operator hides a reserved param without pinning a
/// value: it is not advertised (on its branch, above it, and in a batch's
/// items), a caller who sends it is refused as for a pinned one, and the layer
/// uses its default. From a manifest, and in code with `ElementSpec::with_hidden`
/// as pins are with `with_pins`; only reserved params can be hidden.
#[tokio::test]
async fn a_hidden_param_is_not_advertised_refused_from_the_caller_and_left_to_its_default() {
    use toolgraft::runtime::manifest::ElementSpec;
    let calls = Arc::new(AtomicUsize::new(0));
    let toolset = Toolset::new();
    let manifest = Manifest::from_json(
        r#"{"tools": {"search": [[{"name": "cache", "hide": ["exp"]}, "timeout", "batch"]]}}"#,
    )
    .unwrap();
    let base = counted(calls.clone());
    let bases = BaseTools::new().with(&base);
    let mut outcome = toolset.bind_manifest(&registry_with_batch(), &bases, &manifest);
    outcome.remove(0).1.unwrap();
    for name in ["search_cache", "search_cache_timeout"] {
        let schema = toolset.info(name).unwrap().input_schema;
        assert!(
            schema.get("properties").unwrap().get("exp").is_none(),
            "{name}: {schema:?}"
        );
        let refused = toolset
            .call(name, json!({"text": "tea", "exp": 60}))
            .await
            .unwrap_err();
        let ToolError::InvalidArguments { field, .. } = &refused else {
            panic!("{refused}")
        };
        assert_eq!(field.as_deref(), Some("exp"));
        assert!(
            refused.to_string().contains("the operator hides it"),
            "{refused}"
        );
    }
    let schema = toolset
        .info("search_cache_timeout_batch")
        .unwrap()
        .input_schema;
    let item = &schema.get("properties").unwrap()["items"]["items"];
    assert!(item["properties"].get("exp").is_none(), "{item}");
    let refused = toolset
        .call(
            "search_cache_timeout_batch",
            json!({"items": [{"text": "a", "exp": 60}]}),
        )
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("the operator hides it"),
        "{refused}"
    );
    // The default TTL (60 s) holds: the second call is the cache's.
    for _ in 0..2 {
        let found = toolset
            .call("search_cache_timeout", json!({"text": "tea"}))
            .await
            .unwrap();
        assert_eq!(found, json!("tea"));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        toolset.combos("search").unwrap()[0][0].to_string(),
        r#"cache hide["exp"]"#
    );

    // In code, as pins are: a live change with `ElementSpec::with_hidden`.
    let other = Toolset::new();
    other.bind((counted(calls.clone()).combo(),)).unwrap();
    let hidden = [ElementSpec::named("cache").with_hidden(["exp"])];
    other
        .edit()
        .attach(&registry(), "search", &hidden)
        .commit()
        .unwrap();
    let schema = other.info("search_cache").unwrap().input_schema;
    assert!(schema.get("properties").unwrap().get("exp").is_none());

    // Only reserved params, and a list of names.
    let (_, bound) = bind(
        r#"{"tools": {"search": [[{"name": "cache", "hide": ["ttl"]}]]}}"#,
        &calls,
    );
    let err = bound.unwrap_err();
    assert!(matches!(err, BindError::HiddenNotReserved { .. }), "{err}");
    assert_eq!(err.rule(), Some(Rule::ReservedParams));
    assert!(err.to_string().contains("it reserves: exp"), "{err}");
    let err = Manifest::from_json(r#"{"tools": {"s": [[{"name": "cache", "hide": "exp"}]]}}"#)
        .unwrap_err();
    assert!(
        err.to_string().contains("has a `hide` that is not a list"),
        "{err}"
    );
}

/// A call that brings a pinned param with exactly the pinned value is taken:
/// it changes nothing, and it is how a relocated call arrives at a worker that
/// binds the same pinned layer (the arguments were filled where the call was
/// made; `[cache pinned, remote]` was refused on its worker). Any other value
/// is still the operator's alone.
#[tokio::test]
async fn a_pinned_param_with_the_pinned_value_is_taken_and_no_other() {
    let calls = Arc::new(AtomicUsize::new(0));
    let (toolset, bound) = bind(
        r#"{"tools": {"search": [[{"name": "cache", "pin": {"exp": 60}}]]}}"#,
        &calls,
    );
    bound.unwrap();
    let same = toolset
        .call("search_cache", json!({"text": "tea", "exp": 60}))
        .await
        .unwrap();
    assert_eq!(same, json!("tea"));
    for other in [json!(5), json!(60.5), json!("60")] {
        let refused = toolset
            .call("search_cache", json!({"text": "tea", "exp": other}))
            .await
            .unwrap_err();
        assert!(
            refused.to_string().contains("the operator pins it"),
            "{other}: {refused}"
        );
    }
}

/// Issue 36: a pin over the operator's own `max_ttl_secs` is refused when
/// bound, as a caller's `exp` over it is refused when called.
#[test]
fn a_pin_over_the_configured_max_ttl_is_refused_when_bound() {
    let mut registry = Registry::new();
    registry
        .register(toolgraft::runtime::Configured::<Cache>::named("cache"))
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let bases = BaseTools::new().with(&counted(calls.clone()));
    for (pin, refused) in [(601, true), (600, false)] {
        let manifest = Manifest::from_json(&format!(
            r#"{{"tools": {{"search": [[{{"name": "cache", "config": {{"max_ttl_secs": 600}}, "pin": {{"exp": {pin}}}}}]]}}}}"#
        ))
        .unwrap();
        let toolset = Toolset::new();
        let bound = toolset
            .bind_manifest(&registry, &bases, &manifest)
            .remove(0)
            .1;
        if refused {
            let err = bound.unwrap_err();
            assert!(
                matches!(&err, BindError::PinMisfits { param, .. } if param == "exp"),
                "{err}"
            );
            assert!(err.to_string().contains("at most 600"), "{err}");
        } else {
            bound.unwrap();
        }
    }
}
