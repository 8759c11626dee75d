//! `approve`: a call goes on only after the caller's user says yes, through the
//! call's `Asker`; an approval sent back with the call is sealed, for that call
//! only, and good once; where nobody can be asked the call is refused.

use std::sync::{Arc, Mutex};

use futures_util::future;
use serde_json::{Map, Value, json};
use toolgraft::context::{
    self, Answer, Answered, Ask, Asker, InputRequired, Principal, Question, Reach,
};
use toolgraft::ext::Pool;
use toolgraft::ext::approve::{Approval, ApprovalError, Approve, ApproveConfig, SealKey, Which};
use toolgraft::kind::ExtensionKind;
use toolgraft::prelude::*;
use toolgraft::runtime::Refined;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::store::StoreFuture;
use toolgraft::tool::Annotations;
use toolgraft::toolset::BaseTools;
use toolgraft::{BindError, Registry, ToolError};

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Wipe {
    disk: String,
}

/// `wipe {disk}`: answers with the approval it ran under.
fn wipe(annotations: Annotations) -> impl toolgraft::tool::BaseTool<Input = Wipe, Output = String> {
    Tool::builder()
        .name("wipe")
        .description("Wipe a disk.")
        .annotations(annotations)
        .body(|wipe: Wipe| async move {
            let approval = context::get::<Approval>().map(|approval| approval.id);
            Ok(format!(
                "wiped {} under {:?}",
                wipe.disk,
                approval.map(|id| id.len())
            ))
        })
        .build()
        .unwrap()
}

fn key() -> SealKey {
    SealKey::new(*b"an operator's key of 32 bytes!!!").unwrap()
}

/// A caller that can be reached as `reach`, answers `answer` when asked now,
/// and brings `answered` with the call; it records the questions.
#[derive(Clone)]
struct Caller {
    reach: Reach,
    answer: Answer,
    answered: Option<Answered>,
    asked: Arc<Mutex<Vec<Question>>>,
    /// The arguments as the server in front saw them sent, when it says.
    sent: Option<Value>,
}

impl Caller {
    fn new(reach: Reach, answer: Answer) -> Self {
        Self {
            reach,
            answer,
            answered: None,
            asked: Arc::default(),
            sent: None,
        }
    }

    fn sending(mut self, arguments: Value) -> Self {
        self.sent = Some(arguments);
        self
    }

    fn bringing(mut self, answer: Answer, state: &str) -> Self {
        self.answered = Some(Answered {
            answer,
            state: Some(state.to_owned()),
        });
        self
    }
}

impl Ask for Caller {
    fn answered(&self, key: &str) -> Option<Answered> {
        assert_eq!(key, "approve");
        self.answered.clone()
    }

    fn reach(&self) -> Reach {
        self.reach
    }

    fn arguments(&self) -> Option<&Value> {
        self.sent.as_ref()
    }

    fn ask_now(&self, question: Question) -> StoreFuture<'static, Answer> {
        self.asked.lock().unwrap().push(question);
        Box::pin(future::ready(Ok(self.answer.clone())))
    }
}

fn yes() -> Answer {
    let mut fields = Map::new();
    fields.insert("approve".to_owned(), json!(true));
    Answer::Accept(fields)
}

fn approval_error(error: &ToolError) -> Option<&ApprovalError> {
    error.downcast_ref::<ApprovalError>()
}

async fn call_as(
    toolset: &Toolset,
    caller: Option<Caller>,
    principal: &str,
    disk: &str,
) -> Result<Value, ToolError> {
    let call = toolset.call("wipe_pool_approve", json!({"disk": disk}));
    let call = context::with(Principal::new(principal), call);
    match caller {
        Some(caller) => context::with(Asker::new(caller), call).await,
        None => call.await,
    }
}

fn bound() -> Toolset {
    let toolset = Toolset::new();
    toolset
        .bind((wipe(Annotations::default())
            .combo()
            .with(Pool::new(1).unwrap())
            .with(Approve::new(key())),))
        .unwrap();
    toolset
}

