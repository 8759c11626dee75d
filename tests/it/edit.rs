//! Reading a tool's combos and changing several at once (`Toolset::combos`,
//! `Toolset::edit`): the order of the checks, typed combos kept, all or nothing.

use serde_json::json;
use toolgraft::combo::StartCombo;
use toolgraft::ext::{Cache, Pool, Proxy, Trace};
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::{ComboSpec, ElementSpec};
use toolgraft::{BindError, Registry, Toolset};

use crate::common::shout;

fn combo(names: &[&str]) -> ComboSpec {
    names.iter().map(|name| ElementSpec::named(*name)).collect()
}

/// Detaches `remove` and attaches `add`, in one edit.
fn swap(
    toolset: &Toolset,
    registry: &Registry,
    tool: &str,
    remove: &[ComboSpec],
    add: &[ComboSpec],
) -> Result<(), BindError> {
    let edit = remove
        .iter()
        .fold(toolset.edit(), |edit, combo| edit.detach(tool, combo));
    add.iter()
        .fold(edit, |edit, combo| edit.attach(registry, tool, combo))
        .commit()
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(Proxy::allow(["eu"]))
        .unwrap()
        .register(Pool::new(1).unwrap())
        .unwrap();
    registry
}

#[test]
fn typed_combos_are_listed_and_kept_by_an_edit() {
    let tool = shout();
    let toolset = Toolset::new();
    toolset.bind((tool.combo().with(Trace),)).unwrap();
    assert_eq!(toolset.combos("shout").unwrap(), [combo(&["trace"])]);
    let registry = registry();
    let cached = vec![ElementSpec::configured(
        "cache",
        json!({"default_ttl_secs": 5.0}),
    )];
    swap(
        &toolset,
        &registry,
        "shout",
        &[],
        std::slice::from_ref(&cached),
    )
    .unwrap();
    assert_eq!(
        toolset.combos("shout").unwrap(),
        [combo(&["trace"]), cached.clone()]
    );
    // An empty config is no config: the same combo as the bare name.
    let empty = vec![ElementSpec::configured("trace", json!({}))];
    let err = swap(
        &toolset,
        &registry,
        "shout",
        &[],
        std::slice::from_ref(&empty),
    )
    .unwrap_err();
    assert!(matches!(err, BindError::AlreadyAttached { .. }), "{err}");
    swap(&toolset, &registry, "shout", &[empty], &[]).unwrap();
    assert_eq!(toolset.combos("shout").unwrap(), [cached]);
    assert_eq!(toolset.names(), ["shout", "shout_cache"]);
}

#[test]
fn checks_come_in_order_and_a_refusal_changes_nothing() {
    let tool = shout();
    let toolset = Toolset::new();
    toolset.bind((tool.combo(),)).unwrap();
    let registry = registry();
    swap(&toolset, &registry, "shout", &[], &[combo(&["trace"])]).unwrap();
    let before = toolset.names();
    let mut changes = toolset.changes();
    changes.mark_unchanged();
    let broken = combo(&["pool", "proxy"]);
    // The tool first.
    let err = swap(
        &toolset,
        &registry,
        "ghost",
        &[combo(&["nope"])],
        std::slice::from_ref(&broken),
    );
    assert!(matches!(err, Err(BindError::UnknownTool { .. })));
    let err = swap(
        &toolset,
        &registry,
        "shout_trace",
        &[],
        std::slice::from_ref(&broken),
    );
    assert!(matches!(err, Err(BindError::NotABase { ref base, .. }) if base == "shout"));
    // Then membership, before any combo is bound.
    let err = swap(
        &toolset,
        &registry,
        "shout",
        &[combo(&["pool"])],
        std::slice::from_ref(&broken),
    );
    assert!(matches!(err, Err(BindError::NotAttached { .. })));
    let err = swap(
        &toolset,
        &registry,
        "shout",
        &[],
        &[combo(&["cache"]), combo(&["cache"])],
    );
    assert!(matches!(err, Err(BindError::AlreadyAttached { .. })));
    // Then the binding engine, whose refusal undoes the removal too.
    let err = swap(
        &toolset,
        &registry,
        "shout",
        &[combo(&["trace"])],
        &[combo(&["cache"]), broken],
    )
    .unwrap_err();
    assert_eq!(
        err.rule(),
        Some(toolgraft::rulebook::Rule::LocalityInsideRelocation)
    );
    assert_eq!(toolset.names(), before);
    assert!(!changes.has_changed().unwrap());
    // Removing and adding the same combo rebuilds it.
    swap(
        &toolset,
        &registry,
        "shout",
        &[combo(&["trace"])],
        &[combo(&["trace"])],
    )
    .unwrap();
    assert_eq!(toolset.names(), before);
    assert!(changes.has_changed().unwrap());
}

