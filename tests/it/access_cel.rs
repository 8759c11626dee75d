//! CEL conditions of access (`toolgraft::access::Cel`, a manifest policy's
//! `when`): what they read, how they fail (closed), and the limits a hostile
//! manifest meets.

use serde_json::{Map, Value, json};
use toolgraft::access::{Access, Cel, CelError, MAX_CEL_DEPTH, MAX_CEL_LEN, Missing, Policy};
use toolgraft::context::{self, Identity};
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;
use toolgraft::{Registry, ToolError, Toolset};

use crate::common::shout;

fn alice() -> Identity {
    Identity::new("alice")
        .with_issuer("https://auth.example.com")
        .with_scopes(["notes:write", "tools:read"])
        .with_claim("tenant", "acme")
        .with_claim("roles", json!(["ops"]))
}

fn bob() -> Identity {
    Identity::new("bob")
        .with_scopes(["tools:read"])
        .with_claim("tenant", "globex")
}

fn args(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap()
}

/// Whether `expression` allows `who` to call `name` with `arguments`.
fn allows(expression: &str, who: &Identity, name: &str, arguments: Value) -> bool {
    let cel = Cel::new(expression).unwrap();
    cel.check(&Access::call(Some(who), name, &args(arguments)))
        .is_ok()
}

#[test]
fn a_claim_decides() {
    let tenant = r#"claims.tenant == "acme""#;
    assert!(allows(tenant, &alice(), "x", json!({})));
    assert!(!allows(tenant, &bob(), "x", json!({})));
    let role = r#""ops" in claims.roles"#;
    assert!(allows(role, &alice(), "x", json!({})));
    // bob has no `roles` claim: the evaluation fails, and refuses.
    assert!(!allows(role, &bob(), "x", json!({})));
    let guarded = r#"has(claims.roles) && "ops" in claims.roles"#;
    assert!(!allows(guarded, &bob(), "x", json!({})));
    let who = r#"subject == "alice" && issuer == "https://auth.example.com""#;
    assert!(allows(who, &alice(), "x", json!({})));
    assert!(!allows(who, &bob(), "x", json!({})));
}

#[test]
fn a_scope_decides() {
    let writers = r#""notes:write" in scopes"#;
    assert!(allows(writers, &alice(), "x", json!({})));
    assert!(!allows(writers, &bob(), "x", json!({})));
    let any_tools = r#"scopes.exists(s, s.startsWith("tools:"))"#;
    assert!(allows(any_tools, &bob(), "x", json!({})));
    assert!(!allows(any_tools, &Identity::new("eve"), "x", json!({})));
}

#[test]
fn the_name_called_decides() {
    let reads = r#"tool.startsWith("read_") || "notes:write" in scopes"#;
    assert!(allows(reads, &bob(), "read_note", json!({})));
    assert!(!allows(reads, &bob(), "write_note", json!({})));
    assert!(allows(reads, &alice(), "write_note", json!({})));
}

