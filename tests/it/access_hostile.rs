//! Per-name authorization as a hostile user tried to break it (each case failed
//! before its fix): a branch's policy guards the branches above it, a tuple of
//! policies hides as `check` does, a manifest entry rules its own tool's names
//! only, and a policy decides its name only while the name is its tool's.

use serde_json::json;
use toolgraft::access::Scopes;
use toolgraft::context::{self, Identity};
use toolgraft::ext::{Cache, Trace};
use toolgraft::prelude::*;
use toolgraft::runtime::manifest::ElementSpec;
use toolgraft::toolset::Publish;
use toolgraft::{Registry, ToolError, Toolset};

use crate::common::{Shout, shout};

fn hi() -> serde_json::Value {
    json!({"text": "hi"})
}

/// A policy on a branch decides "that branch and every branch above it"
/// (`access` module docs, `Guards` docs): `shout_trace_cache` is built on
/// `shout_trace`.
#[tokio::test]
async fn probe_a_branch_policy_covers_the_branches_above_it() {
    let toolset = Toolset::new();
    toolset
        .bind((shout().combo().with(Trace).with(Cache::default()),))
        .unwrap();
    assert!(toolset.contains("shout_trace_cache"));
    toolset
        .edit()
        .authorize("shout_trace", Scopes::all(["secret"]))
        .commit()
        .unwrap();
    let below = toolset.call_published("shout_trace", hi()).await;
    assert!(
        matches!(below, Err(ToolError::UnknownTool { .. })),
        "{below:?}"
    );
    let above = toolset.call_published("shout_trace_cache", hi()).await;
    assert!(
        matches!(above, Err(ToolError::UnknownTool { .. })),
        "the branch above the guarded one answered an anonymous caller: {above:?}"
    );
    assert!(!toolset.visible(None, "shout_trace_cache"));
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register(Trace).unwrap();
    registry
}

/// A policy on a branch that goes away stays in the toolset, and re-applies to
/// whatever later binds that name, here a fresh base tool of that name.
#[tokio::test]

async fn probe_a_policy_orphaned_by_a_detach_does_not_guard_a_new_tool() {
    let toolset = Toolset::new();
    toolset.bind((shout().combo(),)).unwrap();
    let registry = registry();
    let trace = [ElementSpec::named("trace")];
    toolset
        .edit()
        .attach(&registry, "shout", &trace)
        .commit()
        .unwrap();
    toolset
        .edit()
        .authorize("shout_trace", Scopes::all(["secret"]))
        .commit()
        .unwrap();
    toolset.edit().detach("shout", &trace).commit().unwrap();
    assert!(!toolset.is_guarded(), "no guarded name is left");
    // A new tool, bound by name `shout_trace`, by someone who never saw that policy.
    let other = Tool::builder()
        .name("shout_trace")
        .description("Another tool.")
        .read_only()
        .body(|i: Shout| async move { Ok(i.text) })
        .build()
        .unwrap();
    toolset.bind((other.combo(),)).unwrap();
    assert!(
        toolset.visible(None, "shout_trace"),
        "the stale policy of a detached branch guards a tool bound later"
    );
}

/// `apply_manifest` says a tool's whole access ("what it no longer names is
/// open again"), but a policy on a branch that is not bound at that moment is
/// not seen by `ruled_names_of`: it survives the manifest and re-applies once
/// the manifest brings the branch back.
#[tokio::test]

