//! Who may see and call what (`toolgraft::access`): policies on a toolset's names
//! are checked before any work of a call, a refused caller is told no more than of
//! a name that does not exist (or, with a step-up, which scopes to ask for), the
//! same policies decide what each caller is shown, `chain` calls as its caller,
//! the identity travels to a worker thread, and rule
//! `shared-answers-inside-authorization` refuses a cache outside an `authorize`
//! from a manifest as the compiler refuses it from code (ui-tests/fail/cache_outside_authorize.rs).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgraft::access::{Claim, Scopes, policy_fn};
use toolgraft::context::{self, Identity};
use toolgraft::ext::{Authorize, Cache, Chain, Pool};
use toolgraft::prelude::*;
use toolgraft::rulebook::Rule;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::{BaseTools, Publish};
use toolgraft::{BindError, Registry, ToolError, Toolset};

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Note {
    text: String,
}

/// `write_note`, counting the calls that reach its body.
fn write_note(runs: Arc<AtomicUsize>) -> impl BaseTool<Input = Note, Output = String> {
    Tool::builder()
        .name("write_note")
        .description("Write a note.")
        .body(move |note: Note| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move { Ok(format!("noted: {}", note.text)) }
        })
        .build()
        .unwrap()
}

fn alice() -> Identity {
    Identity::new("alice")
        .with_scopes(["notes:write", "tools:read"])
        .with_claim("tenant", "acme")
}

fn bob() -> Identity {
    Identity::new("bob")
        .with_scopes(["tools:read"])
        .with_claim("tenant", "globex")
}

async fn as_caller(
    who: Option<Identity>,
    call: impl Future<Output = Result<Value, ToolError>>,
) -> Result<Value, ToolError> {
    match who {
        Some(who) => context::with(who, call).await,
        None => call.await,
    }
}