#[tokio::test]
async fn a_refused_edit_of_several_tools_leaves_every_old_binding_callable() {
    let toolset = Toolset::new();
    let (shout, ping) = (shout(), crate::common::ping());
    toolset
        .bind((shout.combo().with(Trace), ping.combo()))
        .unwrap();
    let registry = registry();
    let before = toolset.names();
    let mut changes = toolset.changes();
    changes.mark_unchanged();
    // Every step but the last is fine; the last breaks a rule at the engine.
    let err = toolset
        .edit()
        .detach("shout", &combo(&["trace"]))
        .attach(&registry, "shout", &combo(&["cache"]))
        .replace(&registry, "ping", &[combo(&["trace"])])
        .attach(&registry, "ping", &combo(&["pool", "proxy"]))
        .commit()
        .unwrap_err();
    assert_eq!(
        err.rule(),
        Some(toolgraft::rulebook::Rule::LocalityInsideRelocation)
    );
    assert_eq!(toolset.names(), before);
    assert!(!changes.has_changed().unwrap());
    let out = toolset
        .call("shout_trace", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(out, json!("hi"));
    assert!(toolset.call("ping", json!({})).await.is_ok());

    // The same edit without the broken step commits whole, as one change.
    toolset
        .edit()
        .detach("shout", &combo(&["trace"]))
        .attach(&registry, "shout", &combo(&["cache"]))
        .replace(&registry, "ping", &[combo(&["trace"])])
        .commit()
        .unwrap();
    assert_eq!(
        toolset.names(),
        ["ping", "ping_trace", "shout", "shout_cache"]
    );
    assert_eq!(*changes.borrow_and_update(), 2);
    assert_eq!(
        toolset
            .call("shout_cache", json!({"text": "hi"}))
            .await
            .unwrap(),
        json!("hi")
    );
}

#[test]
fn steps_apply_in_order_within_one_edit() {
    let tool = shout();
    let toolset = Toolset::new();
    toolset.bind((tool.combo(),)).unwrap();
    let registry = registry();
    // Attached then detached in one edit: nothing changes but the count.
    toolset
        .edit()
        .attach(&registry, "shout", &combo(&["trace"]))
        .detach("shout", &combo(&["trace"]))
        .commit()
        .unwrap();
    assert_eq!(toolset.names(), ["shout"]);
    // A replacement clears what earlier steps attached.
    toolset
        .edit()
        .attach(&registry, "shout", &combo(&["trace"]))
        .replace(&registry, "shout", &[combo(&["cache"])])
        .commit()
        .unwrap();
    assert_eq!(toolset.combos("shout").unwrap(), [combo(&["cache"])]);
    // A replacement that lists a combo twice is refused before anything is built.
    let err = toolset
        .edit()
        .replace(&registry, "shout", &[combo(&["trace"]), combo(&["trace"])])
        .commit()
        .unwrap_err();
    assert!(matches!(err, BindError::AlreadyAttached { .. }), "{err}");
    // Detaching what an earlier step of the same edit detached is refused.
    let err = toolset
        .edit()
        .detach("shout", &combo(&["cache"]))
        .detach("shout", &combo(&["cache"]))
        .commit()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "[cache] is not attached to `shout`; its combos are none"
    );
    assert_eq!(toolset.combos("shout").unwrap(), [combo(&["cache"])]);
    // No steps, no change.
    let mut changes = toolset.changes();
    changes.mark_unchanged();
    toolset.edit().commit().unwrap();
    assert!(!changes.has_changed().unwrap());
}
