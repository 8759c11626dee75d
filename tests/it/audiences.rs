//! Per-audience publication (rule `published-names`): a caller is shown, and
//! calls by name, what each tool publishes to its audience, the first whose
//! policy allows it; each audience's publication is checked as everyone's is;
//! a name not published to a caller answers it as one that does not exist, in
//! a call, a chain's step and a listing alike; manifests say the same.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgraft::access::{Claim, Scopes, policy_fn};
use toolgraft::context::{self, CallName, Identity};
use toolgraft::ext::{Cache, Chain, RateLimit};
use toolgraft::prelude::*;
use toolgraft::rulebook::Rule;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::{Manifest, ManifestError};
use toolgraft::toolset::{BaseTools, Publish};
use toolgraft::{BindError, Registry, ToolError, Toolset};

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Query {
    q: String,
}

/// `search`, answering with the name it was called by and counting the runs of
/// its body.
fn search(runs: Arc<AtomicUsize>) -> impl BaseTool<Input = Query, Output = String> {
    Tool::builder()
        .name("search")
        .description("Search.")
        .read_only()
        .body(move |query: Query| {
            runs.fetch_add(1, Ordering::SeqCst);
            let called = context::get::<CallName>().map(|name| name.0.to_string());
            async move { Ok(format!("{} via {}", query.q, called.unwrap_or_default())) }
        })
        .build()
        .unwrap()
}

fn pro() -> Identity {
    Identity::new("ann").with_claim("plan", "pro")
}

