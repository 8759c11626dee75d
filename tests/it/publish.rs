//! Published names: what clients see of a toolset, set in code and in a
//! manifest, changed with the combos atomically, and held to the name rules.

use serde_json::json;
use toolgraft::context::{self, CallName};
use toolgraft::ext::{Cache, Trace};
use toolgraft::limits::Limits;
use toolgraft::prelude::*;
use toolgraft::rulebook::Rule;
use toolgraft::runtime::manifest::{ElementSpec, Manifest};
use toolgraft::toolset::{BaseTools, Publish};
use toolgraft::{BindError, Registry, ToolError};

use crate::common::{Shout, ping};

/// `search`, whose body says which name the call came in by.
fn search() -> impl BaseTool<Input = Shout, Output = String> + Clone {
    Tool::builder()
        .name("search")
        .description("Search.")
        .read_only()
        .body(|input: Shout| async move {
            let called = context::get::<CallName>().map(|name| name.0.to_string());
            Ok(format!("{} via {}", input.text, called.unwrap_or_default()))
        })
        .build()
        .unwrap()
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register(Trace).unwrap();
    registry.register(Cache::default()).unwrap();
    registry
}

fn published(toolset: &Toolset) -> Vec<(String, String)> {
    toolset
        .published()
        .into_iter()
        .map(|p| (p.name.to_string(), p.info.name.to_string()))
        .collect()
}

fn pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn every_bound_name_is_published_by_default_and_outermost_keeps_each_combos_last() {
    let toolset = Toolset::new();
    let search = search();
    toolset
        .bind((
            search.combo().with(Cache::default()).with(Trace),
            search.combo().with(Trace),
            ping().combo(),
        ))
        .unwrap();
    assert_eq!(published(&toolset).len(), toolset.names().len());

    toolset
        .edit()
        .publish("search", Publish::Outermost)
        .publish("ping", Publish::Outermost)
        .commit()
        .unwrap();
    assert_eq!(
        published(&toolset),
        pairs(&[
            ("ping", "ping"),
            ("search_cache_trace", "search_cache_trace"),
            ("search_trace", "search_trace"),
        ])
    );
}

#[tokio::test]
async fn a_branch_published_under_its_bases_name_serves_the_calls_of_that_name() {
    let toolset = Toolset::new();
    toolset
        .bind((search().combo().with(Cache::default()).with(Trace),))
        .unwrap();
    let alias = Publish::only([("search", "search_cache_trace")]).unwrap();
    toolset.edit().publish("search", alias).commit().unwrap();
    assert_eq!(
        published(&toolset),
        pairs(&[("search", "search_cache_trace")])
    );

    // The call runs the whole branch, and every layer knows the name the caller used.
    let found = toolset
        .call_published("search", json!({"text": "tea"}))
        .await
        .unwrap();
    assert_eq!(found, json!("tea via search"));
    // The branch's reserved param came with it.
    toolset
        .call_published("search", json!({"text": "tea", "exp": 5}))
        .await
        .unwrap();
    // Hidden names are not published, and stay callable in process.
    let hidden = toolset
        .call_published("search_cache", json!({"text": "tea"}))
        .await;
    assert!(
        matches!(hidden, Err(ToolError::UnknownTool { .. })),
        "{hidden:?}"
    );
    let inside = toolset.call("search_cache", json!({"text": "rum"})).await;
    assert_eq!(inside.unwrap(), json!("rum via search_cache"));
    assert!(toolset.is_published("search") && !toolset.is_published("search_cache"));
}