#[tokio::test]
async fn asked_now_a_yes_runs_the_call_and_a_no_refuses_it() {
    let toolset = bound();
    let caller = Caller::new(Reach::Now, yes());
    let described = toolset.info("wipe_pool_approve").unwrap().description;
    assert_eq!(
        described,
        "Wipe a disk. (asks the user to approve each call)"
    );
    let ran = call_as(&toolset, Some(caller.clone()), "alice", "sda")
        .await
        .unwrap();
    // The body, on a pool thread, sees the approval's id (128 bits, hex).
    assert_eq!(ran, json!("wiped sda under Some(32)"));
    let asked = caller.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].message.contains("Tool: wipe_pool_approve"),
        "{}",
        asked[0].message
    );
    assert!(
        asked[0].message.contains(r#"Arguments: {"disk":"sda"}"#),
        "{}",
        asked[0].message
    );
    assert_eq!(asked[0].schema["properties"]["approve"]["type"], "boolean");

    for answer in [Answer::Decline, Answer::Cancel, Answer::Accept(Map::new())] {
        let refused = call_as(
            &toolset,
            Some(Caller::new(Reach::Now, answer)),
            "alice",
            "sda",
        )
        .await
        .unwrap_err();
        assert_eq!(
            approval_error(&refused),
            Some(&ApprovalError::Declined),
            "{refused}"
        );
        assert!(refused.to_string().contains("did not approve"), "{refused}");
    }
}

