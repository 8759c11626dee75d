//! Fleets: a change on one caller reaching every worker and caller, and
//! `approve` around `remote` (outside only, spent on every replica).

use crate::support::*;

on_every_tier!(a_change_on_one_caller_reaches_every_worker_and_caller,);

/// Two callers and three workers of one queue: a combo attached on one caller
/// reaches the other caller and every worker (a late one too), which rebind it by
/// name; calls of the new branch are answered from both callers.
async fn a_change_on_one_caller_reaches_every_worker_and_caller(env: Env) {
    let workers = [
        WorkerProcess::start_in_fleet(&env),
        WorkerProcess::start_in_fleet(&env),
    ];
    let remote = env.remote();
    let toolset = toolset(&remote);
    let registry = registry();
    let fleet = Fleet::join(&remote, &toolset, registry.clone())
        .await
        .unwrap();
    let branch = "whereami_trace_remote";
    let caller_b = WorkerProcess::spawn(&env, "fleet_caller_process", &[(CALLER_BRANCH, branch)]);
    // Before the change, no worker binds `whereami_trace`.
    assert!(!toolset.contains(branch));

    let before = fleet.generation();
    let remote_spec =
        ElementSpec::configured("remote", serde_json::to_value(remote.settings()).unwrap());
    toolset
        .edit()
        .attach(
            &registry,
            "whereami",
            &[ElementSpec::named("trace"), remote_spec],
        )
        .commit()
        .unwrap();
    let mut generations = fleet.generations();
    tokio::time::timeout(
        Duration::from_secs(10),
        generations.wait_for(|at| *at > before),
    )
    .await
    .expect("the change is broadcast")
    .unwrap();
    let generation = fleet.generation();
    eprintln!("caller A attached [trace, remote]: generation {before} -> {generation}");
    // At once, before any worker need have heard (on SQLite nothing announces:
    // workers look each beat): the job carries the generation, and the worker
    // that takes it catches up first instead of answering "no tool bound".
    let first = toolset
        .call(branch, json!({"city": "first"}))
        .await
        .unwrap_or_else(|error| panic!("the first call after the change: {error}"));
    eprintln!(
        "caller A's first call after the change answered by worker {}",
        report(first).pid
    );
    let late = WorkerProcess::start_in_fleet(&env);

    // Every member (2 callers, 3 workers) reports the generation.
    let deadline = Instant::now() + Duration::from_secs(20);
    let members = loop {
        let members: Vec<_> = fleet
            .status()
            .await
            .unwrap()
            .into_iter()
            .filter(|member| member.is_alive())
            .collect();
        if members.len() == 5 && members.iter().all(|member| member.generation >= generation) {
            break members;
        }
        assert!(
            Instant::now() < deadline,
            "the fleet did not converge: {members:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for member in &members {
        eprintln!(
            "  {:<40} {:?} at generation {}",
            member.process, member.role, member.generation
        );
        assert!(member.refused.is_empty(), "{member:?}");
        // One change, one generation: a member applying it must not echo it
        // back as a change of its own.
        assert_eq!(member.generation, generation, "{member:?}");
    }

    let pids: BTreeSet<u32> = workers
        .iter()
        .chain([&late])
        .map(WorkerProcess::pid)
        .collect();
    let mut served = BTreeSet::new();
    for at in 0..20 {
        let answer = toolset
            .call(branch, json!({"city": format!("a{at}")}))
            .await
            .unwrap();
        let answer = report(answer);
        assert!(pids.contains(&answer.pid), "{} is not a worker", answer.pid);
        served.insert(answer.pid);
    }
    eprintln!("caller A answered 20 calls of `{branch}`, by worker pids {served:?}");
    let line = caller_b.wait_for_line(&["answered 10 calls"]).await;
    eprintln!("{line}");
    let line = late.wait_for_line(&["fleet: applied generation"]).await;
    assert!(line.contains(&format!("generation={generation}")), "{line}");
    for worker in workers.iter().chain([&late]) {
        assert!(worker.jobs_started("whereami_trace") <= 30);
    }
}

/// The user's side of `approve` for the fleet test: asked later (an
/// input-required round trip), bringing `answer` with its state.
struct Later(Option<(bool, String)>);

impl context::Ask for Later {
    fn answered(&self, _: &str) -> Option<context::Answered> {
        let (yes, state) = self.0.clone()?;
        let mut fields = serde_json::Map::new();
        fields.insert("approve".to_owned(), json!(yes));
        Some(context::Answered {
            answer: context::Answer::Accept(fields),
            state: Some(state),
        })
    }

    fn reach(&self) -> context::Reach {
        context::Reach::Later
    }

    fn ask_now(
        &self,
        _: context::Question,
    ) -> toolgraft::store::StoreFuture<'static, context::Answer> {
        Box::pin(async { Err(toolgraft::store::StoreError::new("asked later only")) })
    }
}