#[test]
fn a_publication_that_does_not_hold_is_refused_and_changes_nothing() {
    let toolset = Toolset::new();
    toolset
        .bind((search().combo().with(Trace), ping().combo()))
        .unwrap();
    let before = published(&toolset);

    let unbound = Publish::only([("search", "search_cache")]).unwrap();
    let err = toolset
        .edit()
        .publish("search", unbound)
        .commit()
        .unwrap_err();
    assert!(matches!(err, BindError::PublishedUnbound { .. }), "{err}");
    assert_eq!(err.rule(), Some(Rule::PublishedNames));
    assert!(
        err.to_string().contains("which `search` does not bind"),
        "{err}"
    );

    // `ping` cannot publish a name `search` publishes, nor one twice.
    let taken = Publish::only([("search_trace", "ping")]).unwrap();
    let err = toolset.edit().publish("ping", taken).commit().unwrap_err();
    assert!(matches!(err, BindError::PublishedTwice { .. }), "{err}");
    let twice = Publish::only([("p", "ping"), ("p", "ping")]).unwrap();
    let err = toolset.edit().publish("ping", twice).commit().unwrap_err();
    assert!(
        matches!(&err, BindError::PublishedTwice { owner, .. } if owner == "ping"),
        "{err}"
    );
    assert_eq!(published(&toolset), before);
}

#[test]
fn a_change_of_combos_keeps_the_publication_and_both_change_in_one_step() {
    let toolset = Toolset::new();
    toolset.bind((search().combo().with(Trace),)).unwrap();
    let registry = registry();
    let alias = Publish::only([("search", "search_trace")]).unwrap();
    toolset.edit().publish("search", alias).commit().unwrap();

    // Dropping the aliased branch alone would leave `search` calling nothing.
    let cached = vec![vec![ElementSpec::named("cache")]];
    let err = toolset
        .edit()
        .replace(&registry, "search", &cached)
        .commit()
        .unwrap_err();
    assert!(matches!(err, BindError::PublishedUnbound { .. }), "{err}");
    assert_eq!(published(&toolset), pairs(&[("search", "search_trace")]));

    let moved = Publish::only([("search", "search_cache")]).unwrap();
    toolset
        .edit()
        .replace(&registry, "search", &cached)
        .publish("search", moved)
        .commit()
        .unwrap();
    assert_eq!(published(&toolset), pairs(&[("search", "search_cache")]));
}

#[tokio::test]
async fn a_manifest_sets_combos_and_published_names_together() {
    let toolset = Toolset::new();
    let registry = registry();
    let manifest = Manifest::from_json(
        r#"{"tools": {
            "search": {"combos": [["cache", "trace"]], "publish": {"search": "search_cache_trace", "find": "search_cache_trace"}},
            "ping": {"combos": [], "publish": "outermost"}
        }}"#,
    )
    .unwrap();
    let bases = BaseTools::new().with(&search()).with(&ping());
    for (tool, outcome) in toolset.bind_manifest(&registry, &bases, &manifest) {
        outcome.unwrap_or_else(|err| panic!("{tool}: {err}"));
    }
    assert_eq!(
        published(&toolset),
        pairs(&[
            ("find", "search_cache_trace"),
            ("ping", "ping"),
            ("search", "search_cache_trace"),
        ])
    );
    let found = toolset
        .call_published("find", json!({"text": "x"}))
        .await
        .unwrap();
    assert_eq!(found, json!("x via find"));

    // Applied again without `publish`, a tool keeps what it publishes.
    let again = Manifest::from_json(r#"{"tools": {"search": [["cache", "trace"]]}}"#).unwrap();
    for (_, outcome) in toolset.apply_manifest(&registry, &again) {
        outcome.unwrap();
    }
    assert_eq!(published(&toolset).len(), 3);
}

#[test]
fn a_malformed_publish_in_a_manifest_names_the_tool_and_the_fix() {
    let cases = [
        (
            r#"{"tools": {"s": {"combos": [["trace"]], "publish": "some"}}}"#,
            "has a `publish` of \"some\"",
        ),
        (
            r#"{"tools": {"s": {"combos": [["trace"]], "publish": {"a b": "s"}}}}"#,
            "publishes `a b`, which is not a name",
        ),
        (
            r#"{"tools": {"s": {"combos": [["trace"]], "publish": {"a": 3}}}}"#,
            "publishes `a` as 3, not a bound name",
        ),
        (
            r#"{"tools": {"s": {"combos": [["trace"]], "alias": {}}}}"#,
            "has an unexpected key `alias`",
        ),
        (r#"{"tools": {"s": {"publish": "all"}}}"#, "has no `combos`"),
    ];
    for (text, says) in cases {
        let err = Manifest::from_json(text).unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("tool `s`: ") && message.contains(says),
            "{message}"
        );
        assert_eq!(err.rule(), Some(Rule::ManifestShape));
    }
}