#[test]
fn the_arguments_decide_a_call_and_a_listing_is_left_to_the_calls() {
    let small = r#"claims.tenant == "acme" && arguments.limit <= 100"#;
    assert!(allows(small, &alice(), "search", json!({"limit": 10})));
    assert!(!allows(small, &alice(), "search", json!({"limit": 1000})));
    // A missing argument is an evaluation error: refused.
    assert!(!allows(small, &alice(), "search", json!({})));
    let cel = Cel::new(small).unwrap();
    assert!(cel.reads_arguments());
    assert!(
        cel.check(&Access::listing(Some(&alice()), "search"))
            .is_ok()
    );
    // What the identity alone refuses is hidden from the listing too.
    assert!(cel.check(&Access::listing(Some(&bob()), "search")).is_err());
    assert!(!Cel::new(r#""a" in scopes"#).unwrap().reads_arguments());
}

#[test]
fn a_call_without_an_identity_is_refused_before_the_expression() {
    let cel = Cel::new("true").unwrap();
    let refused = cel
        .check(&Access::call(None, "x", &Map::new()))
        .unwrap_err();
    assert_eq!(refused.missing, Missing::Caller);
}

#[test]
fn a_too_long_expression_is_refused() {
    let long = "true && ".repeat(MAX_CEL_LEN / 8) + "true";
    let refused = Cel::new(&long).unwrap_err();
    assert!(
        matches!(refused, CelError::TooLong { len, .. } if len == long.len()),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("longer than the 4096 allowed"));
    // Its message quotes the expression shortened.
    assert!(refused.to_string().len() < 400, "{refused}");
}

#[test]
fn a_too_deep_expression_is_an_error_not_a_crash() {
    // Far past every limit: refused for its length, before anything reads it.
    let huge = format!("{}true{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(Cel::new(&huge).is_err());
    // Within the length limit: refused for its depth, before the parser.
    for open in ["(", "[", "{1: "] {
        let close = match open {
            "(" => ")",
            "[" => "]",
            _ => "}",
        };
        let deep = format!("{}1{}", open.repeat(1000), close.repeat(1000));
        let deep: String = deep.chars().take(MAX_CEL_LEN).collect();
        let refused = Cel::new(&deep).unwrap_err();
        assert!(
            matches!(refused, CelError::TooDeep { .. }),
            "{open}: {refused:?}"
        );
    }
    // Unbalanced, and deep.
    assert!(matches!(
        Cel::new(&"(".repeat(MAX_CEL_LEN)),
        Err(CelError::TooDeep { .. })
    ));
    // Shallow in brackets, deep in operators: the parsed tree is bounded too.
    let chain = vec!["1"; 1500].join("+") + " == 1500";
    assert!(matches!(Cel::new(&chain), Err(CelError::TooDeep { .. })));
    let members = "claims".to_owned() + &".a".repeat(1500);
    assert!(matches!(Cel::new(&members), Err(CelError::TooDeep { .. })));
    let ternaries = "true ? 1 : ".repeat(300) + "2";
    assert!(Cel::new(&ternaries).is_err());
    // At the limit, it compiles.
    let ok = format!(
        "{}true{}",
        "(".repeat(MAX_CEL_DEPTH),
        ")".repeat(MAX_CEL_DEPTH)
    );
    assert!(Cel::new(&ok).is_ok());
    // Brackets in strings do not count.
    let quoted = format!("tool != \"{}\"", "(".repeat(500));
    assert!(Cel::new(&quoted).is_ok());
}

#[test]
fn not_cel_is_a_syntax_error() {
    let refused = Cel::new("claims.tenant ==").unwrap_err();
    assert!(matches!(refused, CelError::Syntax { .. }), "{refused:?}");
    assert!(
        refused
            .to_string()
            .starts_with("the CEL expression `claims.tenant ==` cannot be parsed"),
        "{refused}"
    );
}

#[test]
fn a_result_other_than_a_bool_is_refused() {
    for expression in ["claims.tenant", "1", "scopes", "claims", "null"] {
        let cel = Cel::new(expression).unwrap();
        let refused = cel
            .check(&Access::call(Some(&alice()), "x", &Map::new()))
            .unwrap_err();
        assert!(!refused.step_up);
        let words = refused.to_string();
        assert!(words.contains("not a bool"), "{expression}: {words}");
        assert!(!words.contains("acme"), "{words}");
    }
}

#[test]
fn an_evaluation_error_is_refused_without_quoting_values() {
    let secret = json!({"token": "hunter2", "n": 0});
    for expression in [
        "arguments.token > 3",
        "arguments.missing == 1",
        "10 / arguments.n == 1",
        "arguments.token.nope()",
        "claims.tenant + 1 == 2",
    ] {
        let cel = Cel::new(expression).unwrap();
        let refused = cel
            .check(&Access::call(Some(&alice()), "x", &args(secret.clone())))
            .unwrap_err();
        let words = refused.to_string();
        assert!(words.contains("evaluation failed"), "{expression}: {words}");
        for value in ["hunter2", "acme"] {
            assert!(!words.contains(value), "{expression}: {words}");
        }
    }
}

#[test]
fn a_policy_round_trips_its_expression() {
    let spec: toolgraft::access::PolicySpec =
        serde_json::from_value(json!({"scopes": ["a"], "when": "tool == 'x'"})).unwrap();
    assert_eq!(spec.when.as_ref().map(Cel::source), Some("tool == 'x'"));
    assert_eq!(
        serde_json::to_value(&spec).unwrap(),
        json!({"scopes": ["a"], "when": "tool == 'x'"})
    );
    let refused =
        serde_json::from_value::<toolgraft::access::PolicySpec>(json!({"when": "(("})).unwrap_err();
    assert!(
        refused.to_string().contains("cannot be parsed"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_manifest_when_binds_and_is_enforced_through_a_toolset_call() {
    let toolset = Toolset::new();
    let shout = shout();
    let manifest = Manifest::from_json(
        r#"{"tools": {"shout": {"combos": [],
                                "access": {"shout": {"scopes": ["tools:read"],
                                                     "when": "claims.tenant == 'acme' && size(arguments.text) <= 5"}}}}}"#,
    )
    .unwrap();
    let bound = toolset.bind_manifest(&Registry::new(), &BaseTools::new().with(&shout), &manifest);
    assert!(bound[0].1.is_ok(), "{:?}", bound[0].1);

    let call = |who: Identity, text: &str| {
        context::with(who, toolset.call("shout", json!({"text": text})))
    };
    assert_eq!(call(alice(), "hi").await.unwrap(), json!("hi"));
    let long = call(alice(), "too long").await.unwrap_err();
    assert!(matches!(long, ToolError::UnknownTool { .. }), "{long}");
    let other_tenant = call(bob(), "hi").await.unwrap_err();
    assert!(
        matches!(other_tenant, ToolError::UnknownTool { .. }),
        "{other_tenant}"
    );
    let anonymous = toolset
        .call("shout", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert!(
        matches!(anonymous, ToolError::UnknownTool { .. }),
        "{anonymous}"
    );
    // Listed to alice (her calls decide on their arguments), not to bob.
    assert!(toolset.visible(Some(&alice()), "shout"));
    assert!(!toolset.visible(Some(&bob()), "shout"));

    // A manifest whose `when` is not CEL is refused, naming the tool.
    let broken = Manifest::from_json(
        r#"{"tools": {"shout": {"combos": [], "access": {"shout": {"when": "claims.tenant =="}}}}}"#,
    )
    .unwrap_err();
    let words = broken.to_string();
    assert!(words.starts_with("tool `shout`"), "{words}");
    assert!(words.contains("cannot be parsed"), "{words}");
}

/// What the limits let through must also evaluate in bounded time: a
/// condition is checked on every call and, for every name it guards, on every
/// listing. Comprehensions nested over literal lists multiply (40 elements, six
/// deep: four billion steps in some 500 characters), so a hostile manifest
/// could otherwise hang every `tools/list` of a caller.
#[test]
fn a_condition_the_limits_let_through_evaluates_in_bounded_time() {
    let list = format!(
        "[{}]",
        (0..40).map(|n| n.to_string()).collect::<Vec<_>>().join(",")
    );
    let mut source = "true".to_owned();
    for var in ["a", "b", "c", "d", "e", "f"] {
        source = format!("{list}.all({var}, {source})");
    }
    assert!(source.len() <= MAX_CEL_LEN, "{}", source.len());
    let Ok(cel) = Cel::new(&source) else {
        return; // refused where it is written: fine
    };
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let who = alice();
        let _ = done.send(cel.check(&Access::listing(Some(&who), "search")).is_ok());
    });
    let outcome = finished.recv_timeout(std::time::Duration::from_secs(5));
    assert!(
        outcome.is_ok(),
        "a {}-character condition still runs after 5 s",
        source.len()
    );
}

/// The bracket count before the parser reads a raw string as CEL does (a
/// backslash there escapes nothing), and a triple-quoted one whole: brackets
/// past such a string are counted, so a deep expression never reaches the
/// parser, whose recursion could otherwise overflow even its own large stack
/// (an abort of the whole process, not an error).
#[test]
fn brackets_after_a_raw_or_triple_quoted_string_are_counted() {
    let deep = |n: usize| format!("{}true{}", "(".repeat(n), ")".repeat(n));
    for prefix in [
        r"r'\' == '' || ",
        r#"R"\" == "" || "#,
        r#""""a"b""" == "" || "#,
    ] {
        let source = format!("{prefix}{}", deep(MAX_CEL_DEPTH + 1));
        assert!(
            matches!(Cel::new(&source), Err(CelError::TooDeep { .. })),
            "{prefix}: {:?}",
            Cel::new(&source).map(|cel| cel.source().len())
        );
    }
    // The same strings with shallow brackets are fine.
    for prefix in [r"r'\' == '' || ", r#""""a"b""" == "" || "#] {
        assert!(
            Cel::new(&format!("{prefix}{}", deep(3))).is_ok(),
            "{prefix}"
        );
    }
}

/// A listing has no arguments, and a condition that reaches them lets the name
/// be listed: but only where the rest of the condition could still hold. A
/// condition that refuses the caller on its identity alone hides the name,
/// whichever side of `&&` reads the arguments (CEL's `&&` and `||` are
/// commutative over errors).
#[test]
fn a_condition_that_refuses_the_caller_hides_the_name_whatever_its_order() {
    for source in [
        r#"claims.tenant == "acme" && arguments.limit <= 100"#,
        r#"arguments.limit <= 100 && claims.tenant == "acme""#,
        r#"!(arguments.limit > 100 || claims.tenant != "acme")"#,
        r#"(arguments.limit <= 100 || "search:bulk" in scopes) && claims.tenant == "acme""#,
    ] {
        let cel = Cel::new(source).unwrap();
        assert!(
            cel.check(&Access::listing(Some(&alice()), "search"))
                .is_ok(),
            "{source}: alice"
        );
        assert!(
            cel.check(&Access::listing(Some(&bob()), "search")).is_err(),
            "{source}: bob of globex is shown the name"
        );
    }
}

/// What an expression may cost is bounded where it is written: no
/// comprehension inside another's body, and at most `MAX_CEL_COST` steps with
/// a literal list's comprehension counted per element (a comprehension over
/// another's result too); one over the caller's lists costs what it walks.
#[test]
fn a_costly_condition_is_refused_where_it_is_written() {
    use toolgraft::access::{CelError, MAX_CEL_COST};
    let list = |n: usize| format!("[{}]", vec!["1"; n].join(","));
    for (source, problem) in [
        (
            format!("{}.all(a, {}.all(b, true))", list(2), list(2)),
            "inside another's body",
        ),
        (
            "scopes.exists(s, claims.roles.exists(r, r == s))".to_owned(),
            "inside another's body",
        ),
        (
            format!("{}.all(a, {})", list(100), vec!["a == 1"; 60].join(" || ")),
            "more steps",
        ),
        (
            format!(
                "{}.map(a, a).all(b, {})",
                list(100),
                vec!["b == 1"; 60].join(" || ")
            ),
            "more steps",
        ),
        (
            format!(
                "({} + {}).all(b, {})",
                list(50),
                list(50),
                vec!["b == 1"; 60].join(" || ")
            ),
            "more steps",
        ),
    ] {
        let refused = Cel::new(&source).unwrap_err();
        assert!(
            matches!(refused, CelError::TooCostly { .. }),
            "{source}: {refused}"
        );
        assert!(refused.to_string().contains(problem), "{refused}");
        assert!(
            refused.to_string().contains(&MAX_CEL_COST.to_string()),
            "{refused}"
        );
    }
    for fine in [
        "scopes.exists(s, s.startsWith('notes:'))",
        "arguments.items.all(i, i.size() < 100) && 'admin' in scopes",
        "[1, 2, 3].map(a, a * 2).all(b, b < 10)",
    ] {
        assert!(Cel::new(fine).is_ok(), "{fine}");
    }
}
