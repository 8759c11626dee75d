//! The run-time path agrees with the typed rules: random combos drawn from a
//! catalogue of wrappers, transformers, backends and a body-locality wrapper are
//! accepted exactly when the rules computed from the kind properties accept them,
//! bind the names those rules predict, and are refused with the error the spec
//! names (rule 5 before the per-layer rules; per layer, 6 before 9).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{marker, shout};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use serde_json::Value;
use toolgraft::ext::{Batch, Pool, Proxy};
use toolgraft::manifest::{ComboSpec, ElementSpec, Manifest};
use toolgraft::{
    BaseTools, BindError, DynBranch, DynExtension, DynStack, ExtensionKind, Name, Registry, Toolset,
};

/// The catalogue: name, kind, whether it needs body locality, whether it reserves
/// `proxies`.
const CATALOGUE: [(&str, ExtensionKind, bool, bool); 7] = [
    ("w1", ExtensionKind::Wrapper, false, false),
    ("w2", ExtensionKind::Wrapper, false, false),
    ("batch", ExtensionKind::Transformer, false, false),
    ("t2", ExtensionKind::Transformer, false, false),
    ("b1", ExtensionKind::Backend, false, false),
    ("b2", ExtensionKind::Backend, false, false),
    ("proxy", ExtensionKind::Wrapper, true, true),
];

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register(marker("w1")).unwrap();
    registry.register(marker("w2")).unwrap();
    registry.register(Batch::default()).unwrap();
    registry
        .register_dynamic(
            DynExtension::builder()
                .name("t2")
                .kind(ExtensionKind::Transformer)
                .factory(|layer| {
                    let stack = DynStack::from_fn(layer.input.branch.clone(), |args| async move { Ok(Value::Object(args)) });
                    let schema = schemars::json_schema!({"type": "object", "properties": {"note": {"type": "string"}}});
                    Ok(DynBranch::builder().stack(stack).input_schema(schema).build())
                })
                .build(),
        )
        .unwrap();
    let pool = Pool::new(1).unwrap();
    registry.register(pool.clone().named("b1")).unwrap();
    registry.register(pool.named("b2")).unwrap();
    registry.register(Proxy::allow(["egress"])).unwrap();
    registry
}

/// What the rules say of one combo: the names it binds, or the error.
fn model(combo: &[usize]) -> Result<Vec<String>, String> {
    let entry = |at: usize| CATALOGUE[combo[at]];
    // Rule 5, over the whole combo, per non-`multiple` kind.
    for kind in ExtensionKind::iter().filter(|kind| !kind.multiple()) {
        let of_kind: Vec<&str> = (0..combo.len())
            .filter(|at| entry(*at).1 == kind)
            .map(|at| entry(at).0)
            .collect();
        if of_kind.len() > 1 {
            return Err(format!("multiple {kind}: {}", of_kind.join(",")));
        }
    }
    let mut names = Vec::new();
    let mut running = "shout".to_owned();
    let mut relocated_by: Option<&str> = None;
    let mut reserved_visible = false;
    for at in 0..combo.len() {
        let (name, kind, body_local, reserves) = entry(at);
        // Rule 6.
        if body_local && let Some(by) = relocated_by {
            return Err(format!("locality: {name} outside {by}"));
        }
        // Rule 9: the layer input already takes the reserved param.
        if kind.preserves_schema() && reserves && reserved_visible {
            return Err(format!("reserved: {name}"));
        }
        if kind.declares_schema() {
            reserved_visible = false;
        }
        reserved_visible |= kind.preserves_schema() && reserves;
        if kind.relocates_execution() && relocated_by.is_none() {
            relocated_by = Some(name);
        }
        running = format!("{running}_{name}");
        names.push(running.clone());
    }
    Ok(names)
}

fn observed(error: &BindError) -> String {
    match error {
        BindError::MultipleOfKind {
            kind, extensions, ..
        } => {
            format!(
                "multiple {kind}: {}",
                extensions
                    .iter()
                    .map(Name::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }
        BindError::LocalityOutsideRelocation {
            extension,
            relocating,
            ..
        } => {
            format!("locality: {extension} outside {relocating}")
        }
        BindError::ReservedParamExists { extension, .. } => format!("reserved: {extension}"),
        other => format!("unexpected: {other}"),
    }
}

#[test]
fn the_run_time_path_accepts_exactly_what_the_rules_accept() {
    let registry = registry();
    let config = ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let (accepted, refused) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let combos = prop::collection::vec(prop::collection::vec(0..CATALOGUE.len(), 1..=6), 1..=3);
    let mut runner = TestRunner::new(config);
    let result = runner.run(&combos, |combos| {
        // The tool's expected fate: the first refused combo's error, or every
        // combo's names (identical prefixes once).
        let mut expected: Result<Vec<String>, String> = Ok(vec!["shout".to_owned()]);
        for combo in &combos {
            match (&mut expected, model(combo)) {
                (Ok(names), Ok(more)) => {
                    for name in more {
                        if !names.contains(&name) {
                            names.push(name);
                        }
                    }
                }
                (Ok(_), Err(error)) => expected = Err(error),
                (Err(_), _) => {}
            }
        }
        let specs: Vec<ComboSpec> = combos
            .iter()
            .map(|combo| {
                combo
                    .iter()
                    .map(|at| ElementSpec::named(CATALOGUE[*at].0))
                    .collect()
            })
            .collect();
        let manifest = Manifest {
            tools: vec![("shout".to_owned(), specs.clone())],
        };
        let toolset = Toolset::new();
        let outcome = toolset.bind_manifest(&registry, &BaseTools::new().with(&shout()), &manifest);
        let actual: Result<Vec<String>, String> = match &outcome[0].1 {
            Ok(()) => Ok(toolset
                .names()
                .into_iter()
                .map(|name| name.to_string())
                .collect()),
            Err(error) => {
                prop_assert!(toolset.names().is_empty(), "a refused tool binds nothing");
                Err(observed(error))
            }
        };
        let expected = expected.map(|mut names| {
            names.sort();
            names
        });
        let counter = if actual.is_ok() { &accepted } else { &refused };
        counter.fetch_add(1, Ordering::Relaxed);
        prop_assert_eq!(actual, expected, "combos {:?}", specs);
        Ok(())
    });
    if let Err(failure) = result {
        panic!("the run-time path disagrees with the rules: {failure}");
    }
    let (accepted, refused) = (accepted.into_inner(), refused.into_inner());
    eprintln!(
        "agreement: {} cases, {accepted} accepted, {refused} refused, no disagreement",
        accepted + refused
    );
    assert!(accepted + refused >= 2000);
    assert!(
        accepted > 200 && refused > 200,
        "both outcomes are exercised"
    );
}