#[tokio::test]
async fn a_refused_caller_is_told_what_an_unknown_name_tells_and_nothing_runs() {
    let runs = Arc::new(AtomicUsize::new(0));
    let toolset = Toolset::new();
    toolset
        .bind((write_note(runs.clone()).combo().with(Pool::new(1).unwrap()),))
        .unwrap();
    toolset
        .edit()
        .authorize("write_note", Claim::is("tenant", "acme"))
        .commit()
        .unwrap();
    let note = || json!({"text": "hi"});
    for name in ["write_note", "write_note_pool"] {
        for who in [Some(bob()), None] {
            let refused = as_caller(who.clone(), toolset.call_published(name, note()))
                .await
                .unwrap_err();
            let missing = as_caller(who, toolset.call_published("write_nota", note()))
                .await
                .unwrap_err();
            assert!(
                matches!(refused, ToolError::UnknownTool { .. }),
                "{refused}"
            );
            assert_eq!(
                refused.to_string().replace(name, "NAME"),
                missing.to_string().replace("write_nota", "NAME")
            );
        }
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "no body ran, no job went to the pool"
    );
    let ok = as_caller(
        Some(alice()),
        toolset.call_published("write_note_pool", note()),
    )
    .await;
    assert_eq!(ok.unwrap(), json!("noted: hi"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_step_up_names_the_scopes_and_the_name_stays_listed() {
    let runs = Arc::new(AtomicUsize::new(0));
    let toolset = Toolset::new();
    toolset.bind((write_note(runs.clone()).combo(),)).unwrap();
    toolset
        .edit()
        .authorize(
            "write_note",
            (
                Claim::is("tenant", "acme"),
                Scopes::all(["notes:write"]).with_step_up(),
            ),
        )
        .commit()
        .unwrap();
    let carol = Identity::new("carol").with_claim("tenant", "acme");
    let refused = as_caller(
        Some(carol.clone()),
        toolset.call("write_note", json!({"text": "x"})),
    )
    .await
    .unwrap_err();
    let ToolError::Unauthorized { name, denied } = &refused else {
        panic!("expected a step-up refusal, got {refused}");
    };
    assert_eq!(name, "write_note");
    assert_eq!(denied.missing.scopes(), ["notes:write"]);
    assert_eq!(
        refused.to_string(),
        "`write_note` refused the caller: the call needs the scope `notes:write`"
    );
    assert!(
        toolset.visible(Some(&carol), "write_note"),
        "a step-up name is listed"
    );
    // Of another tenant: hidden, whatever scope a new token would bring.
    assert!(!toolset.visible(Some(&bob()), "write_note"));
    let hidden = as_caller(
        Some(bob()),
        toolset.call("write_note", json!({"text": "x"})),
    )
    .await;
    assert!(matches!(hidden, Err(ToolError::UnknownTool { .. })));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_policy_reads_the_arguments_of_a_call_and_allows_a_listing() {
    let toolset = Toolset::new();
    toolset.bind((write_note(Arc::default()).combo(),)).unwrap();
    let short_notes = policy_fn(|access| {
        let long = access
            .arguments
            .and_then(|args| args.get("text")?.as_str().map(|text| text.len() > 5));
        match long {
            Some(true) => Err(toolgraft::access::Denied::new(
                toolgraft::access::Missing::Condition("a note of at most 5 bytes".into()),
            )
            .with_step_up()),
            _ => Ok(()),
        }
    });
    toolset
        .edit()
        .authorize("write_note", short_notes)
        .commit()
        .unwrap();
    assert!(toolset.visible(None, "write_note"));
    let ok = toolset
        .call("write_note", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(ok, json!("noted: hi"));
    let long = toolset
        .call("write_note", json!({"text": "far too long"}))
        .await
        .unwrap_err();
    assert!(
        long.to_string().contains("a note of at most 5 bytes"),
        "{long}"
    );
}

#[tokio::test]
async fn visibility_follows_the_policies_of_published_names_and_their_tools() {
    let toolset = Toolset::new();
    let shout = toolgraft_it_shout();
    toolset
        .bind((shout.combo().with(Cache::default()),))
        .unwrap();
    toolset.bind((write_note(Arc::default()).combo(),)).unwrap();
    toolset
        .edit()
        .publish("shout", Publish::only([("shout", "shout_cache")]).unwrap())
        .authorize("shout", Scopes::all(["tools:read"]))
        .authorize("write_note", Scopes::all(["notes:write"]))
        .commit()
        .unwrap();
    assert_eq!(
        toolset.hidden_from(Some(&alice())),
        Vec::<toolgraft::Name>::new()
    );
    assert_eq!(toolset.hidden_from(Some(&bob())), ["write_note"]);
    assert_eq!(toolset.hidden_from(None), ["shout", "write_note"]);
    // A tool's policy decides every name of it: its branch too.
    let branch = as_caller(None, toolset.call("shout_cache", json!({"text": "hi"}))).await;
    assert!(matches!(branch, Err(ToolError::UnknownTool { .. })));
    let read = as_caller(
        Some(bob()),
        toolset.call_published("shout", json!({"text": "hi"})),
    );
    assert_eq!(read.await.unwrap(), json!("hi"));

    toolset.edit().open("write_note").commit().unwrap();
    assert_eq!(
        toolset.hidden_from(Some(&bob())),
        Vec::<toolgraft::Name>::new()
    );
    let typo = toolset
        .edit()
        .authorize("write_nte", Scopes::all(["x"]))
        .commit();
    assert!(
        matches!(typo, Err(BindError::UnknownTool { .. })),
        "{typo:?}"
    );
}

fn toolgraft_it_shout() -> impl BaseTool<Input = crate::common::Shout, Output = String> {
    crate::common::shout()
}

#[tokio::test]
async fn chain_calls_the_next_tool_as_its_caller() {
    let runs = Arc::new(AtomicUsize::new(0));
    let toolset = Toolset::new();
    toolset.bind((write_note(runs.clone()).combo(),)).unwrap();
    let find = Tool::builder()
        .name("find")
        .description("Find a note to write.")
        .read_only()
        .body(|note: Note| async move { Ok(json!({"text": note.text})) })
        .build()
        .unwrap();
    toolset
        .bind((find.combo().with(Chain::new(&toolset)),))
        .unwrap();
    toolset
        .edit()
        .authorize("write_note", Claim::is("tenant", "acme"))
        .commit()
        .unwrap();
    let through = |next: &str| {
        toolset.call_published(
            "find_chain",
            json!({"text": "hi", "next_tool": next, "select": ""}),
        )
    };
    let deputy = as_caller(Some(bob()), through("write_note"))
        .await
        .unwrap_err();
    let nowhere = as_caller(Some(bob()), through("write_nota"))
        .await
        .unwrap_err();
    assert_eq!(
        deputy.to_string().replace("write_note", "NAME"),
        nowhere.to_string().replace("write_nota", "NAME")
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "bob reached nothing through the chain"
    );
    let through_alice = as_caller(Some(alice()), through("write_note")).await;
    assert_eq!(through_alice.unwrap(), json!("noted: hi"));
}

#[tokio::test]
async fn the_identity_reaches_a_worker_thread() {
    let whoami = Tool::builder()
        .name("whoami")
        .description("Say who calls.")
        .read_only()
        .body(|_: crate::common::Ping| async move {
            let who = context::get::<Identity>().map(|who| who.subject().to_owned());
            Ok(who.unwrap_or_else(|| "nobody".to_owned()))
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((whoami.combo().with(Pool::new(1).unwrap()),))
        .unwrap();
    let seen = as_caller(Some(alice()), toolset.call("whoami_pool", json!({}))).await;
    assert_eq!(seen.unwrap(), json!("alice"));
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Configured::new(Authorize::default()))
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(Pool::new(1).unwrap())
        .unwrap();
    registry
}

#[tokio::test]
async fn a_manifest_refuses_a_cache_outside_an_authorization_check() {
    let toolset = Toolset::new();
    let shout = toolgraft_it_shout();
    let bases = BaseTools::new().with(&shout);
    let manifest = Manifest::from_json(
        r#"{"tools": {"shout": [["authorize", {"name": "cache", "config": {"public": true}}]]}}"#,
    )
    .unwrap();
    let refused = toolset
        .bind_manifest(&registry(), &bases, &manifest)
        .remove(0)
        .1
        .unwrap_err();
    assert_eq!(refused.rule(), Some(Rule::SharedAnswersInsideAuthorization));
    assert_eq!(
        refused.to_string(),
        "on `shout`, `cache` answers callers from what it kept but sits outside `authorize`, which decides who may call: it would answer callers `authorize` never saw; place `cache` before `authorize`"
    );
    assert!(toolset.names().is_empty());

    // The combo that binds: the cache inside the check, with the check's policy
    // written in the manifest.
    let manifest = Manifest::from_json(
        r#"{"tools": {"shout": {"combos": [[{"name": "cache", "config": {"public": true}},
                                            {"name": "authorize", "config": {"claims": {"tenant": "acme"}}}]],
                                "publish": "outermost",
                                "access": {"shout": {"scopes": ["tools:read"]}}}}}"#,
    )
    .unwrap();
    let bound = toolset.bind_manifest(&registry(), &bases, &manifest);
    assert!(bound[0].1.is_ok(), "{:?}", bound[0].1);
    let call = || toolset.call_published("shout_cache_authorize", json!({"text": "hi"}));
    assert_eq!(as_caller(Some(alice()), call()).await.unwrap(), json!("hi"));
    // bob reads tools but is of another tenant: the layer's check refuses him
    // before the public cache (which holds alice's answer) is reached.
    let bob_refused = as_caller(Some(bob()), call()).await.unwrap_err();
    assert!(
        matches!(bob_refused, ToolError::UnknownTool { .. }),
        "{bob_refused}"
    );
    // A manifest that no longer names the access opens the tool again.
    let plain =
        Manifest::from_json(r#"{"tools": {"shout": {"combos": [["cache", "authorize"]]}}}"#)
            .unwrap();
    let applied = toolset.apply_manifest(&registry(), &plain);
    assert!(applied[0].1.is_ok(), "{:?}", applied[0].1);
    // Open but for the layer's own check (any authenticated caller), which
    // decides what is listed as it decides the call.
    assert!(toolset.visible(Some(&bob()), "shout_cache_authorize"));
    assert!(!toolset.visible(None, "shout_cache_authorize"));
    assert_eq!(as_caller(Some(bob()), call()).await.unwrap(), json!("hi"));
}

#[tokio::test]
async fn an_authorize_inside_a_relocation_is_refused_as_a_caller_side_layer() {
    let toolset = Toolset::new();
    let shout = toolgraft_it_shout();
    let manifest = Manifest::from_json(r#"{"tools": {"shout": [["authorize", "pool"]]}}"#).unwrap();
    let refused = toolset
        .bind_manifest(&registry(), &BaseTools::new().with(&shout), &manifest)
        .remove(0)
        .1
        .unwrap_err();
    assert_eq!(
        refused.rule(),
        Some(Rule::CallerOutsideRelocation),
        "{refused}"
    );
}
