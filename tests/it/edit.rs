//! Reading a tool's combos and changing several at once (`Toolset::combos`,
//! `Toolset::edit`): the order of the checks, typed combos kept, all or nothing.

use serde_json::json;
use toolgraft::combo::StartCombo;
use toolgraft::ext::{Cache, Pool, Proxy, Trace};
use toolgraft::runtime::manifest::{ComboSpec, ElementSpec};
use toolgraft::{BindError, Registry, Toolset};

use crate::common::shout;

fn combo(names: &[&str]) -> ComboSpec {
    names.iter().map(|name| ElementSpec::named(*name)).collect()
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register_configurable(Cache::default())
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
    toolset
        .bind(&tool, frunk::hlist![tool.combo().with(Trace)])
        .unwrap();
    assert_eq!(toolset.combos("shout").unwrap(), [combo(&["trace"])]);
    let registry = registry();
    let cached = vec![ElementSpec::configured(
        "cache",
        json!({"default_ttl_secs": 5.0}),
    )];
    toolset
        .edit(&registry, "shout", &[], std::slice::from_ref(&cached))
        .unwrap();
    assert_eq!(
        toolset.combos("shout").unwrap(),
        [combo(&["trace"]), cached.clone()]
    );
    // An empty config is no config: the same combo as the bare name.
    let empty = vec![ElementSpec::configured("trace", json!({}))];
    let err = toolset
        .edit(&registry, "shout", &[], std::slice::from_ref(&empty))
        .unwrap_err();
    assert!(matches!(err, BindError::AlreadyAttached { .. }), "{err}");
    toolset.edit(&registry, "shout", &[empty], &[]).unwrap();
    assert_eq!(toolset.combos("shout").unwrap(), [cached]);
    assert_eq!(toolset.names(), ["shout", "shout_cache"]);
}

#[test]
fn checks_come_in_order_and_a_refusal_changes_nothing() {
    let tool = shout();
    let toolset = Toolset::new();
    toolset.bind_tool(&tool).unwrap();
    let registry = registry();
    toolset
        .edit(&registry, "shout", &[], &[combo(&["trace"])])
        .unwrap();
    let before = toolset.names();
    let mut changes = toolset.changes();
    changes.mark_unchanged();
    let broken = combo(&["pool", "proxy"]);
    // The tool first.
    let err = toolset.edit(
        &registry,
        "ghost",
        &[combo(&["nope"])],
        std::slice::from_ref(&broken),
    );
    assert!(matches!(err, Err(BindError::UnknownTool { .. })));
    let err = toolset.edit(&registry, "shout_trace", &[], std::slice::from_ref(&broken));
    assert!(matches!(err, Err(BindError::NotABase { ref base, .. }) if base == "shout"));
    // Then membership, before any combo is bound.
    let err = toolset.edit(
        &registry,
        "shout",
        &[combo(&["pool"])],
        std::slice::from_ref(&broken),
    );
    assert!(matches!(err, Err(BindError::NotAttached { .. })));
    let err = toolset.edit(
        &registry,
        "shout",
        &[],
        &[combo(&["cache"]), combo(&["cache"])],
    );
    assert!(matches!(err, Err(BindError::AlreadyAttached { .. })));
    // Then the binding engine, whose refusal undoes the removal too.
    let err = toolset
        .edit(
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
    toolset
        .edit(
            &registry,
            "shout",
            &[combo(&["trace"])],
            &[combo(&["trace"])],
        )
        .unwrap();
    assert_eq!(toolset.names(), before);
    assert!(changes.has_changed().unwrap());
}
