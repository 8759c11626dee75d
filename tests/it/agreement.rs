//! The run-time path agrees with the rules: random combos drawn from a catalogue of
//! wrappers, transformers, backends, a body-locality wrapper and a caller-local
//! one, some with config
//! and some with unknown names, are accepted exactly when the rules computed from
//! the kind properties accept them (rules `one-branch-per-prefix`, `unknown-extension`,
//! `cardinality`, `locality-inside-relocation`, `caller-outside-relocation`,
//! `shared-answers-inside-authorization`, `config` and `reserved-params`), bind
//! the names those rules predict with the output schemas rule `output-schema`
//! predicts, and are refused with the error the rulebook names, first error first
//! (`unknown-extension`, then `cardinality`, then per layer
//! `locality-inside-relocation`, `caller-outside-relocation`,
//! `shared-answers-inside-authorization`, `config`, `reserved-params`).

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{marker, shout};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use serde_json::Value;
use toolgraft::ext::{Batch, Pool, Proxy};
use toolgraft::extension::{AccessRole, Placement};
use toolgraft::kind::ExtensionKind;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::{ComboSpec, ElementSpec, Manifest};
use toolgraft::runtime::{DynBranch, DynExtension, DynStack};
use toolgraft::toolset::BaseTools;
use toolgraft::{BindError, Name, Registry, Toolset};

/// The catalogue: name, kind, where it must run, whether it reserves `proxies`,
/// whether it takes config.
const CATALOGUE: [(&str, ExtensionKind, Placement, bool, bool); 10] = [
    (
        "w1",
        ExtensionKind::Wrapper,
        Placement::Anywhere,
        false,
        false,
    ),
    (
        "w2",
        ExtensionKind::Wrapper,
        Placement::Anywhere,
        false,
        false,
    ),
    (
        "batch",
        ExtensionKind::Transformer,
        Placement::Anywhere,
        false,
        true,
    ),
    (
        "t2",
        ExtensionKind::Transformer,
        Placement::Anywhere,
        false,
        false,
    ),
    (
        "b1",
        ExtensionKind::Backend,
        Placement::Anywhere,
        false,
        false,
    ),
    (
        "b2",
        ExtensionKind::Backend,
        Placement::Anywhere,
        false,
        false,
    ),
    (
        "proxy",
        ExtensionKind::Wrapper,
        Placement::BesideBody,
        true,
        false,
    ),
    (
        "ask",
        ExtensionKind::Wrapper,
        Placement::BesideCaller,
        false,
        false,
    ),
    // An authorization check: beside the caller, as a check is.
    (
        "auth",
        ExtensionKind::Wrapper,
        Placement::BesideCaller,
        false,
        false,
    ),
    // Answers from what it kept.
    (
        "kept",
        ExtensionKind::Wrapper,
        Placement::Anywhere,
        false,
        false,
    ),
];

/// Each catalogue entry's access role, by name.
fn access_of(name: &str) -> AccessRole {
    match name {
        "auth" => AccessRole::Authorizes,
        "kept" => AccessRole::SharesAnswers,
        _ => AccessRole::Neutral,
    }
}

/// How an element is written: which catalogue entry (or an unknown name), and
/// with which config.
#[derive(Clone, Debug, PartialEq)]
enum Written {
    /// A catalogue entry, bare.
    Bare(usize),
    /// A catalogue entry with `{"max_items": n}` (valid for `batch` only, when n > 0).
    Sized(usize, u8),
    /// A name nobody registered.
    Unknown(u8),
}

fn spec(written: &Written) -> ElementSpec {
    match written {
        Written::Bare(at) => ElementSpec::named(CATALOGUE[*at].0),
        Written::Sized(at, n) => {
            ElementSpec::configured(CATALOGUE[*at].0, serde_json::json!({"max_items": n}))
        }
        Written::Unknown(n) => ElementSpec::named(format!("nope{n}")),
    }
}

