//! Rule `depth`: names grow with each layer, so the name limit is the depth limit.
//! `shout` with `trace`s binds 20 layers under the default 128 bytes (5 + 20 × 6 =
//! 125) and refuses 21 (131), typed and from a manifest with the same words; shorter
//! names let it bind.

use toolgraft::Registry;
use toolgraft::ext::{Pool, Trace};
use toolgraft::limits::Limits;
use toolgraft::prelude::*;
use toolgraft::rulebook::Rule;
use toolgraft::runtime::manifest::{ElementSpec, Manifest};
use toolgraft::toolset::BaseTools;

use crate::common::shout;

/// `.with(Trace)` once per token.
macro_rules! traces {
    ($combo:expr; $($n:tt)*) => {{
        let combo = $combo;
        $(let combo = { let _ = $n; combo.with(Trace) };)*
        combo
    }};
}

fn manifest(layers: usize) -> Manifest {
    Manifest {
        tools: vec![(
            "shout".to_owned(),
            vec![vec![ElementSpec::named("trace"); layers]],
        )],
        ..Manifest::default()
    }
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register(Trace).unwrap();
    registry
}

#[tokio::main(flavor = "current_thread")]
#[test]
async fn twenty_layers_bind_typed_and_from_a_manifest() {
    let tool = shout();
    let combo = traces!(tool.combo(); 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20);
    assert_eq!(combo.name().len(), 125);
    let toolset = Toolset::new();
    let (branch,) = toolset.bind((combo,)).unwrap();
    assert_eq!(
        branch.call(crate::common::Shout::new("hi")).await.unwrap(),
        "hi"
    );
    assert_eq!(toolset.names().len(), 21);

    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry(), &BaseTools::new().with(&tool), &manifest(20));
    assert!(outcome[0].1.is_ok(), "{:?}", outcome[0].1);
    assert_eq!(toolset.names().len(), 21);
}

#[test]
fn twenty_one_layers_are_refused_with_the_same_words_on_both_paths() {
    let tool = shout();
    let combo = traces!(tool.combo(); 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21);
    let toolset = Toolset::new();
    let typed = toolset.bind((combo,)).unwrap_err();
    assert!(
        matches!(
            &typed,
            BindError::NameTooLong {
                len: 131,
                limit: 128,
                layers: 21,
                fits: 20,
                ..
            }
        ),
        "{typed:?}"
    );
    assert_eq!(typed.rule(), Some(Rule::Depth));
    let message = typed.to_string();
    for words in [
        "131 bytes long, over the limit of 128",
        "20 of this combo's 21 layers fit",
        "shorter tool or extension names",
        "Limits::with_max_name_len",
        "rule `depth` in `toolgraft::rulebook`",
    ] {
        assert!(message.contains(words), "{message}");
    }
    assert!(toolset.names().is_empty(), "nothing of the tool binds");

    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry(), &BaseTools::new().with(&tool), &manifest(21));
    let from_manifest = outcome[0].1.as_ref().unwrap_err();
    assert_eq!(from_manifest.to_string(), message);
    assert!(toolset.names().is_empty());
}

#[test]
fn shorter_names_or_a_higher_limit_let_it_bind() {
    let tool = shout();
    // 20 traces and a pool: 125 + 5 = 130 bytes; as `p`, 127.
    let deep = || traces!(tool.combo(); 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20);
    let err = Toolset::new()
        .bind((deep().with(Pool::new(1).unwrap()),))
        .unwrap_err();
    assert!(
        matches!(
            err,
            BindError::NameTooLong {
                len: 130,
                fits: 20,
                layers: 21,
                ..
            }
        ),
        "{err}"
    );
    let (pooled,) = Toolset::new()
        .bind((deep().with(Pool::new(1).unwrap().with_name("p")),))
        .unwrap();
    assert_eq!(pooled.name().len(), 127);

    let roomy = Toolset::with_limits(Limits::default().with_max_name_len(131)).unwrap();
    roomy
        .bind((traces!(tool.combo(); 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21),))
        .unwrap();
    assert_eq!(roomy.names().len(), 22);
}

#[test]
fn the_combo_length_limit_cites_the_same_rule_on_both_paths() {
    let tool = shout();
    let limits = Limits::default().with_max_combo_len(2);
    let typed = Toolset::with_limits(limits)
        .unwrap()
        .bind((tool.combo().with(Trace).with(Trace).with(Trace),))
        .unwrap_err();
    let toolset = Toolset::with_limits(limits).unwrap();
    let outcome = toolset.bind_manifest(&registry(), &BaseTools::new().with(&tool), &manifest(3));
    let from_manifest = outcome[0].1.as_ref().unwrap_err();
    assert_eq!(from_manifest.to_string(), typed.to_string());
    assert_eq!(typed.rule(), Some(Rule::Depth));
    assert!(typed.to_string().contains("rule `depth`"), "{typed}");
}