async fn probe_apply_manifest_without_access_opens_the_tools_names() {
    let toolset = Toolset::new();
    toolset.bind((shout().combo(),)).unwrap();
    let registry = registry();
    let trace = [ElementSpec::named("trace")];
    toolset
        .edit()
        .attach(&registry, "shout", &trace)
        .authorize("shout_trace", Scopes::all(["secret"]))
        .commit()
        .unwrap();
    toolset.edit().detach("shout", &trace).commit().unwrap();
    // The manifest brings the combo back, and says no access for the tool.
    let traced =
        toolgraft::runtime::manifest::Manifest::from_json(r#"{"tools": {"shout": ["trace"]}}"#)
            .unwrap();
    for (_, outcome) in toolset.apply_manifest(&registry, &traced) {
        outcome.unwrap();
    }
    assert!(
        toolset.visible(None, "shout_trace"),
        "a manifest that says the tool's whole access (none) left a policy on it"
    );
}

/// A published alias equal to a name the tool binds but hides: the alias's
/// own policy and the bound name's are the same rule key.
#[tokio::test]
async fn probe_alias_of_a_guarded_branch_is_guarded() {
    let toolset = Toolset::new();
    toolset.bind((shout().combo().with(Trace),)).unwrap();
    toolset
        .edit()
        .authorize("shout_trace", Scopes::all(["secret"]))
        .commit()
        .unwrap();
    toolset
        .edit()
        .publish("shout", Publish::only([("loud", "shout_trace")]).unwrap())
        .commit()
        .unwrap();
    let out = toolset.call_published("loud", hi()).await;
    assert!(
        matches!(out, Err(ToolError::UnknownTool { ref name }) if name == "loud"),
        "{out:?}"
    );
    let ann = Identity::new("ann").with_scopes(["secret"]);
    assert_eq!(
        context::with(ann, toolset.call_published("loud", hi()))
            .await
            .unwrap(),
        json!("hi")
    );
}

/// A tuple of policies checks "all must allow", but stops at the first refusal:
/// a step-up refusal first hides a refusal without step-up after it, so a caller
/// of another tenant is shown the name and told which scope to ask for.
#[tokio::test]
async fn probe_a_tuple_does_not_let_a_step_up_hide_a_hidden_refusal() {
    use toolgraft::access::Claim;
    let toolset = Toolset::new();
    toolset.bind((shout().combo(),)).unwrap();
    toolset
        .edit()
        .authorize(
            "shout",
            (
                Scopes::all(["notes:write"]).with_step_up(),
                Claim::is("tenant", "acme"),
            ),
        )
        .commit()
        .unwrap();
    let globex = Identity::new("bob").with_claim("tenant", "globex");
    assert!(
        !toolset.visible(Some(&globex), "shout"),
        "another tenant is shown the name"
    );
    let out = context::with(globex, toolset.call_published("shout", hi())).await;
    assert!(matches!(out, Err(ToolError::UnknownTool { .. })), "{out:?}");
}

/// A tool's manifest entry says the access of *its* names; an entry that names
/// another tool's name is applied (and then undone or not by the other tool's
/// entry, depending on order): here `whisper`'s own strict policy is opened by
/// `shout`'s entry coming after it.
#[tokio::test]

async fn probe_a_manifest_entry_rules_only_its_own_tools_names() {
    let toolset = Toolset::new();
    let whisper = Tool::builder()
        .name("whisper")
        .description("Return the text.")
        .read_only()
        .body(|i: Shout| async move { Ok(i.text) })
        .build()
        .unwrap();
    toolset.bind((shout().combo(), whisper.combo())).unwrap();
    let registry = registry();
    let manifest = toolgraft::runtime::manifest::Manifest::from_json(
        r#"{"tools": {
            "whisper": {"combos": [["trace"]], "access": {"whisper": {"scopes": ["secret"]}}},
            "shout": {"combos": [["trace"]], "access": {"whisper": {}}}
        }}"#,
    )
    .unwrap();
    let outcome = toolset.apply_manifest(&registry, &manifest);
    let ann = Identity::new("ann");
    assert!(
        outcome[1].1.is_err() || !toolset.visible(Some(&ann), "whisper"),
        "shout's entry replaced whisper's policy: {outcome:?}"
    );
}

/// Arguments nested past `Limits::max_depth` are refused "before any other
/// work": a policy is other work, and one that reads the arguments walks them
/// (a CEL condition converts them recursively, enough nesting overflows the
/// stack). Such a call is decided as a listing is (no arguments): a caller the
/// name is hidden from is told it does not exist; one it is shown, that the
/// arguments nest too deep; the policy never sees them.
#[tokio::test]
async fn a_policy_never_sees_arguments_nested_too_deep() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use toolgraft::access::{Denied, Missing, policy_fn};
    use toolgraft::error::ArgsErrorKind;
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    let toolset = Toolset::new();
    toolset.bind((shout().combo(),)).unwrap();
    toolset
        .edit()
        .authorize(
            "shout",
            policy_fn(move |access| {
                if access.arguments.is_some() {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                match access.identity {
                    Some(_) => Ok(()),
                    None => Err(Denied::new(Missing::Caller)),
                }
            }),
        )
        .commit()
        .unwrap();
    let mut deep = json!("hi");
    for _ in 0..100 {
        deep = json!([deep]);
    }
    let args = json!({"text": deep});
    let ann = Identity::new("ann");
    let shown = context::with(ann, toolset.call_published("shout", args.clone())).await;
    assert!(
        matches!(
            shown,
            Err(ToolError::InvalidArguments {
                kind: ArgsErrorKind::TooDeep,
                ..
            })
        ),
        "{shown:?}"
    );
    let hidden = toolset.call_published("shout", args).await;
    assert!(
        matches!(hidden, Err(ToolError::UnknownTool { .. })),
        "{hidden:?}"
    );
    assert_eq!(seen.load(Ordering::SeqCst), 0, "the policy walked them");
}

/// A policy on a published alias guards the name clients call. Moving the
/// alias to another tool in a later edit leaves the policy with the first tool
/// (rule: a policy decides its name only while the name is its tool's), and
/// the name clients call is open, silently: the edit should say so (refuse,
/// or the policy follow the published name).
#[tokio::test]
async fn moving_a_guarded_alias_to_another_tool_does_not_open_it_silently() {
    let whisper = Tool::builder()
        .name("whisper")
        .description("Return the text.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((shout().combo(), whisper.combo())).unwrap();
    toolset
        .edit()
        .publish("shout", Publish::only([("say", "shout")]).unwrap())
        .authorize("say", Scopes::all(["secret"]))
        .commit()
        .unwrap();
    assert!(!toolset.visible(None, "say"));
    let moved = toolset
        .edit()
        .publish("shout", Publish::Only(Vec::new()))
        .publish("whisper", Publish::only([("say", "whisper")]).unwrap())
        .commit();
    assert!(
        matches!(&moved, Err(toolgraft::BindError::GuardedNameMoved { name, .. }) if name == "say"),
        "{moved:?}"
    );
    assert!(
        toolset.call_published("say", hi()).await.is_err(),
        "still guarded"
    );
    // Said in the same edit, the move lands: authorized again, or opened.
    toolset
        .edit()
        .publish("shout", Publish::Only(Vec::new()))
        .publish("whisper", Publish::only([("say", "whisper")]).unwrap())
        .authorize("say", Scopes::all(["secret"]))
        .commit()
        .unwrap();
    assert!(!toolset.visible(None, "say"));
}