#[test]
fn published_names_have_a_length_cap_of_their_own() {
    let limits = Limits::default().with_max_published_len(64);
    let toolset = Toolset::with_limits(limits).unwrap();
    let registry = registry();
    let deep = vec![vec![ElementSpec::named("trace"); 11]];
    let manifest = Manifest {
        tools: vec![("search".to_owned(), deep)],
        ..Manifest::default()
    };
    // Every prefix is published (all, the default): the first over 64 bytes,
    // `search` and ten `_trace`s (66 bytes), is bound (under 128) but refused.
    let bases = BaseTools::new().with(&search());
    let mut outcome = toolset.bind_manifest(&registry, &bases, &manifest);
    let err = outcome.remove(0).1.unwrap_err();
    let BindError::PublishedTooLong { len, limit, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!((*len, *limit), (66, 64));
    assert!(
        err.to_string().contains("Limits::with_max_published_len"),
        "{err}"
    );
    assert!(toolset.names().is_empty(), "nothing bound");
}

#[test]
fn a_change_of_what_is_published_is_a_change_clients_hear_of() {
    let toolset = Toolset::new();
    toolset.bind((search().combo().with(Trace),)).unwrap();
    let changes = toolset.changes();
    let before = *changes.borrow();
    toolset
        .edit()
        .publish("search", Publish::Outermost)
        .commit()
        .unwrap();
    assert!(*changes.borrow() > before);
}

#[test]
fn typed_combos_bind_with_what_they_publish_in_one_step() {
    let toolset = Toolset::new();
    let changes = toolset.changes();
    let before = *changes.borrow();
    let alias = Publish::only([("search", "search_cache_trace")]).unwrap();
    toolset
        .bind_publishing(
            (search().combo().with(Cache::default()).with(Trace),),
            [("search", alias)],
        )
        .unwrap();
    // One change: no client ever listed the base or the hidden branches.
    assert_eq!(*changes.borrow(), before + 1);
    assert_eq!(
        published(&toolset),
        pairs(&[("search", "search_cache_trace")])
    );

    let unknown = toolset.bind_publishing((ping().combo(),), [("pong", Publish::Outermost)]);
    assert!(
        matches!(unknown, Err(BindError::UnknownTool { .. })),
        "{unknown:?}"
    );
    assert!(!toolset.contains("ping"), "nothing of the call is bound");
}

/// A tool may not publish a name another tool binds, hidden or not: a client
/// calling it would reach one tool and an in-process call of the same name the
/// other. Refused whole, typed and from a manifest, naming both tools.
#[tokio::test]
async fn a_published_name_another_tool_binds_is_refused() {
    let toolset = Toolset::new();
    toolset
        .bind((search().combo().with(Trace), ping().combo().with(Trace)))
        .unwrap();
    // `ping` hides its base name; `search` may not take it.
    toolset
        .edit()
        .publish("ping", Publish::Outermost)
        .commit()
        .unwrap();
    let before = published(&toolset);
    let alias = Publish::only([("ping", "search_trace")]).unwrap();
    let refused = toolset
        .edit()
        .publish("search", alias)
        .commit()
        .unwrap_err();
    assert!(
        matches!(&refused, BindError::PublishedNameOfAnother { tool, published, owner }
            if tool == "search" && published == "ping" && owner == "ping"),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("rule `published-names`"),
        "{refused}"
    );
    assert_eq!(published(&toolset), before, "nothing changed");
    assert_eq!(
        toolset.call("ping", json!({})).await.unwrap(),
        json!("pong")
    );

    let from_manifest = Toolset::new();
    let manifest = Manifest::from_json(
        r#"{"tools": {
            "search": {"combos": [["trace"]], "publish": {"ping": "search_trace"}},
            "ping": {"combos": [["trace"]], "publish": "outermost"}
        }}"#,
    )
    .unwrap();
    let bases = BaseTools::new().with(&search()).with(&ping());
    let outcomes = from_manifest.bind_manifest(&registry(), &bases, &manifest);
    assert!(
        outcomes.iter().any(|(_, outcome)| matches!(
            outcome,
            Err(BindError::PublishedNameOfAnother { published, .. }) if published == "ping"
        )),
        "{outcomes:?}"
    );
}

