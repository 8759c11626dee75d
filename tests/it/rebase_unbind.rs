//! A bound tool's base replaced or taken away at run time (`Edit::rebase`,
//! `Edit::unbind`): what an upstream MCP server's changed or removed tool goes
//! through. Every rule checked again on the new base; names, publications and
//! hints said as the docs promise; all or nothing with the edit's other steps.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use toolgraft::access::Scopes;
use toolgraft::context::{self, Identity};
use toolgraft::ext::{Cache, Trace};
use toolgraft::kind::ExtensionKind;
use toolgraft::prelude::*;
use toolgraft::rulebook::Rule;
use toolgraft::runtime::manifest::{ElementSpec, Manifest};
use toolgraft::runtime::{Configured, DynBranch, DynExtension};
use toolgraft::toolset::{BaseTools, Publish};
use toolgraft::{BindError, Registry, ToolError, Toolset};

use crate::common::Shout;

/// `shout`, read-only, answering the text with `mark` after it.
fn reads(description: &str, mark: &'static str) -> impl BaseTool<Input = Shout, Output = String> {
    Tool::builder()
        .name("shout")
        .description(description)
        .read_only()
        .body(move |input: Shout| std::future::ready(Ok(format!("{}{mark}", input.text))))
        .build()
        .unwrap()
}

