//! Rules `branch-by-rename`, `order`, `one-branch-per-prefix`,
//! `description-carry-forward`, `all-or-nothing`, `branch-bookkeeping` on the typed path (scenarios 4 to 8, 24).

use crate::common;

use common::{Loud, Shout, describing, marker, ping, shout};
use serde_json::json;
use toolgraft::ext::Trace;
use toolgraft::kind::ExtensionKind;
use toolgraft::prelude::*;
use toolgraft::{BindError, Name};

#[tokio::test]
async fn a_wrapper_mints_a_new_name_beside_the_tool() {
    // A wrapper binds `shout_loud` beside `shout`, which stays as it was.
    let shout = shout();
    let toolset = Toolset::new();
    toolset.bind((shout.combo().with(Loud),)).unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_loud"]);
    assert_eq!(
        toolset
            .call("shout_loud", json!({"text": "hi"}))
            .await
            .unwrap(),
        json!("HI")
    );
    assert_eq!(
        toolset.call("shout", json!({"text": "hi"})).await.unwrap(),
        json!("hi")
    );
}

#[tokio::test]
async fn one_branch_per_prefix_and_identical_prefixes_bind_once() {
    // `[["a"], ["a", "b"]]`: the shared prefix `shout_a` binds once.
    let shout = shout();
    let toolset = Toolset::new();
    let (a, a_b) = toolset
        .bind((
            shout.combo().with(marker("a")),
            shout.combo().with(marker("a")).with(marker("b")),
        ))
        .unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_a", "shout_a_b"]);
    // Order: `b` outside `a`, so `a` appends first.
    let out = toolset
        .call("shout_a_b", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(out, json!("hi|a|b"));
    // The typed handles run the same stacks.
    assert_eq!(
        (a.name().as_str(), a_b.name().as_str()),
        ("shout_a", "shout_a_b")
    );
    assert_eq!(a_b.call(Shout::new("hi")).await.unwrap(), "hi|a|b");
    assert_eq!(a.call(Shout::new("hi")).await.unwrap(), "hi|a");
}

#[tokio::test]
async fn separate_combos_are_independent() {
    // `[["a"], ["b"]]` binds no `shout_a_b`.
    let shout = shout();
    let toolset = Toolset::new();
    toolset
        .bind((
            shout.combo().with(marker("a")),
            shout.combo().with(marker("b")),
        ))
        .unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_a", "shout_b"]);
    assert!(!toolset.contains("shout_a_b"));
    assert_eq!(
        toolset.call("shout_b", json!({"text": "x"})).await.unwrap(),
        json!("x|b")
    );
}

#[test]
fn two_stacks_minting_one_name_are_refused_and_bind_nothing() {
    // An extension literally named `a_b`, and the stack `[a, b]`: both mint `shout_a_b`.
    let shout = shout();
    let toolset = Toolset::new();
    let err = toolset
        .bind((
            shout.combo().with(marker("a_b")),
            shout.combo().with(marker("a")).with(marker("b")),
        ))
        .expect_err("the clash is refused");
    match &err {
        BindError::NameClash {
            tool,
            name,
            first,
            second,
        } => {
            assert_eq!((tool.as_str(), name.as_str()), ("shout", "shout_a_b"));
            assert_eq!((first.as_str(), second.as_str()), ("a_b", "a, b"));
        }
        other => panic!("expected a name clash, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("two different stacks of `shout` mint `shout_a_b`")
    );
    // Rule `all-or-nothing`: nothing of the tool is bound, not even the base or `shout_a`.
    assert!(toolset.names().is_empty());
}

#[test]
fn the_same_extension_name_with_another_config_is_another_stack() {
    use toolgraft::ext::Batch;
    let shout = shout();
    let toolset = Toolset::new();
    let err = toolset
        .bind((
            shout.combo().with(Batch::max_items(10)),
            shout.combo().with(Batch::max_items(20)).with(Trace),
        ))
        .err()
        .unwrap();
    assert!(matches!(err, BindError::NameClash { ref name, .. } if name == "shout_batch"));
    assert!(toolset.names().is_empty());
}

#[test]
fn every_bound_name_knows_its_base_and_whether_it_is_a_branch() {
    // Rule `branch-bookkeeping`.
    let (shout, ping) = (shout(), ping());
    let toolset = Toolset::new();
    toolset
        .bind((shout.combo().with(Trace).with(Loud),))
        .unwrap();
    toolset.bind((ping.combo().with(Trace),)).unwrap();
    for (name, base, branch) in [
        ("shout", "shout", false),
        ("shout_trace", "shout", true),
        ("shout_trace_loud", "shout", true),
        ("ping", "ping", false),
        ("ping_trace", "ping", true),
    ] {
        assert_eq!(toolset.base_of(name).unwrap(), base, "{name}");
        assert_eq!(toolset.is_branch(name), Some(branch), "{name}");
    }
    assert_eq!(toolset.base_of("nope"), None);
    let info = toolset.info("shout_trace_loud").unwrap();
    let chain: Vec<_> = info
        .chain
        .iter()
        .map(|l| (l.extension.as_str(), l.kind))
        .collect();
    assert_eq!(
        chain,
        [
            ("trace", ExtensionKind::Wrapper),
            ("loud", ExtensionKind::Wrapper)
        ]
    );
}

#[test]
fn descriptions_carry_forward_and_each_element_may_replace_them() {
    // Each element may replace the description, and the next ones carry it forward.
    let shout = shout();
    let toolset = Toolset::new();
    toolset
        .bind((shout
            .combo()
            .with(describing("first"))
            .with(describing("second"))
            .with(Trace),))
        .unwrap();
    let description = |name: &str| toolset.info(name).unwrap().description;
    assert_eq!(description("shout"), "Return the text.");
    assert_eq!(description("shout_first"), "Return the text. | first");
    assert_eq!(
        description("shout_first_second"),
        "Return the text. | first | second"
    );
    // `trace` sets no description: it keeps the running one.
    assert_eq!(
        description("shout_first_second_trace"),
        "Return the text. | first | second"
    );
}

#[test]
fn a_name_bound_by_another_tool_is_refused_whole() {
    let shout = shout();
    // A base tool whose name is a branch name of `shout`.
    let squatter = Tool::builder()
        .name("shout_trace")
        .description("Squats a branch name.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((squatter.combo(),)).unwrap();
    let err = toolset.bind((shout.combo().with(Trace),)).err().unwrap();
    assert_eq!(
        err,
        BindError::NameTaken {
            tool: Name::new("shout").unwrap(),
            name: Name::new("shout_trace").unwrap(),
            owner: Name::new("shout_trace").unwrap(),
        }
    );
    assert_eq!(toolset.names(), ["shout_trace"]);
}

#[test]
fn a_combo_binds_the_tool_it_was_started_from() {
    // There is no base to pass beside the combos, so none to mismatch.
    let ping = ping();
    let toolset = Toolset::new();
    toolset.bind((ping.combo().with(Trace),)).unwrap();
    assert_eq!(toolset.names(), ["ping", "ping_trace"]);
}

#[test]
fn names_are_validated() {
    let built = Tool::builder()
        .name("get weather")
        .description("Spaces are not allowed.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text) })
        .build();
    assert_eq!(built.err().unwrap().name, "get weather");

    let shout = shout();
    let toolset = Toolset::new();
    let err = toolset
        .bind((shout.combo().with(marker("no/slash")),))
        .err()
        .unwrap();
    assert!(matches!(err, BindError::InvalidName(ref invalid) if invalid.name == "no/slash"));
    assert!(toolset.names().is_empty());
    for good in ["a", "get_weather", "v1.search-web", "X9"] {
        assert!(Name::new(good).is_ok(), "{good}");
    }
    for bad in ["", "é", "a b", "a/b", &"x".repeat(129)] {
        assert!(Name::new(bad).is_err(), "{bad}");
    }
}

#[test]
fn one_name_with_another_description_is_another_stack() {
    // `describing("a")` and `marker("a")` mint `shout_a` with different descriptions.
    let shout = shout();
    let toolset = Toolset::new();
    let err = toolset
        .bind((
            shout.combo().with(describing("a")),
            shout.combo().with(marker("a")).with(marker("b")),
        ))
        .err()
        .unwrap();
    assert!(
        matches!(err, BindError::NameClash { ref name, ref second, .. }
        if name == "shout_a" && second == "a, with another description"),
        "{err:?}"
    );
    assert!(toolset.names().is_empty());
}

#[test]
fn combos_and_branches_print_their_names_and_elements() {
    let shout = shout();
    let combo = shout.combo().with(Trace).with(Loud);
    assert_eq!(
        format!("{combo:?}"),
        "Combo(shout_trace_loud [trace > loud])"
    );
    assert_eq!(format!("{:?}", shout.combo()), "Combo(shout [])");
    let toolset = Toolset::new();
    let (loud,) = toolset.bind((combo,)).unwrap();
    assert_eq!(format!("{loud:?}"), "Branch(\"shout_trace_loud\")");
    assert_eq!(format!("{shout:?}"), "Tool(\"shout\")");
}

#[test]
fn every_refusal_of_a_rule_names_its_rulebook_section() {
    let shout = shout();
    let toolset = Toolset::new();
    toolset.bind((shout.combo(),)).unwrap();
    let err = toolset.bind((shout.combo(),)).unwrap_err();
    assert_eq!(
        err.rule(),
        None,
        "binding twice is bookkeeping, not a rule: {err}"
    );
    let clash = toolset
        .edit()
        .attach(
            &toolgraft::Registry::new(),
            "shout",
            &[toolgraft::runtime::manifest::ElementSpec::named("nope")],
        )
        .commit()
        .unwrap_err();
    assert_eq!(
        clash.rule(),
        Some(toolgraft::rulebook::Rule::UnknownExtension),
        "{clash}"
    );
}

#[tokio::test]
async fn combos_bind_from_a_tuple_taking_the_base_from_them() {
    let shout = shout();
    let toolset = Toolset::new();
    let (traced, loud) = toolset
        .bind((shout.combo().with(Trace), shout.combo().with(Loud)))
        .unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_loud", "shout_trace"]);
    let input = || Shout { text: "hi".into() };
    assert_eq!(traced.call(input()).await.unwrap(), "hi");
    assert_eq!(loud.call(input()).await.unwrap(), "HI");

    // A one-combo tuple.
    let other = Toolset::new();
    let (loud,) = other.bind((shout.combo().with(Loud),)).unwrap();
    assert_eq!(loud.call(input()).await.unwrap(), "HI");
}

#[test]
fn a_tuple_with_another_tools_combo_binds_both_tools() {
    let shout = shout();
    let ping = ping();
    let toolset = Toolset::new();
    toolset
        .bind((shout.combo().with(Trace), ping.combo().with(Trace)))
        .unwrap();
    assert_eq!(
        toolset.names(),
        ["ping", "ping_trace", "shout", "shout_trace"]
    );
    toolset.bind(()).unwrap();
    assert_eq!(toolset.names().len(), 4);
}