fn element() -> impl Strategy<Value = Written> {
    prop_oneof![
        30 => (0..CATALOGUE.len()).prop_map(Written::Bare),
        3 => ((0..CATALOGUE.len()), 0u8..3).prop_map(|(at, n)| Written::Sized(at, n)),
        1 => (0u8..3).prop_map(Written::Unknown),
    ]
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register(marker("w1")).unwrap();
    registry.register(marker("w2")).unwrap();
    registry
        .register(Configured::new(Batch::default()))
        .unwrap();
    registry
        .register(
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
    registry.register(pool.clone().with_name("b1")).unwrap();
    registry.register(pool.with_name("b2")).unwrap();
    registry.register(Proxy::allow(["egress"])).unwrap();
    registry
        .register(
            DynExtension::builder()
                .name("ask")
                .kind(ExtensionKind::Wrapper)
                .placement(Placement::BesideCaller)
                .factory(|layer| Ok(DynBranch::builder().stack(layer.below).build()))
                .build(),
        )
        .unwrap();
    for (name, placement) in [
        ("auth", Placement::BesideCaller),
        ("kept", Placement::Anywhere),
    ] {
        registry
            .register(
                DynExtension::builder()
                    .name(name)
                    .kind(ExtensionKind::Wrapper)
                    .placement(placement)
                    .access(access_of(name))
                    .factory(|layer| Ok(DynBranch::builder().stack(layer.below).build()))
                    .build(),
            )
            .unwrap();
    }
    registry
}

/// A bound name the rules predict: its name, its stack as written (identity), and
/// whether it inherits the base's output schema (rule `output-schema`).
type Predicted = (String, Vec<String>, bool);

/// What the rules say of one combo: the names it binds, or the error (in the rulebook's
/// order: unknown names, cardinality, then per layer locality, config, reserved).
fn model(combo: &[Written]) -> Result<Vec<Predicted>, String> {
    let mut unknown: Vec<String> = combo
        .iter()
        .filter_map(|written| match written {
            Written::Unknown(n) => Some(format!("nope{n}")),
            _ => None,
        })
        .collect();
    if !unknown.is_empty() {
        unknown.sort();
        unknown.dedup();
        return Err(format!("unknown: {}", unknown.join(",")));
    }
    let at = |written: &Written| match written {
        Written::Bare(at) | Written::Sized(at, _) => *at,
        Written::Unknown(_) => unreachable!("refused above"),
    };
    for kind in ExtensionKind::iter().filter(|kind| !kind.multiple()) {
        let of_kind: Vec<&str> = combo
            .iter()
            .map(|w| CATALOGUE[at(w)])
            .filter(|e| e.1 == kind)
            .map(|e| e.0)
            .collect();
        if of_kind.len() > 1 {
            return Err(format!("multiple {kind}: {}", of_kind.join(",")));
        }
    }
    let mut names = Vec::new();
    let (mut running, mut identity) = ("shout".to_owned(), Vec::new());
    let mut relocated_by: Option<&str> = None;
    let mut caller_side: Option<&str> = None;
    let mut authorized_by: Option<&str> = None;
    let mut reserved_visible = false;
    let mut inherits = true;
    for written in combo {
        let (name, kind, placement, reserves, takes_config) = CATALOGUE[at(written)];
        if placement == Placement::BesideBody
            && let Some(by) = relocated_by
        {
            return Err(format!("locality: {name} outside {by}"));
        }
        if kind.relocates_execution()
            && let Some(asks) = caller_side
        {
            return Err(format!("caller: {asks} inside {name}"));
        }
        if access_of(name) == AccessRole::SharesAnswers
            && let Some(by) = authorized_by
        {
            return Err(format!("shared: {name} outside {by}"));
        }
        if placement == Placement::BesideCaller && caller_side.is_none() {
            caller_side = Some(name);
        }
        if access_of(name) == AccessRole::Authorizes && authorized_by.is_none() {
            authorized_by = Some(name);
        }
        if let Written::Sized(_, n) = written {
            if !takes_config {
                return Err(format!("config not accepted: {name}"));
            }
            if *n == 0 {
                return Err(format!("invalid config: {name}.max_items"));
            }
        }
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
        inherits &= kind.preserves_output_shape();
        running = format!("{running}_{name}");
        identity.push(spec(written).to_string());
        names.push((running.clone(), identity.clone(), inherits));
    }
    Ok(names)
}

/// What the rules say of a tool with these combos: every bound name with whether
/// it inherits the base's output schema, or the first error.
fn model_tool(combos: &[Vec<Written>]) -> Result<Vec<(String, bool)>, String> {
    // Each combo on its own first, in order (a repeat is refused where it stands)...
    let mut each = Vec::new();
    for (at, combo) in combos.iter().enumerate() {
        let written: Vec<String> = combo.iter().map(|w| spec(w).to_string()).collect();
        let repeated = combos[..at].iter().any(|earlier| {
            earlier
                .iter()
                .map(|w| spec(w).to_string())
                .collect::<Vec<_>>()
                == written
        });
        if repeated {
            return Err(format!("repeated: {}", written.join(", ")));
        }
        each.push(model(combo)?);
    }
    // ...then the tool's names across combos (rule `one-branch-per-prefix`).
    let mut bound: Vec<Predicted> = vec![("shout".to_owned(), Vec::new(), true)];
    for predicted in each.into_iter().flatten() {
        match bound.iter().find(|(name, _, _)| *name == predicted.0) {
            Some((_, identity, _)) if *identity != predicted.1 => {
                return Err(format!("clash: {}", predicted.0));
            }
            Some(_) => {}
            None => bound.push(predicted),
        }
    }
    let mut bound: Vec<(String, bool)> = bound
        .into_iter()
        .map(|(name, _, inherits)| (name, inherits))
        .collect();
    bound.sort();
    Ok(bound)
}

fn observed(error: &BindError) -> String {
    match error {
        BindError::UnknownExtensions { names, .. } => format!("unknown: {}", names.join(",")),
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
        BindError::CallerLocalInsideRelocation {
            extension,
            relocating,
            ..
        } => format!("caller: {extension} inside {relocating}"),
        BindError::AuthorizationInsideRelocation {
            authorizer,
            relocating,
            ..
        } => format!("caller: {authorizer} inside {relocating}"),
        BindError::SharedAnswerOutsideAuthorization {
            extension,
            authorizer,
            ..
        } => format!("shared: {extension} outside {authorizer}"),
        BindError::ConfigNotAccepted { extension, .. } => {
            format!("config not accepted: {extension}")
        }
        BindError::InvalidConfig {
            extension, field, ..
        } => format!("invalid config: {extension}.{field}"),
        BindError::ReservedParamExists { extension, .. } => format!("reserved: {extension}"),
        BindError::AlreadyAttached { combo, .. } => format!("repeated: {combo}"),
        BindError::NameClash { name, .. } => format!("clash: {name}"),
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
    let combos = prop::collection::vec(prop::collection::vec(element(), 1..=6), 1..=3);
    let mut runner = TestRunner::new(config);
    let result = runner.run(&combos, |combos| {
        let expected = model_tool(&combos);
        let specs: Vec<ComboSpec> = combos
            .iter()
            .map(|combo| combo.iter().map(spec).collect())
            .collect();
        let manifest = Manifest {
            tools: vec![("shout".to_owned(), specs.clone())],
            ..Manifest::default()
        };
        let toolset = Toolset::new();
        let outcome = toolset.bind_manifest(&registry, &BaseTools::new().with(&shout()), &manifest);
        let actual: Result<Vec<(String, bool)>, String> = match &outcome[0].1 {
            Ok(()) => {
                let base = toolset.info("shout").and_then(|info| info.output_schema);
                Ok(toolset
                    .tools()
                    .into_iter()
                    .map(|info| (info.name.to_string(), info.output_schema == base))
                    .collect())
            }
            Err(error) => {
                prop_assert!(toolset.names().is_empty(), "a refused tool binds nothing");
                Err(observed(error))
            }
        };
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