#[tokio::test]
async fn a_caller_that_cannot_be_asked_is_refused() {
    let toolset = bound();
    for caller in [None, Some(Caller::new(Reach::Not, yes()))] {
        let refused = call_as(&toolset, caller, "alice", "sda").await.unwrap_err();
        assert_eq!(
            approval_error(&refused),
            Some(&ApprovalError::CannotAsk),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn asked_later_the_sealed_answer_runs_once_and_only_for_its_call() {
    let toolset = bound();
    let later = Caller::new(Reach::Later, Answer::Decline);
    let first = call_as(&toolset, Some(later.clone()), "alice", "sda")
        .await
        .unwrap_err();
    let needed = first
        .downcast_ref::<InputRequired>()
        .expect("the question, as the answer");
    assert_eq!(needed.requests.keys().collect::<Vec<_>>(), ["approve"]);
    let question = needed.question("approve").expect("a question for the user");
    assert!(question.message.contains("Tool: wipe_pool_approve"));
    let state = needed.state.clone().expect("a sealed state");
    assert!(
        later.asked.lock().unwrap().is_empty(),
        "not asked within the call"
    );

    // Another caller, other arguments, a changed seal: refused, and the seal
    // stays good for its own call.
    let bob = call_as(
        &toolset,
        Some(later.clone().bringing(yes(), &state)),
        "bob",
        "sda",
    )
    .await
    .unwrap_err();
    assert_eq!(
        approval_error(&bob),
        Some(&ApprovalError::Mismatched("another caller".into()))
    );
    let sdb = call_as(
        &toolset,
        Some(later.clone().bringing(yes(), &state)),
        "alice",
        "sdb",
    )
    .await
    .unwrap_err();
    assert_eq!(
        approval_error(&sdb),
        Some(&ApprovalError::Mismatched("other arguments".into()))
    );
    let mut tampered = state.clone();
    tampered.insert(8, 'x');
    let forged = call_as(
        &toolset,
        Some(later.clone().bringing(yes(), &tampered)),
        "alice",
        "sda",
    )
    .await
    .unwrap_err();
    assert!(
        matches!(approval_error(&forged), Some(ApprovalError::Tampered(_))),
        "{forged}"
    );

    let ran = call_as(
        &toolset,
        Some(later.clone().bringing(yes(), &state)),
        "alice",
        "sda",
    )
    .await
    .unwrap();
    assert_eq!(ran, json!("wiped sda under Some(32)"));
    let replayed = call_as(
        &toolset,
        Some(later.clone().bringing(yes(), &state)),
        "alice",
        "sda",
    )
    .await
    .unwrap_err();
    assert_eq!(
        approval_error(&replayed),
        Some(&ApprovalError::Replayed),
        "{replayed}"
    );

    // A no runs nothing and spends nothing (declined round trips cannot fill
    // the ledger); the question stays open until it expires.
    let again = call_as(&toolset, Some(later.clone()), "alice", "sda")
        .await
        .unwrap_err();
    let state = again
        .downcast_ref::<InputRequired>()
        .unwrap()
        .state
        .clone()
        .unwrap();
    for _ in 0..3 {
        let no = Some(later.clone().bringing(Answer::Decline, &state));
        let declined = call_as(&toolset, no, "alice", "sda").await.unwrap_err();
        assert_eq!(approval_error(&declined), Some(&ApprovalError::Declined));
    }
    let yes_now = Some(later.clone().bringing(yes(), &state));
    assert!(call_as(&toolset, yes_now, "alice", "sda").await.is_ok());
    let after = call_as(
        &toolset,
        Some(later.bringing(yes(), &state)),
        "alice",
        "sda",
    )
    .await
    .unwrap_err();
    assert_eq!(approval_error(&after), Some(&ApprovalError::Replayed));
}

#[tokio::test]
async fn a_seal_from_another_key_is_tampering_and_a_fleet_shares_its_key() {
    let one = bound();
    let later = Caller::new(Reach::Later, Answer::Decline);
    let first = call_as(&one, Some(later.clone()), "alice", "sda")
        .await
        .unwrap_err();
    let state = first
        .downcast_ref::<InputRequired>()
        .unwrap()
        .state
        .clone()
        .unwrap();
    // A replica with the same key takes the seal; one with another key does not.
    let replica = bound();
    let stranger = Toolset::new();
    stranger
        .bind((wipe(Annotations::default())
            .combo()
            .with(Pool::new(1).unwrap())
            .with(Approve::new(SealKey::new(vec![3; 32]).unwrap())),))
        .unwrap();
    let refused = call_as(
        &stranger,
        Some(later.clone().bringing(yes(), &state)),
        "alice",
        "sda",
    )
    .await
    .unwrap_err();
    assert!(
        matches!(approval_error(&refused), Some(ApprovalError::Tampered(_))),
        "{refused}"
    );
    assert!(
        call_as(
            &replica,
            Some(later.bringing(yes(), &state)),
            "alice",
            "sda"
        )
        .await
        .is_ok()
    );
}

#[tokio::test]
async fn destructive_only_asks_for_tools_not_known_to_be_safe() {
    let config = ApproveConfig {
        tools: Which::Destructive,
        ..ApproveConfig::default()
    };
    let approve = Approve::new(key()).configured(config).unwrap();
    let read_only = Annotations {
        read_only: Some(true),
        ..Annotations::default()
    };
    let not_destructive = Annotations {
        destructive: Some(false),
        ..Annotations::default()
    };
    for (annotations, asks) in [
        (read_only, false),
        (not_destructive, false),
        (Annotations::default(), true),
    ] {
        let toolset = Toolset::new();
        toolset
            .bind((wipe(annotations.clone())
                .combo()
                .with(Pool::new(1).unwrap())
                .with(approve.clone()),))
            .unwrap();
        let outcome = call_as(&toolset, None, "alice", "sda").await;
        assert_eq!(outcome.is_err(), asks, "{annotations:?}: {outcome:?}");
        let described = toolset.info("wipe_pool_approve").unwrap().description;
        assert_eq!(
            described, "Wipe a disk.",
            "only `all` says so in the description"
        );
    }
}

#[test]
fn from_a_manifest_approve_binds_outside_a_backend_only() {
    let mut registry = Registry::new();
    registry
        .register(Refined::new(Approve::new(key()), Approve::configured))
        .unwrap();
    registry.register(Pool::new(1).unwrap()).unwrap();
    let manifest = Manifest::from_value(&json!({"tools": {"wipe": [
        ["pool", {"name": "approve", "config": {"tools": "destructive", "expiry_secs": 60}}]
    ]}}))
    .unwrap();
    let toolset = Toolset::new();
    let tools = BaseTools::new().with(&wipe(Annotations::default()));
    let outcome = toolset.bind_manifest(&registry, &tools, &manifest);
    assert!(outcome[0].1.is_ok(), "{outcome:?}");
    let link = &toolset.info("wipe_pool_approve").unwrap().chain[1];
    assert_eq!(
        (link.kind, link.placement.to_string().as_str()),
        (ExtensionKind::Wrapper, "beside the caller")
    );

    let inside = Manifest::from_value(&json!({"tools": {"wipe": [["approve", "pool"]]}})).unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry, &tools, &inside);
    let error = outcome[0].1.as_ref().unwrap_err();
    assert!(
        matches!(error, BindError::CallerLocalInsideRelocation { .. }),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "on `wipe`, `approve` needs the caller's session but sits inside `pool`, which would run it on a worker with no caller to ask or report to; place `approve` after `pool`"
    );
    assert_eq!(error.rule().unwrap().as_str(), "caller-outside-relocation");
    assert!(toolset.names().is_empty());

    let zero = Manifest::from_value(
        &json!({"tools": {"wipe": [[{"name": "approve", "config": {"expiry_secs": 0}}]]}}),
    )
    .unwrap();
    let outcome = Toolset::new().bind_manifest(&registry, &tools, &zero);
    assert!(
        matches!(outcome[0].1, Err(BindError::InvalidConfig { ref field, .. }) if field == "expiry_secs")
    );
}

#[tokio::test]
async fn the_seal_covers_the_arguments_as_sent_not_as_decoded() {
    // `force` is read and never written back: an approval of the decoded input
    // alone would cover `force: true` too.
    #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
    struct Careful {
        disk: String,
        #[serde(default, skip_serializing)]
        force: bool,
    }
    let careful = Tool::builder()
        .name("careful")
        .description("Wipe, maybe by force.")
        .body(
            |wipe: Careful| async move { Ok(format!("wiped {} force={}", wipe.disk, wipe.force)) },
        )
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((careful.combo().with(Approve::new(key())),))
        .unwrap();
    let call = |args: Value, caller: Caller| {
        let call = toolset.call("careful_approve", args);
        context::with(Asker::new(caller), call)
    };
    let gentle = json!({"disk": "sda", "force": false});
    let later = Caller::new(Reach::Later, Answer::Decline);
    let asked = call(gentle.clone(), later.clone().sending(gentle.clone()))
        .await
        .unwrap_err();
    let state = asked
        .downcast_ref::<InputRequired>()
        .unwrap()
        .state
        .clone()
        .unwrap();
    let forced = json!({"disk": "sda", "force": true});
    let refused = call(
        forced.clone(),
        later.clone().sending(forced).bringing(yes(), &state),
    )
    .await
    .unwrap_err();
    assert_eq!(
        approval_error(&refused),
        Some(&ApprovalError::Mismatched("other arguments".into()))
    );
    let ran = call(
        gentle.clone(),
        later.sending(gentle).bringing(yes(), &state),
    )
    .await
    .unwrap();
    assert_eq!(ran, json!("wiped sda force=false"));
}

#[tokio::test]
async fn the_question_shows_the_arguments_whole_and_no_line_can_be_faked() {
    let toolset = bound();
    let caller = Caller::new(Reach::Now, Answer::Decline);
    let disk = "sda\u{2028}Tool: list_files\u{2028}Arguments: {}\u{202e}";
    call_as(&toolset, Some(caller.clone()), "alice", disk)
        .await
        .unwrap_err();
    let message = caller.asked.lock().unwrap()[0].message.clone();
    assert!(
        !message.contains('\u{2028}') && !message.contains('\u{202e}'),
        "{message:?}"
    );
    assert_eq!(
        message
            .lines()
            .filter(|line| line.starts_with("Tool:"))
            .count(),
        1,
        "{message}"
    );
    assert!(message.contains(r"\u{2028}Tool: list_files"), "{message}");
    // Too long to show whole: refused, never shortened.
    let long = "x".repeat(toolgraft::ext::approve::MAX_SHOWN);
    let refused = call_as(
        &toolset,
        Some(Caller::new(Reach::Now, yes())),
        "alice",
        &long,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            approval_error(&refused),
            Some(ApprovalError::TooLongToShow { .. })
        ),
        "{refused}"
    );
}

/// Issue 36, item D: `approve` says in the description that it asks, on the
/// description's last line (a running description that ends in a line break
/// gets no line of its own), and an operator may keep the description as it
/// is, typed and from a manifest.
#[test]
fn approve_notes_that_it_asks_on_the_descriptions_line_unless_told_not_to() {
    let spaced = || {
        Tool::builder()
            .name("wipe")
            .description("Wipe a disk.\nFor good.\n")
            .body(|wipe: Wipe| async move { Ok(wipe.disk) })
            .build()
            .unwrap()
    };
    let toolset = Toolset::new();
    toolset
        .bind((spaced().combo().with(Approve::new(key())),))
        .unwrap();
    let described = toolset.info("wipe_approve").unwrap().description;
    assert_eq!(
        described,
        "Wipe a disk.\nFor good. (asks the user to approve each call)"
    );

    let kept = Toolset::new();
    kept.bind((spaced()
        .combo()
        .with(Approve::new(key()).with_description_unchanged()),))
        .unwrap();
    assert_eq!(
        kept.info("wipe_approve").unwrap().description,
        "Wipe a disk.\nFor good.\n"
    );

    let mut registry = Registry::new();
    registry
        .register(Refined::new(Approve::new(key()), Approve::configured))
        .unwrap();
    let manifest = Manifest::from_value(&json!({"tools": {"wipe": [
        [{"name": "approve", "config": {"description": "unchanged"}}]
    ]}}))
    .unwrap();
    let from_manifest = Toolset::new();
    let base = wipe(Annotations::default());
    let outcome = from_manifest.bind_manifest(&registry, &BaseTools::new().with(&base), &manifest);
    assert!(outcome[0].1.is_ok(), "{outcome:?}");
    assert_eq!(
        from_manifest.info("wipe_approve").unwrap().description,
        "Wipe a disk."
    );
}
