//! Who calls, across a relocation: the caller's `Identity` reaches the body on
//! the worker as it was, and `authorize` sits outside `remote` only, deciding in
//! the caller's process before a job is sent.

use crate::support::*;

on_every_tier!(
    the_callers_identity_reaches_the_worker_as_it_was,
    authorize_outside_remote_decides_in_the_caller_for_the_worker,
);

/// Alice as a checked access token makes her: subject, issuer, scopes, and the
/// claims the operator kept (a string and a list).
fn alice() -> Identity {
    Identity::new("alice")
        .with_issuer("https://auth.example.com")
        .with_scopes([WEATHER_READ, "notes:write"])
        .with_claim("tenant", "acme")
        .with_claim("roles", json!(["ops", "admin"]))
}

/// The identity a body reported, read back.
fn seen(report: &Report) -> Option<Identity> {
    report
        .identity
        .clone()
        .map(|identity| serde_json::from_value(identity).unwrap())
}

async fn the_callers_identity_reaches_the_worker_as_it_was(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let call = toolset.call("whereami_remote", json!({"city": "Tromsø"}));
    let answer = report(context::with(alice(), call).await.unwrap());
    assert_eq!(answer.pid, worker.pid(), "the body ran in the worker");
    let seen = seen(&answer).expect("the body on the worker reads an identity");
    eprintln!("the body on the worker read {seen:?}");
    assert_eq!(seen, alice());
    assert_eq!(seen.issuer(), Some("https://auth.example.com"));
    assert_eq!(seen.scopes(), ["notes:write", WEATHER_READ]);
    assert_eq!(seen.claim("roles"), Some(&json!(["ops", "admin"])));

    // A call without one arrives without one: nothing is made up on the way.
    let anonymous = report(
        toolset
            .call("whereami_remote", json!({"city": "Bodø"}))
            .await
            .unwrap(),
    );
    assert_eq!(anonymous.identity, None);
}

async fn authorize_outside_remote_decides_in_the_caller_for_the_worker(env: Env) {
    let worker = WorkerProcess::start(&env);
    let toolset = toolset(&env.remote());
    let branch = "whereami_remote_authorize";

    // Allowed: the check lets Alice through, and her call runs on the worker,
    // which sees her as she was.
    let call = toolset.call(branch, json!({"city": "Lyon"}));
    let answer = report(context::with(alice(), call).await.unwrap());
    assert_eq!(answer.pid, worker.pid(), "the body ran in the worker");
    assert_eq!(seen(&answer), Some(alice()));
    assert_eq!(stored_jobs(&env).await, 1, "one job for the allowed call");

    // Refused: a caller without the scope, and a call with no identity at all,
    // are refused in the caller (as for a tool that does not exist), and
    // nothing reaches the queue.
    let eve = Identity::new("eve").with_scopes(["notes:write"]);
    let refusals = [
        context::with(eve, toolset.call(branch, json!({"city": "Nice"}))).await,
        toolset.call(branch, json!({"city": "Nice"})).await,
    ];
    for refusal in refusals {
        match refusal.unwrap_err() {
            ToolError::UnknownTool { name, .. } => assert_eq!(name.as_str(), branch),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    assert_eq!(
        stored_jobs(&env).await,
        1,
        "a refused caller has a job enqueued"
    );
    assert_eq!(
        worker.settled_jobs("whereami", 1).await,
        1,
        "{}",
        worker.log_text()
    );
}

/// From a manifest, `authorize` binds outside `remote` and is refused inside
/// it (where it would decide on the worker, once the job was sent), with an
/// error that names both layers, the rule and the fix.
#[test]
fn a_manifest_puts_authorize_outside_remote_only() {
    let registry = registry();
    let path = std::env::temp_dir().join(format!("{}.db", unique("authorize_manifest")));
    let remote =
        json!({"name": "remote", "config": {"url": format!("sqlite://{}", path.display())}});
    let authorize = json!({"name": "authorize", "config": {"scopes": [WEATHER_READ]}});
    let tools = BaseTools::new().with(&whereami_tool());

    let outside = Manifest::from_value(
        &json!({"tools": {"whereami": [[remote.clone(), authorize.clone()]]}}),
    )
    .unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry, &tools, &outside);
    assert!(outcome[0].1.is_ok(), "{outcome:?}");
    assert!(
        toolset
            .names()
            .iter()
            .any(|name| name.as_str() == "whereami_remote_authorize")
    );

    let inside =
        Manifest::from_value(&json!({"tools": {"whereami": [[authorize, remote]]}})).unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry, &tools, &inside);
    let error = outcome[0].1.as_ref().unwrap_err();
    eprintln!("{error}");
    match error {
        BindError::AuthorizationInsideRelocation {
            tool,
            authorizer,
            relocating,
        } => {
            assert_eq!(tool.as_str(), "whereami");
            assert_eq!(authorizer.as_str(), "authorize");
            assert_eq!(relocating.as_str(), "remote");
        }
        other => panic!("expected authorize refused inside remote, got {other:?}"),
    }
    assert_eq!(
        error.rule(),
        Some(toolgraft::rulebook::Rule::CallerOutsideRelocation)
    );
    assert_eq!(
        error.to_string(),
        "on `whereami`, `authorize` decides who may call but sits inside `remote`, which would run the check on a worker once the call is enqueued, so a caller it refuses would still have a job sent; place `authorize` after `remote`"
    );
    assert!(toolset.names().is_empty());
}