/// `shout` with no hints (MCP reads it as changing things), answering the
/// text with `mark` after it.
fn writes(description: &str, mark: &'static str) -> impl BaseTool<Input = Shout, Output = String> {
    Tool::builder()
        .name("shout")
        .description(description)
        .body(move |input: Shout| std::future::ready(Ok(format!("{}{mark}", input.text))))
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

fn named(names: &[&str]) -> Vec<ElementSpec> {
    names.iter().map(|name| ElementSpec::named(*name)).collect()
}

#[tokio::test]
async fn a_rebase_serves_the_new_body_on_every_branch_and_a_refused_one_keeps_the_old() {
    let toolset = Toolset::new();
    let registry = registry();
    toolset.bind((reads("Old.", "-old").combo(),)).unwrap();
    toolset
        .edit()
        .attach(&registry, "shout", &named(&["trace", "cache"]))
        .commit()
        .unwrap();

    let err = toolset
        .edit()
        .rebase(&registry, &writes("New.", "-new"))
        .commit()
        .unwrap_err();
    assert_eq!(err.rule(), Some(Rule::SideEffects), "{err}");
    assert_eq!(toolset.info("shout_trace").unwrap().description, "Old.");
    let old = toolset
        .call("shout_trace_cache", json!({"text": "a"}))
        .await;
    assert_eq!(old.unwrap(), json!("a-old"));

    toolset
        .edit()
        .rebase(&registry, &reads("New.", "-new"))
        .commit()
        .unwrap();
    assert_eq!(
        toolset.names(),
        ["shout", "shout_trace", "shout_trace_cache"]
    );
    for name in toolset.names() {
        assert_eq!(toolset.info(&name).unwrap().description, "New.", "{name}");
        let answer = toolset.call(&name, json!({"text": "b"})).await.unwrap();
        assert_eq!(answer, json!("b-new"), "{name}");
    }
    assert_eq!(
        toolset.combos("shout").unwrap(),
        [named(&["trace", "cache"])]
    );
}

#[test]
fn hints_a_manifest_said_stay_said_over_the_new_base() {
    let toolset = Toolset::new();
    let registry = registry();
    // The operator vouches for a tool that says nothing: `cache` binds.
    let manifest = Manifest::from_json(
        r#"{"tools": {"shout": {"combos": [["cache"]], "annotations": {"readOnlyHint": true}}}}"#,
    )
    .unwrap();
    let bases = BaseTools::new().with(&writes("Old.", ""));
    let outcome = toolset.bind_manifest(&registry, &bases, &manifest);
    assert!(outcome[0].1.is_ok(), "{outcome:?}");

    // Upstream, the tool changes; the operator's word still holds.
    toolset
        .edit()
        .rebase(&registry, &writes("New.", ""))
        .commit()
        .unwrap();
    let info = toolset.info("shout_cache").unwrap();
    assert_eq!(info.description, "New.");
    assert_eq!(info.presentation.annotations.read_only, Some(true));

    // A manifest that says nothing gives the tool its own hints back, which
    // `cache` refuses: the said hints were kept apart from the new base's own.
    let silent = Manifest::from_json(r#"{"tools": {"shout": ["cache"]}}"#).unwrap();
    let outcome = toolset.apply_manifest(&registry, &silent);
    let err = outcome[0].1.as_ref().unwrap_err();
    assert_eq!(err.rule(), Some(Rule::SideEffects), "{err}");
}

#[test]
fn a_rebase_names_a_bound_base_tool() {
    let toolset = Toolset::new();
    let registry = registry();
    let other = Tool::builder()
        .name("shout_trace")
        .description("Not shout.")
        .read_only()
        .body(|input: Shout| std::future::ready(Ok(input.text)))
        .build()
        .unwrap();
    let err = toolset
        .edit()
        .rebase(&registry, &other)
        .commit()
        .unwrap_err();
    assert!(matches!(err, BindError::UnknownTool { .. }), "{err}");
    toolset
        .bind((reads("Old.", "").combo().with(Trace),))
        .unwrap();
    let err = toolset
        .edit()
        .rebase(&registry, &other)
        .commit()
        .unwrap_err();
    assert!(matches!(err, BindError::NotABase { .. }), "{err}");
}

#[test]
fn typed_combos_are_rebuilt_by_name_from_the_registry() {
    let toolset = Toolset::new();
    toolset
        .bind((reads("Old.", "").combo().with(Trace),))
        .unwrap();
    let err = toolset
        .edit()
        .rebase(&Registry::new(), &reads("New.", ""))
        .commit()
        .unwrap_err();
    assert!(matches!(err, BindError::UnknownExtensions { .. }), "{err}");
    assert_eq!(toolset.info("shout").unwrap().description, "Old.");
    toolset
        .edit()
        .rebase(&registry(), &reads("New.", ""))
        .commit()
        .unwrap();
    assert_eq!(toolset.info("shout_trace").unwrap().description, "New.");
}

#[test]
fn steps_after_a_rebase_build_on_the_new_base() {
    let toolset = Toolset::new();
    let registry = registry();
    toolset.bind((writes("Old.", "").combo(),)).unwrap();
    // `cache` on the old base is refused; attached after a rebase onto a
    // read-only one, it binds.
    let err = toolset
        .edit()
        .attach(&registry, "shout", &named(&["cache"]))
        .commit()
        .unwrap_err();
    assert_eq!(err.rule(), Some(Rule::SideEffects));
    toolset
        .edit()
        .rebase(&registry, &reads("New.", ""))
        .attach(&registry, "shout", &named(&["cache"]))
        .commit()
        .unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_cache"]);
}

#[tokio::test]
async fn unbind_takes_every_name_and_publication_and_a_new_bind_starts_fresh() {
    let toolset = Toolset::new();
    let registry = registry();
    toolset.bind((reads("Old.", "").combo(),)).unwrap();
    toolset
        .edit()
        .attach(&registry, "shout", &named(&["trace"]))
        .publish("shout", Publish::only([("loud", "shout_trace")]).unwrap())
        .audience("pro", Scopes::all(["pro"]))
        .publish_to(
            "pro",
            "shout",
            Publish::only([("pro_loud", "shout_trace")]).unwrap(),
        )
        .commit()
        .unwrap();
    let pro = Identity::new("ann").with_scopes(["pro"]);
    assert!(toolset.visible(Some(&pro), "pro_loud"));

    toolset.edit().unbind("shout").commit().unwrap();
    assert!(toolset.names().is_empty());
    assert!(toolset.resolve("loud").is_none());
    assert!(!toolset.visible(Some(&pro), "pro_loud"));
    let gone = toolset.call_published("loud", json!({"text": "a"})).await;
    assert!(
        matches!(gone, Err(ToolError::UnknownTool { .. })),
        "{gone:?}"
    );
    assert_eq!(toolset.audiences(), ["pro"]);

    // The same name again: no combos, publishing all its names, to everyone.
    toolset.bind((reads("New.", "").combo(),)).unwrap();
    assert_eq!(toolset.names(), ["shout"]);
    assert_eq!(toolset.publication("shout").unwrap(), Publish::All);
    assert!(toolset.visible(Some(&pro), "shout"));
    assert!(toolset.resolve("loud").is_none());
}

#[tokio::test]
async fn policies_on_an_unbound_tool_guard_it_when_it_comes_back() {
    let toolset = Toolset::new();
    toolset.bind((reads("Old.", "").combo(),)).unwrap();
    toolset
        .edit()
        .authorize("shout", Scopes::all(["shout"]))
        .commit()
        .unwrap();
    toolset.edit().unbind("shout").commit().unwrap();
    toolset.bind((reads("Back.", "").combo(),)).unwrap();
    assert!(!toolset.visible(None, "shout"));
    let anonymous = toolset.call("shout", json!({"text": "a"})).await;
    assert!(matches!(anonymous, Err(ToolError::UnknownTool { .. })));
    let allowed = Identity::new("ann").with_scopes(["shout"]);
    let answer = context::with(allowed, toolset.call("shout", json!({"text": "a"}))).await;
    assert_eq!(answer.unwrap(), json!("a"));

    // Taken off by name, bound or not.
    toolset
        .edit()
        .unbind("shout")
        .open("shout")
        .commit()
        .unwrap();
    toolset.bind((reads("Open.", "").combo(),)).unwrap();
    assert!(toolset.visible(None, "shout"));
}

#[test]
fn steps_on_a_tool_after_its_unbind_are_refused_and_before_it_vanish() {
    let toolset = Toolset::new();
    let registry = registry();
    toolset.bind((reads("Old.", "").combo(),)).unwrap();
    for after in [
        toolset
            .edit()
            .unbind("shout")
            .attach(&registry, "shout", &named(&["trace"])),
        toolset
            .edit()
            .unbind("shout")
            .rebase(&registry, &reads("New.", "")),
        toolset.edit().unbind("shout").unbind("shout"),
        toolset
            .edit()
            .unbind("shout")
            .publish("shout", Publish::All),
    ] {
        let err = after.commit().unwrap_err();
        assert!(matches!(err, BindError::UnboundInEdit { .. }), "{err}");
        assert_eq!(toolset.names(), ["shout"]);
    }
    // Before the unbind: checked (a wrong detach refuses), then gone with the tool.
    let err = toolset
        .edit()
        .detach("shout", &named(&["trace"]))
        .unbind("shout")
        .commit()
        .unwrap_err();
    assert!(matches!(err, BindError::NotAttached { .. }), "{err}");
    toolset
        .edit()
        .attach(&registry, "shout", &named(&["trace"]))
        .unbind("shout")
        .commit()
        .unwrap();
    assert!(toolset.names().is_empty());
}

#[test]
fn an_unbind_lands_with_the_edit_or_not_at_all() {
    let toolset = Toolset::new();
    let registry = registry();
    let whisper = Tool::builder()
        .name("whisper")
        .description("Return the text.")
        .read_only()
        .body(|input: Shout| std::future::ready(Ok(input.text)))
        .build()
        .unwrap();
    toolset
        .bind((reads("Old.", "").combo(), whisper.combo()))
        .unwrap();
    let err = toolset
        .edit()
        .unbind("shout")
        .attach(&registry, "whisper", &named(&["ghost"]))
        .commit()
        .unwrap_err();
    assert!(matches!(err, BindError::UnknownExtensions { .. }), "{err}");
    assert_eq!(toolset.names(), ["shout", "whisper"]);
    // A policy for a name of the unbound tool has no name to land on.
    let err = toolset
        .edit()
        .unbind("shout")
        .authorize("shout", Scopes::all(["s"]))
        .commit()
        .unwrap_err();
    assert!(matches!(err, BindError::UnknownTool { .. }), "{err}");
    assert_eq!(toolset.names(), ["shout", "whisper"]);
    // Another tool may publish the name the unbound one held, in the same edit.
    toolset
        .edit()
        .unbind("shout")
        .publish("whisper", Publish::only([("shout", "whisper")]).unwrap())
        .commit()
        .unwrap();
    assert_eq!(toolset.names(), ["whisper"]);
    assert_eq!(toolset.resolve("shout").unwrap().name, "whisper");
}

/// An edit prepared over a tool that is unbound and bound again before it
/// lands is prepared again over the new one: the new tool's generation is not
/// the old one's, though both were bound once.
#[test]
fn an_edit_prepared_before_an_unbind_and_a_bind_again_is_prepared_again() {
    let toolset = Toolset::new();
    toolset.bind((reads("Old.", "").combo(),)).unwrap();
    let builds = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::new();
    let (during, counted) = (toolset.clone(), builds.clone());
    registry
        .register(
            DynExtension::builder()
                .name("meanwhile")
                .kind(ExtensionKind::Wrapper)
                .factory(move |layer| {
                    // The first build sees the tool go and come back.
                    if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                        during.edit().unbind("shout").commit().unwrap();
                        during.bind((reads("New.", "").combo(),)).unwrap();
                    }
                    Ok(DynBranch::builder().stack(layer.below).build())
                })
                .build(),
        )
        .unwrap();
    toolset
        .edit()
        .attach(&registry, "shout", &named(&["meanwhile"]))
        .commit()
        .unwrap();
    assert_eq!(builds.load(Ordering::SeqCst), 2);
    assert_eq!(toolset.names(), ["shout", "shout_meanwhile"]);
    assert_eq!(toolset.info("shout_meanwhile").unwrap().description, "New.");
}
