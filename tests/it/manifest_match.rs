//! A manifest's `"match"`: combos for tools the operator cannot name in
//! advance, by name prefix and hints (MCP's defaults for hints unsaid), through
//! `bind_manifest`, `apply_manifest` and `Manifest::combos_for`.

use serde_json::json;
use toolgraft::access::Scopes;
use toolgraft::ext::{Cache, Trace};
use toolgraft::prelude::*;
use toolgraft::rulebook::Rule;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::{ComboSpec, ElementSpec, Manifest};
use toolgraft::tool::Annotations;
use toolgraft::toolset::BaseTools;
use toolgraft::{BindError, Registry, Toolset};

use crate::common::Shout;

fn reads(name: &str) -> impl BaseTool<Input = Shout, Output = String> {
    Tool::builder()
        .name(name)
        .description("Read.")
        .read_only()
        .body(|input: Shout| std::future::ready(Ok(input.text)))
        .build()
        .unwrap()
}

/// A tool that says no hints: MCP reads it as writing, destructive, not
/// idempotent, open-world.
fn writes(name: &str) -> impl BaseTool<Input = Shout, Output = String> {
    Tool::builder()
        .name(name)
        .description("Write.")
        .body(|input: Shout| std::future::ready(Ok(input.text)))
        .build()
        .unwrap()
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap();
    registry
}

fn combos(names: &[&[&str]]) -> Vec<ComboSpec> {
    names
        .iter()
        .map(|combo| combo.iter().map(|name| ElementSpec::named(*name)).collect())
        .collect()
}

/// `fs_list` named (`trace`); writers under `fs_` traced; read-only ones cached.
fn manifest() -> Manifest {
    Manifest::from_value(&json!({
        "tools": {"fs_list": ["trace"]},
        "match": [
            {"prefix": "fs_", "annotations": {"readOnlyHint": false}, "combos": [["trace"]]},
            {"annotations": {"readOnlyHint": true}, "combos": [["cache"]]}
        ]
    }))
    .unwrap()
}

#[test]
fn bind_manifest_gives_unnamed_tools_the_entries_they_meet_and_named_ones_their_own() {
    let toolset = Toolset::new();
    let bases = BaseTools::new()
        .with(&reads("fs_list"))
        .with(&reads("fs_read"))
        .with(&writes("fs_write"))
        .with(&reads("web_get"))
        .with(&writes("web_post"));
    let outcome = toolset.bind_manifest(&registry(), &bases, &manifest());
    assert!(
        outcome.iter().all(|(_, result)| result.is_ok()),
        "{outcome:?}"
    );
    // `fs_list` is read-only but named: exactly its entry, no `cache`.
    assert_eq!(toolset.combos("fs_list").unwrap(), combos(&[&["trace"]]));
    assert_eq!(toolset.combos("fs_read").unwrap(), combos(&[&["cache"]]));
    assert_eq!(toolset.combos("fs_write").unwrap(), combos(&[&["trace"]]));
    assert_eq!(toolset.combos("web_get").unwrap(), combos(&[&["cache"]]));
    assert!(toolset.combos("web_post").unwrap().is_empty());
}

#[test]
fn a_tool_takes_every_entry_it_meets_in_order_and_a_combo_twice_is_refused() {
    let manifest = Manifest::from_value(&json!({"match": [
        {"prefix": "fs_", "combos": [["trace"]]},
        {"annotations": {"readOnlyHint": true}, "combos": [["cache"], ["trace", "cache"]]},
        {"prefix": "web_", "combos": [["trace"]]}
    ]}))
    .unwrap();
    let toolset = Toolset::new();
    let bases = BaseTools::new()
        .with(&reads("fs_read"))
        .with(&reads("web_get"));
    let outcome = toolset.bind_manifest(&registry(), &bases, &manifest);
    assert!(outcome[0].1.is_ok(), "{outcome:?}");
    assert_eq!(
        toolset.combos("fs_read").unwrap(),
        combos(&[&["trace"], &["cache"], &["trace", "cache"]])
    );
    assert!(outcome[1].1.is_ok(), "{outcome:?}");
    assert_eq!(
        toolset.combos("web_get").unwrap(),
        combos(&[&["cache"], &["trace", "cache"], &["trace"]])
    );
    let twice = Manifest::from_value(&json!({"match": [
        {"combos": [["trace"]]},
        {"prefix": "fs_", "combos": [["trace"]]}
    ]}))
    .unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(
        &registry(),
        &BaseTools::new().with(&reads("fs_read")),
        &twice,
    );
    assert!(
        matches!(outcome[0].1, Err(BindError::AlreadyAttached { .. })),
        "{outcome:?}"
    );
    assert!(toolset.names().is_empty());
}

