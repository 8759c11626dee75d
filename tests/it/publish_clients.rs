//! Published names as their clients meet them: what a client of a published
//! name is told never points it at names it cannot call, and a combo is bound
//! once.

use serde_json::json;
use toolgraft::ext::{Cache, Trace};
use toolgraft::prelude::*;
use toolgraft::toolset::Publish;

use crate::common::Shout;

fn search() -> impl BaseTool<Input = Shout, Output = String> + Clone {
    Tool::builder()
        .name("search")
        .description("Search.")
        .read_only()
        .body(|input: Shout| async move {
            if input.text.is_empty() {
                return Err("nothing to search for".into());
            }
            Ok(input.text)
        })
        .build()
        .unwrap()
}

/// `search` publishes its base alone: the cached branches are hidden. The
/// client's unknown `exp` must not be answered with "`exp` is a parameter of
/// `search_cache`": that name is not published, and calling it fails.
#[tokio::test]
async fn a_hint_never_names_an_unpublished_sibling() {
    let toolset = Toolset::new();
    toolset
        .bind((search().combo().with(Cache::default()).with(Trace),))
        .unwrap();
    let base_only = Publish::only([("search", "search")]).unwrap();
    toolset
        .edit()
        .publish("search", base_only)
        .commit()
        .unwrap();
    assert!(!toolset.is_published("search_cache"));

    let err = toolset
        .call_published("search", json!({"text": "tea", "exp": 5}))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        !message.contains("`search_cache`"),
        "the hint points at a hidden name: {message}"
    );
}

/// `search` is served by `search_cache_trace`, which clients never see: what
/// they read of a failed call names what they called.
#[tokio::test]
async fn errors_of_an_alias_name_the_published_name() {
    let toolset = Toolset::new();
    toolset
        .bind((search().combo().with(Cache::default()).with(Trace),))
        .unwrap();
    let alias = Publish::only([("search", "search_cache_trace")]).unwrap();
    toolset.edit().publish("search", alias).commit().unwrap();

    for args in [json!({}), json!({"text": ""})] {
        let err = toolset.call_published("search", args).await.unwrap_err();
        let message = err.to_string();
        assert!(
            !message.contains("search_cache_trace"),
            "a client of `search` is told of a hidden bound name: {message}"
        );
    }
}

/// Two equal combos of one tool in a `Vec` (what `impl Combos for Vec<C>`
/// invites: one combo per item of a list that may repeat): refused as
/// `AlreadyAttached`, as an edit refuses them, rather than bound twice.
#[test]
fn a_vec_with_one_combo_twice_is_refused_as_already_attached() {
    let toolset = Toolset::new();
    let search = search();
    let twice = vec![search.combo().with(Trace), search.combo().with(Trace)];
    let outcome = toolset.bind(twice);
    assert!(
        matches!(outcome, Err(toolgraft::BindError::AlreadyAttached { .. })),
        "{:?}",
        outcome.map(|branches| branches.len())
    );
}

/// The same combo twice in a tuple: refused at bind, as an edit refuses it,
/// so no tool holds a combo that one `detach` would leave attached.
#[test]
fn a_combo_bound_twice_in_a_tuple_is_refused_too() {
    let toolset = Toolset::new();
    let search = search();
    let twice = toolset.bind((search.combo().with(Trace), search.combo().with(Trace)));
    assert!(
        matches!(twice, Err(toolgraft::BindError::AlreadyAttached { .. })),
        "{twice:?}"
    );
    assert!(toolset.names().is_empty(), "{:?}", toolset.names());
}