/// One word puts each tool's combo in place of the tool: clients keep calling
/// `search`, served by its outermost branch (issue 36, item 7: the names were
/// spelled out by hand, one pair per tool). A tool with two combos has no one
/// branch to put in its place.
#[tokio::test]
async fn in_place_publishes_the_outermost_branch_under_the_tools_own_name() {
    let toolset = Toolset::new();
    toolset
        .bind_publishing(
            (
                search().combo().with(Cache::default()).with(Trace),
                ping().combo(),
            ),
            [("search", Publish::InPlace), ("ping", Publish::InPlace)],
        )
        .unwrap();
    assert_eq!(
        published(&toolset),
        pairs(&[("ping", "ping"), ("search", "search_cache_trace")])
    );
    assert_eq!(
        toolset
            .call_published("search", json!({"text": "tea"}))
            .await
            .unwrap(),
        json!("tea via search")
    );

    let refused = toolset
        .edit()
        .attach(&registry(), "search", &[ElementSpec::named("trace")])
        .commit()
        .unwrap_err();
    assert!(
        matches!(&refused, BindError::InPlaceOfSeveral { tool, outermost }
            if tool == "search" && outermost.len() == 2),
        "{refused:?}"
    );
    assert_eq!(refused.rule(), Some(Rule::PublishedNames));
    assert!(
        refused
            .to_string()
            .contains("Publish::only([(\"search\", \"search_cache_trace\")])"),
        "{refused}"
    );

    let from_manifest = Toolset::new();
    let manifest = Manifest::from_json(
        r#"{"tools": {"search": {"combos": [["cache", "trace"]], "publish": "in_place"}}}"#,
    )
    .unwrap();
    let bases = BaseTools::new().with(&search());
    for (_, outcome) in from_manifest.bind_manifest(&registry(), &bases, &manifest) {
        outcome.unwrap();
    }
    assert_eq!(
        published(&from_manifest),
        pairs(&[("search", "search_cache_trace")])
    );
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Query {
    q: String,
}

/// A chain's `next_tool` is a name the caller could call itself: a published
/// one, run through the layers put in its place. A hostile review found a
/// chain reaching the raw base behind `Publish::InPlace` (and any hidden name),
/// skipping its rate limit.
#[tokio::test]
async fn a_chain_reaches_published_names_only() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use toolgraft::ext::{Chain, RateLimit};
    let runs = Arc::new(AtomicUsize::new(0));
    let search = Tool::builder()
        .name("search")
        .description("Search.")
        .read_only()
        .body({
            let runs = runs.clone();
            move |input: Query| {
                runs.fetch_add(1, Ordering::SeqCst);
                async move { Ok(input.q) }
            }
        })
        .build()
        .unwrap();
    let find = Tool::builder()
        .name("find")
        .description("Find a query.")
        .read_only()
        .body(|input: Query| async move { Ok(json!({"q": input.q})) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind_in_place((
            search.combo().with(RateLimit::per_minute(1)),
            find.combo().with(Chain::new(&toolset)),
        ))
        .unwrap();
    let chained = |next: &str| {
        toolset.call_published("find", json!({"q": "tea", "next_tool": next, "select": ""}))
    };
    assert_eq!(chained("search").await.unwrap(), json!("tea"));
    let limited = chained("search").await.unwrap_err();
    assert!(
        matches!(limited, ToolError::Overloaded { .. }),
        "{limited:?}"
    );
    for hidden in ["search_rate_limit"] {
        let refused = chained(hidden).await.unwrap_err();
        assert!(
            refused.to_string().contains("is not a published tool"),
            "{hidden}: {refused}"
        );
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the raw base never ran past its limit"
    );
}