#[test]
fn hints_a_tool_does_not_say_are_read_as_mcp_defaults() {
    let manifest = Manifest::from_value(&json!({"match": [
        {"annotations": {"destructiveHint": true, "openWorldHint": true, "idempotentHint": false}, "combos": [["trace"]]},
        {"annotations": {"destructiveHint": false}, "combos": [["cache"]]}
    ]}))
    .unwrap();
    let unsaid = Annotations::default();
    assert_eq!(manifest.combos_for("any", &unsaid), combos(&[&["trace"]]));
    let puts = Annotations {
        destructive: Some(false),
        idempotent: Some(true),
        ..Annotations::default()
    };
    assert_eq!(manifest.combos_for("any", &puts), combos(&[&["cache"]]));
}

#[test]
fn a_tool_the_manifest_names_takes_exactly_its_entry() {
    let manifest = manifest();
    let read_only = Annotations {
        read_only: Some(true),
        ..Annotations::default()
    };
    assert_eq!(
        manifest.combos_for("fs_list", &read_only),
        combos(&[&["trace"]])
    );
    // Named with no combos is still named: none from `match`.
    let none = Manifest::from_value(&json!({
        "tools": {"web_get": {"combos": []}},
        "match": [{"combos": [["cache"]]}]
    }))
    .unwrap();
    assert!(none.combos_for("web_get", &read_only).is_empty());
    assert_eq!(
        none.combos_for("web_put", &read_only),
        combos(&[&["cache"]])
    );
}

#[test]
fn apply_manifest_with_match_speaks_for_every_bound_tool() {
    let toolset = Toolset::new();
    toolset
        .bind((
            reads("fs_list").combo(),
            reads("fs_read").combo(),
            writes("fs_write").combo(),
            writes("web_post").combo().with(Trace),
        ))
        .unwrap();
    let registry = registry();

    // Without `match`, the tools a manifest does not name are left alone.
    let named_only = Manifest::from_json(r#"{"tools": {"fs_list": ["cache"]}}"#).unwrap();
    let outcome = toolset.apply_manifest(&registry, &named_only);
    assert_eq!(outcome.len(), 1);
    assert_eq!(toolset.combos("web_post").unwrap(), combos(&[&["trace"]]));

    let outcome = toolset.apply_manifest(&registry, &manifest());
    let keys: Vec<&str> = outcome.iter().map(|(key, _)| key.as_str()).collect();
    assert_eq!(keys, ["fs_list", "fs_read", "fs_write", "web_post"]);
    assert!(
        outcome.iter().all(|(_, result)| result.is_ok()),
        "{outcome:?}"
    );
    assert_eq!(toolset.combos("fs_list").unwrap(), combos(&[&["trace"]]));
    assert_eq!(toolset.combos("fs_read").unwrap(), combos(&[&["cache"]]));
    assert_eq!(toolset.combos("fs_write").unwrap(), combos(&[&["trace"]]));
    // Meets no entry: exactly none, its typed `trace` detached.
    assert!(toolset.combos("web_post").unwrap().is_empty());
}

#[test]
fn apply_manifest_with_match_leaves_publication_and_policies_and_refuses_per_tool() {
    let toolset = Toolset::new();
    toolset
        .bind((reads("web_get").combo(), writes("web_post").combo()))
        .unwrap();
    toolset
        .edit()
        .authorize("web_get", Scopes::all(["web"]))
        .commit()
        .unwrap();
    // `cache` on every tool: the writer refuses it, the reader takes it.
    let everything = Manifest::from_json(r#"{"match": [{"combos": [["cache"]]}]}"#).unwrap();
    let outcome = toolset.apply_manifest(&registry(), &everything);
    assert!(outcome[0].1.is_ok(), "{outcome:?}");
    let refused = outcome[1].1.as_ref().unwrap_err();
    assert_eq!(refused.rule(), Some(Rule::SideEffects), "{refused}");
    assert_eq!(toolset.names(), ["web_get", "web_get_cache", "web_post"]);
    assert!(!toolset.visible(None, "web_get"));
    assert!(!toolset.visible(None, "web_get_cache"));
}

#[test]
fn hints_a_manifest_said_for_a_tool_it_no_longer_names_are_taken_back_by_match() {
    let toolset = Toolset::new();
    let registry = registry();
    let said = Manifest::from_json(
        r#"{"tools": {"web_post": {"combos": [], "annotations": {"readOnlyHint": true}}}}"#,
    )
    .unwrap();
    let outcome = toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&writes("web_post")),
        &said,
    );
    assert!(outcome[0].1.is_ok());
    assert_eq!(
        toolset
            .info("web_post")
            .unwrap()
            .presentation
            .annotations
            .read_only,
        Some(true)
    );
    // A manifest with `match` that does not name it speaks for it: its own
    // hints, which is what the entries are matched on too.
    let by_hints = Manifest::from_json(
        r#"{"match": [{"annotations": {"readOnlyHint": false}, "combos": [["trace"]]}]}"#,
    )
    .unwrap();
    let outcome = toolset.apply_manifest(&registry, &by_hints);
    assert!(outcome[0].1.is_ok(), "{outcome:?}");
    assert_eq!(
        toolset
            .info("web_post")
            .unwrap()
            .presentation
            .annotations
            .read_only,
        None
    );
    assert_eq!(toolset.combos("web_post").unwrap(), combos(&[&["trace"]]));
}