fn free() -> Identity {
    Identity::new("bob").with_claim("plan", "free")
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

/// `search` with `[cache, rate_limit]` (one call a minute): everyone gets the
/// rate-limited branch in its place, the `pro` plan the cache alone.
fn plans() -> (Toolset, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let toolset = Toolset::new();
    toolset
        .bind((search(runs.clone())
            .combo()
            .with(Cache::default())
            .with(RateLimit::per_minute(1)),))
        .unwrap();
    toolset
        .edit()
        .publish(
            "search",
            Publish::only([("search", "search_cache_rate_limit")]).unwrap(),
        )
        .audience("pro", Claim::is("plan", "pro"))
        .publish_to(
            "pro",
            "search",
            Publish::only([("search", "search_cache")]).unwrap(),
        )
        .commit()
        .unwrap();
    (toolset, runs)
}

#[tokio::test]
async fn each_audience_calls_its_own_branch_by_the_same_name() {
    let (toolset, runs) = plans();
    assert_eq!(toolset.audience_of(Some(&pro())).unwrap(), "pro");
    assert_eq!(toolset.audience_of(Some(&free())), None);
    assert_eq!(
        toolset.resolve_for(Some(&pro()), "search").unwrap().name,
        "search_cache"
    );
    assert_eq!(
        toolset.resolve_for(Some(&free()), "search").unwrap().name,
        "search_cache_rate_limit"
    );
    let names = |who: Option<&Identity>| -> Vec<(String, String)> {
        toolset
            .published_for(who)
            .into_iter()
            .map(|published| (published.name.to_string(), published.info.name.to_string()))
            .collect()
    };
    assert_eq!(
        names(Some(&pro())),
        [("search".to_owned(), "search_cache".to_owned())]
    );
    assert_eq!(
        names(None),
        [("search".to_owned(), "search_cache_rate_limit".to_owned())]
    );
    assert!(toolset.is_guarded(), "the caller decides what it is shown");

    let query = || json!({"q": "tea"});
    let answer = as_caller(Some(pro()), toolset.call_published("search", query())).await;
    assert_eq!(answer.unwrap(), json!("tea via search"));
    let answer = as_caller(Some(free()), toolset.call_published("search", query())).await;
    assert_eq!(answer.unwrap(), json!("tea via search"));
    // The rate-limited branch calls through the same cache (one combo): the
    // second answer is the first's.
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // The free plan's limit is spent; the pro plan has none.
    let limited = as_caller(Some(free()), toolset.call_published("search", query())).await;
    assert!(
        matches!(limited, Err(ToolError::Overloaded { ref extension, .. }) if extension == "rate_limit"),
        "{limited:?}"
    );
    for q in ["tip", "top"] {
        let unlimited = as_caller(
            Some(pro()),
            toolset.call_published("search", json!({"q": q})),
        );
        assert_eq!(unlimited.await.unwrap(), json!(format!("{q} via search")));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_name_not_published_to_a_caller_answers_as_an_unknown_one() {
    let (toolset, runs) = plans();
    for (who, name) in [
        (Some(pro()), "search_cache_rate_limit"),
        (Some(free()), "search_cache"),
        (None, "search_cache"),
        (Some(pro()), "ghost"),
    ] {
        assert!(!toolset.visible(who.as_ref(), name), "{name}");
        let refused = as_caller(
            who.clone(),
            toolset.call_published(name, json!({"q": "tea"})),
        )
        .await
        .unwrap_err();
        let unknown = toolset
            .call_published("ghost", json!({"q": "tea"}))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, ToolError::UnknownTool { .. }),
            "{refused}"
        );
        assert_eq!(
            refused.to_string().replace(name, "ghost"),
            unknown.to_string()
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // In-process calls by bound name are the author's, as without audiences.
    assert!(
        toolset
            .call("search_cache", json!({"q": "x"}))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_chain_reaches_only_what_its_caller_is_published() {
    let (toolset, _) = plans();
    let start = Tool::builder()
        .name("start")
        .description("Start a search.")
        .read_only()
        .body(|query: Query| async move { Ok(json!({"q": query.q})) })
        .build()
        .unwrap();
    toolset
        .bind((start.combo().with(Chain::new(&toolset)),))
        .unwrap();
    let step = |next: &str| json!({"q": "tea", "next_tool": next, "select": ""});
    let through = as_caller(
        Some(pro()),
        toolset.call_published("start_chain", step("search")),
    )
    .await;
    assert_eq!(through.unwrap(), json!("tea via search"));
    let refused = as_caller(
        Some(free()),
        toolset.call_published("start_chain", step("search_cache")),
    )
    .await
    .unwrap_err();
    assert!(
        refused.to_string().contains("is not a published tool"),
        "{refused}"
    );
}

#[test]
fn each_audience_is_checked_by_the_publish_rules() {
    let toolset = Toolset::new();
    toolset
        .bind((search(Arc::default()).combo().with(Cache::default()),))
        .unwrap();
    let unknown = toolset
        .edit()
        .publish_to("pro", "search", Publish::InPlace)
        .commit()
        .unwrap_err();
    assert!(
        matches!(&unknown, BindError::UnknownAudience { audience, .. } if audience == "pro"),
        "{unknown}"
    );
    assert_eq!(unknown.rule(), Some(Rule::PublishedNames));

    let not_bound = toolset
        .edit()
        .audience("pro", Claim::is("plan", "pro"))
        .publish_to(
            "pro",
            "search",
            Publish::only([("find", "search_trace")]).unwrap(),
        )
        .commit()
        .unwrap_err();
    let BindError::InAudience { audience, error } = &not_bound else {
        panic!("{not_bound}");
    };
    assert_eq!(audience, "pro");
    assert_eq!(error.rule(), not_bound.rule());
    assert_eq!(not_bound.rule(), Some(Rule::PublishedNames));
    assert!(
        not_bound
            .to_string()
            .starts_with("publishing to the audience `pro`: "),
        "{not_bound}"
    );
    assert!(toolset.audiences().is_empty(), "nothing changed");

    let reads = policy_fn(|access| {
        if access.arguments.is_some() {
            Ok(())
        } else {
            Err(toolgraft::access::Denied::new(
                toolgraft::access::Missing::Condition("arguments".into()),
            ))
        }
    });
    let refused = toolset
        .edit()
        .audience("by_arguments", reads)
        .commit()
        .unwrap_err();
    assert!(
        matches!(refused, BindError::AudienceReadsArguments { .. }),
        "{refused}"
    );
}

#[test]
fn a_caller_is_in_the_first_audience_that_allows_it_and_a_removed_one_takes_its_publication() {
    let toolset = Toolset::new();
    toolset
        .bind((search(Arc::default()).combo().with(Cache::default()),))
        .unwrap();
    toolset
        .edit()
        .publish("search", Publish::InPlace)
        .audience("staff", Scopes::all(["staff"]))
        .audience("pro", Claim::is("plan", "pro"))
        .publish_to("staff", "search", Publish::All)
        .publish_to("pro", "search", Publish::Only(Vec::new()))
        .commit()
        .unwrap();
    let both = Identity::new("cy")
        .with_scopes(["staff"])
        .with_claim("plan", "pro");
    assert_eq!(toolset.audience_of(Some(&both)).unwrap(), "staff");
    assert_eq!(toolset.published_for(Some(&both)).len(), 2);
    assert!(toolset.published_for(Some(&pro())).is_empty());
    assert!(toolset.is_published("search_cache"), "to the staff");

    toolset.edit().remove_audience("staff").commit().unwrap();
    assert_eq!(toolset.audience_of(Some(&both)).unwrap(), "pro");
    // Defined again, the staff have no publication of their own left.
    toolset
        .edit()
        .audience("staff", Scopes::all(["staff"]))
        .commit()
        .unwrap();
    assert_eq!(toolset.audiences(), ["pro", "staff"]);
    let staff = Identity::new("dee").with_scopes(["staff"]);
    assert_eq!(
        toolset.resolve_for(Some(&staff), "search").unwrap().name,
        "search_cache",
        "everyone's: in place"
    );
    assert!(!toolset.is_published("search") || toolset.visible(Some(&staff), "search"));
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(Configured::new(RateLimit::per_second(1000)))
        .unwrap();
    registry
}

const PLANS: &str = r#"{
    "audiences": [{"name": "pro", "access": {"claims": {"plan": "pro"}}}],
    "tools": {"search": {"combos": [["cache", "rate_limit"]],
                         "publish": {"search": "search_cache_rate_limit"},
                         "publish_to": {"pro": {"search": "search_cache"}}}}
}"#;

#[tokio::test]
async fn a_manifest_publishes_per_audience() {
    let toolset = Toolset::new();
    let search = search(Arc::default());
    let bases = BaseTools::new().with(&search);
    let manifest = Manifest::from_json(PLANS).unwrap();
    let outcome = toolset.bind_manifest(&registry(), &bases, &manifest);
    assert_eq!(outcome[0].0, "audiences");
    assert!(
        outcome.iter().all(|(_, bound)| bound.is_ok()),
        "{outcome:?}"
    );
    assert_eq!(
        toolset.resolve_for(Some(&pro()), "search").unwrap().name,
        "search_cache"
    );
    assert_eq!(
        toolset.resolve_for(None, "search").unwrap().name,
        "search_cache_rate_limit"
    );

    // The same file without the tool's `publish_to`: the pro plan gets what
    // everyone does; without `audiences` they stay.
    let manifest = Manifest::from_json(
        r#"{"tools": {"search": {"combos": [["cache", "rate_limit"]], "publish": {"search": "search_cache_rate_limit"}, "publish_to": {}}}}"#,
    )
    .unwrap();
    let outcome = toolset.apply_manifest(&registry(), &manifest);
    assert!(
        outcome.iter().all(|(_, applied)| applied.is_ok()),
        "{outcome:?}"
    );
    assert_eq!(toolset.audiences(), ["pro"]);
    assert_eq!(
        toolset.resolve_for(Some(&pro()), "search").unwrap().name,
        "search_cache_rate_limit"
    );

    // A publication to an audience the manifest no longer defines is refused,
    // and the tool keeps what it had.
    let manifest = Manifest::from_json(
        r#"{"audiences": [], "tools": {"search": {"combos": [["cache", "rate_limit"]], "publish_to": {"pro": "all"}}}}"#,
    )
    .unwrap();
    let outcome = toolset.apply_manifest(&registry(), &manifest);
    assert!(outcome[0].1.is_ok());
    assert!(
        matches!(&outcome[1].1, Err(BindError::UnknownAudience { tool, .. }) if tool == "search"),
        "{outcome:?}"
    );
    assert!(toolset.audiences().is_empty());
    assert_eq!(
        toolset.resolve_for(Some(&pro()), "search").unwrap().name,
        "search_cache_rate_limit"
    );
}

#[test]
fn a_manifest_of_the_wrong_audience_shape_says_what_to_write() {
    for (manifest, says) in [
        (
            r#"{"audiences": {"pro": {}}, "tools": {}}"#,
            "`audiences` is {\"pro\"",
        ),
        (
            r#"{"audiences": ["pro"], "tools": {}}"#,
            "audience 1 is \"pro\"",
        ),
        (
            r#"{"audiences": [{"name": "pro", "access": {}, "plan": 1}], "tools": {}}"#,
            "audience 1 is {",
        ),
        (
            r#"{"audiences": [{"access": {}}], "tools": {}}"#,
            "audience 1 has no `name` string",
        ),
        (
            r#"{"audiences": [{"name": "pro"}], "tools": {}}"#,
            "audience `pro` has no `access`",
        ),
        (
            r#"{"audiences": [{"name": "pro", "access": {"scopez": []}}], "tools": {}}"#,
            "audience `pro` has an `access` that cannot be read",
        ),
        (
            r#"{"audiences": [{"name": "pro", "access": {}}, {"name": "pro", "access": {}}], "tools": {}}"#,
            "the audience `pro` is named twice",
        ),
        (
            r#"{"tools": {"search": {"combos": [], "publish_to": ["pro"]}}}"#,
            "has `publish_to` of",
        ),
        (
            r#"{"tools": {"search": {"combos": [], "publish_to": {"pro": "some"}}}}"#,
            "has a `publish` of \"some\"",
        ),
    ] {
        let error = Manifest::from_json(manifest).unwrap_err();
        assert!(
            matches!(
                error,
                ManifestError::TopLevel { .. } | ManifestError::Shape { .. }
            ),
            "{error}"
        );
        assert!(error.to_string().contains(says), "{manifest}: {error}");
        assert_eq!(error.rule(), Some(Rule::ManifestShape));
    }
}

/// A published alias is one tool's, whichever audience it is published to: a
/// policy on the alias (owned by the tool it was set on) would otherwise guard
/// one audience's `find` and leave another's, served by another tool, open,
/// and a manifest could not put a policy on the second at all
/// (`AccessOfAnother`).
#[tokio::test]
async fn an_alias_is_one_tools_across_audiences() {
    let lookup = Tool::builder()
        .name("lookup")
        .description("Look up.")
        .read_only()
        .body(|query: Query| async move { Ok(format!("looked up {}", query.q)) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((search(Arc::default()).combo(), lookup.combo()))
        .unwrap();
    let collide = toolset
        .edit()
        .publish("search", Publish::only([("find", "search")]).unwrap())
        .audience("pro", Claim::is("plan", "pro"))
        .publish_to("pro", "search", Publish::Only(Vec::new()))
        .publish_to(
            "pro",
            "lookup",
            Publish::only([("find", "lookup")]).unwrap(),
        )
        .authorize("find", Scopes::all(["admin"]))
        .commit();
    if collide.is_ok() {
        // What the collision would let through: pro's `find` is unguarded.
        let through = as_caller(
            Some(pro()),
            toolset.call_published("find", json!({"q": "tea"})),
        )
        .await;
        panic!(
            "`find` is two tools' and its policy guards one: a pro caller without `admin` got {through:?}"
        );
    }
    let refused = collide.unwrap_err();
    assert_eq!(refused.rule(), Some(Rule::PublishedNames), "{refused}");
    assert!(refused.to_string().contains("`find`"), "{refused}");
    assert!(toolset.audiences().is_empty(), "nothing changed");
}

/// `resolve` is everyone's publication, as it says, even where an audience
/// takes in unidentified callers (`resolve_for(None, ..)` is theirs).
#[test]
fn resolve_is_everyones_even_when_an_audience_takes_in_the_unidentified() {
    let toolset = Toolset::new();
    toolset
        .bind((search(Arc::default()).combo().with(Cache::default()),))
        .unwrap();
    toolset
        .edit()
        .publish("search", Publish::InPlace)
        .audience("all", toolgraft::access::Anyone)
        .publish_to(
            "all",
            "search",
            Publish::only([("search", "search")]).unwrap(),
        )
        .commit()
        .unwrap();
    assert_eq!(toolset.resolve("search").unwrap().name, "search_cache");
    assert_eq!(toolset.resolve_for(None, "search").unwrap().name, "search");
}

/// A closure over the identity alone decides an audience; one over the whole
/// question (`policy_fn`) may read arguments, and is refused.
#[test]
fn a_closure_over_the_identity_decides_an_audience() {
    use toolgraft::access::{Denied, Missing, identity_fn};
    let toolset = Toolset::new();
    toolset
        .bind((search(Arc::default()).combo().with(Cache::default()),))
        .unwrap();
    let staff = identity_fn(|who: Option<&Identity>| match who {
        Some(who) if who.subject().ends_with("@staff") => Ok(()),
        _ => Err(Denied::new(Missing::Condition("a staff account".into()))),
    });
    toolset
        .edit()
        .publish("search", Publish::InPlace)
        .audience("staff", staff)
        .publish_to("staff", "search", Publish::All)
        .commit()
        .unwrap();
    let ann = Identity::new("ann@staff");
    assert_eq!(toolset.audience_of(Some(&ann)).unwrap(), "staff");
    assert_eq!(toolset.published_for(Some(&ann)).len(), 2);
    assert_eq!(toolset.published_for(Some(&pro())).len(), 1);
}