/// Two replicas with one key and one Redis ledger: an approval sealed by one is
/// taken by the other once, and refused as replayed on either after that.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_spent_on_every_replica_of_a_fleet() {
    use toolgraft::ext::approve::{ApprovalError, Approve, SealKey};
    let env = Env::redis("approval_fleet").await;
    let key = SealKey::new(vec![5; 32]).unwrap();
    let replica = || {
        let approve = Approve::new(key.clone())
            .with_ledger(toolgraft_jobs::RedisLedger::new(&env.url).unwrap());
        let toolset = Toolset::new();
        toolset
            .bind((whereami_tool().combo().with(approve),))
            .unwrap();
        toolset
    };
    let (one, two) = (replica(), replica());
    async fn call(toolset: &Toolset, brought: Option<(bool, String)>) -> Result<Value, ToolError> {
        let call = toolset.call("whereami_approve", json!({"city": "Oslo"}));
        context::with(context::Asker::new(Later(brought)), call).await
    }
    let asked = call(&one, None).await.unwrap_err();
    let state = asked
        .downcast_ref::<context::InputRequired>()
        .unwrap()
        .state
        .clone()
        .unwrap();
    let ran = call(&two, Some((true, state.clone()))).await.unwrap();
    assert_eq!(report(ran).city, "Oslo");
    for replica in [&one, &two] {
        let replayed = call(replica, Some((true, state.clone())))
            .await
            .unwrap_err();
        assert_eq!(
            replayed.downcast_ref::<ApprovalError>(),
            Some(&ApprovalError::Replayed),
            "{replayed}"
        );
    }
    // A ledger that cannot be reached refuses: fail closed.
    let down = Approve::new(key)
        .with_ledger(toolgraft_jobs::RedisLedger::new("redis://127.0.0.1:1").unwrap());
    let toolset = Toolset::new();
    toolset.bind((whereami_tool().combo().with(down),)).unwrap();
    let state = call(&toolset, None)
        .await
        .unwrap_err()
        .downcast_ref::<context::InputRequired>()
        .unwrap()
        .state
        .clone()
        .unwrap();
    let refused = call(&toolset, Some((true, state))).await.unwrap_err();
    assert!(
        matches!(
            refused.downcast_ref::<ApprovalError>(),
            Some(ApprovalError::Ledger(_))
        ),
        "{refused}"
    );
}

/// From a manifest, `approve` binds outside `remote` and is refused inside it,
/// with the rule and the fix.
#[test]
fn a_manifest_puts_approve_outside_remote_only() {
    use toolgraft::ext::approve::{Approve, SealKey};
    use toolgraft::runtime::Refined;
    let mut registry = registry();
    registry
        .register(Refined::new(
            Approve::new(SealKey::new(vec![5; 32]).unwrap()),
            Approve::configured,
        ))
        .unwrap();
    let path = std::env::temp_dir().join(format!("{}.db", unique("approve_manifest")));
    let remote =
        json!({"name": "remote", "config": {"url": format!("sqlite://{}", path.display())}});
    let tools = BaseTools::new().with(&whereami_tool());
    let outside =
        Manifest::from_value(&json!({"tools": {"whereami": [[remote.clone(), "approve"]]}}))
            .unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry, &tools, &outside);
    assert!(outcome[0].1.is_ok(), "{outcome:?}");
    assert!(
        toolset
            .names()
            .iter()
            .any(|name| name.as_str() == "whereami_remote_approve")
    );

    let inside =
        Manifest::from_value(&json!({"tools": {"whereami": [["approve", remote]]}})).unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry, &tools, &inside);
    let error = outcome[0].1.as_ref().unwrap_err();
    eprintln!("{error}");
    assert!(
        matches!(error, BindError::CallerLocalInsideRelocation { .. }),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "on `whereami`, `approve` needs the caller's session but sits inside `remote`, which would run it on a worker with no caller to ask or report to; place `approve` after `remote`"
    );
    assert!(toolset.names().is_empty());
}
