//! jq in `chain` (feature `jq`): the caller's expression (a typed argument error
//! when it does not compile, before anything runs), the operator's (refused when
//! binding), and hostile expressions ending with a typed error; typed and from a
//! manifest.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgraft::error::ArgsErrorKind;
use toolgraft::ext::Chain;
use toolgraft::ext::chain::{ChainError, ChainErrorKind};
use toolgraft::prelude::*;
use toolgraft::runtime::Refined;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;
use toolgraft::{BindError, Registry, ToolError};

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Find {
    pub city: String,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Forecast {
    pub lat: f64,
    #[serde(default)]
    pub days: Option<u32>,
}

/// `find {city}` (counting its runs) and `forecast {lat, days?}`, bound bare.
fn tools(
    runs: Arc<AtomicUsize>,
) -> (
    impl BaseTool<Input = Find, Output = Value>,
    impl BaseTool<Input = Forecast, Output = String>,
) {
    let find = Tool::builder()
        .name("find")
        .description("Locate a city.")
        .read_only()
        .body(move |input: Find| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move {
                Ok(json!({"city": input.city, "at": {"lat": 38.7, "lon": -9.1}, "days": [1, 2, 3]}))
            }
        })
        .build()
        .unwrap();
    let forecast = Tool::builder()
        .name("forecast")
        .description("Forecast at a place.")
        .read_only()
        .body(|input: Forecast| async move {
            Ok(format!(
                "sunny at {} for {} days",
                input.lat,
                input.days.unwrap_or(1)
            ))
        })
        .build()
        .unwrap();
    (find, forecast)
}

/// A toolset with `find_chain` (the chain's manifest element is `element`) and
/// `forecast`; typed when `element` is `None`.
fn toolset(element: Option<Value>, runs: Arc<AtomicUsize>) -> (Toolset, Result<(), BindError>) {
    let (find, forecast) = tools(runs);
    let toolset = Toolset::new();
    toolset.bind((forecast.combo(),)).unwrap();
    let bound = match element {
        None => toolset
            .bind((find.combo().with(Chain::new(&toolset)),))
            .map(drop),
        Some(element) => {
            let mut registry = Registry::new();
            registry
                .register(Refined::new(Chain::new(&toolset), Chain::configured))
                .unwrap();
            let manifest = Manifest::from_value(&json!({"tools": {"find": [[element]]}})).unwrap();
            toolset
                .bind_manifest(&registry, &BaseTools::new().with(&find), &manifest)
                .remove(0)
                .1
        }
    };
    (toolset, bound)
}

fn both_paths() -> [Option<Value>; 2] {
    [None, Some(json!("chain"))]
}

#[tokio::test]
async fn a_callers_jq_expression_makes_the_next_tools_arguments() {
    for element in both_paths() {
        let (toolset, bound) = toolset(element, Arc::default());
        bound.unwrap();
        let schema = toolset.info("find_chain").unwrap().input_schema;
        let properties = schema.get("properties").unwrap();
        assert!(
            properties.get("jq").is_some() && properties.get("select").is_some(),
            "{schema:?}"
        );
        let out = toolset
            .call(
                "find_chain",
                json!({"city": "Lisbon", "next_tool": "forecast", "jq": "{lat: .at.lat, days: (.days | length)}"}),
            )
            .await
            .unwrap();
        assert_eq!(out, json!("sunny at 38.7 for 3 days"));
        println!("find_chain with jq `{{lat: .at.lat, days: (.days | length)}}` = {out}");
        // The JSON Pointer still works beside it.
        let out = toolset
            .call(
                "find_chain",
                json!({"city": "Lisbon", "next_tool": "forecast", "select": "/at"}),
            )
            .await;
        // `/at` carries `lon`, which `forecast` does not name; its schema does
        // not forbid more properties, so it is passed on and left unread.
        assert_eq!(out.unwrap(), json!("sunny at 38.7 for 1 days"));
    }
}

#[tokio::test]
async fn a_callers_bad_expression_is_an_argument_error_before_anything_runs() {
    for element in both_paths() {
        let runs = Arc::new(AtomicUsize::new(0));
        let (toolset, bound) = toolset(element, runs.clone());
        bound.unwrap();
        for (jq, select, says) in [
            (json!("{lat: .at.lat"), json!(""), "does not compile"),
            (json!("nosuch(1)"), json!(""), "undefined"),
            (json!(".at"), json!("/at"), "not both"),
            (json!(7), json!(""), "expected a jq expression"),
            (json!("x".repeat(10_000)), json!(""), "over the limit"),
        ] {
            let err = toolset
                .call(
                    "find_chain",
                    json!({"city": "Lisbon", "next_tool": "forecast", "jq": jq, "select": select}),
                )
                .await
                .unwrap_err();
            match &err {
                ToolError::InvalidArguments {
                    tool,
                    field,
                    kind,
                    problem,
                } => {
                    assert_eq!(tool.as_str(), "find_chain");
                    assert_eq!(field.as_deref(), Some("jq"));
                    assert_eq!(*kind, ArgsErrorKind::InvalidValue);
                    assert!(problem.contains(says), "{problem}");
                    assert!(problem.len() < 1_000, "quoted shortened: {problem}");
                }
                other => panic!("{jq}: expected an argument error, got {other:?}"),
            }
        }
        assert_eq!(runs.load(Ordering::SeqCst), 0, "`find` never ran");
    }
}

#[tokio::test]
async fn hostile_and_failing_expressions_stop_the_chain_with_a_typed_error() {
    for element in both_paths() {
        let (toolset, bound) = toolset(element, Arc::default());
        bound.unwrap();
        for (jq, kind, says) in [
            ("def f: f; f", ChainErrorKind::Jq, "jq expression"),
            ("[range(1e9)]", ChainErrorKind::Jq, "jq expression"),
            ("def f: [f]; f", ChainErrorKind::Jq, ""),
            (r#"error("no city")"#, ChainErrorKind::Jq, "no city"),
            (".days[]", ChainErrorKind::Jq, "more than one value"),
            ("empty", ChainErrorKind::Jq, "no value"),
            (".at.lat", ChainErrorKind::NotArguments, "yields 38.7"),
        ] {
            let err = toolset
                .call(
                    "find_chain",
                    json!({"city": "Lisbon", "next_tool": "forecast", "jq": jq}),
                )
                .await
                .unwrap_err();
            match err.downcast_ref::<ChainError>() {
                Some(ChainError {
                    tool,
                    kind: found,
                    problem,
                    ..
                }) => {
                    assert_eq!(tool.as_str(), "find_chain");
                    assert_eq!(*found, kind, "{jq}: {problem}");
                    assert!(problem.contains(says), "{jq}: {problem}");
                    println!("{jq}: {err}");
                }
                None => panic!("{jq}: expected a chain error, got {err:?}"),
            }
        }
    }
}

#[tokio::test]
async fn the_operators_expression_decides_and_callers_give_only_next_tool() {
    let element =
        json!({"name": "chain", "config": {"jq": "{lat: .at.lat, days: 2}", "jq_steps": 1000}});
    let runs = Arc::new(AtomicUsize::new(0));
    let (manifest, bound) = toolset(Some(element), runs.clone());
    bound.unwrap();
    let (find, forecast) = tools(runs);
    let typed = Toolset::new();
    typed.bind((forecast.combo(),)).unwrap();
    typed
        .bind((find
            .combo()
            .with(Chain::new(&typed).with_jq("{lat: .at.lat, days: 2}")),))
        .unwrap();
    for toolset in [manifest, typed] {
        let schema = toolset.info("find_chain").unwrap().input_schema;
        let properties = schema.get("properties").unwrap().as_object().unwrap();
        let mut names: Vec<&str> = properties.keys().map(String::as_str).collect();
        names.sort();
        assert_eq!(names, ["city", "next_tool"]);
        let out = toolset
            .call(
                "find_chain",
                json!({"city": "Lisbon", "next_tool": "forecast"}),
            )
            .await
            .unwrap();
        assert_eq!(out, json!("sunny at 38.7 for 2 days"));
        let err = toolset
            .call(
                "find_chain",
                json!({"city": "Lisbon", "next_tool": "forecast", "jq": "."}),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments { kind: ArgsErrorKind::UnknownField, ref field, .. } if field.as_deref() == Some("jq")),
            "{err:?}"
        );
    }
    // Its bounds hold for it: 1000 steps are not enough for this.
    let element = json!({"name": "chain", "config": {"jq": "[range(5000)] | {lat: length}", "jq_steps": 1000}});
    let (toolset, bound) = toolset(Some(element), Arc::default());
    bound.unwrap();
    let err = toolset
        .call(
            "find_chain",
            json!({"city": "Lisbon", "next_tool": "forecast"}),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("more than 1000 steps"), "{err}");
}

#[test]
fn the_operators_bad_expression_is_refused_when_binding() {
    let (find, _) = tools(Arc::default());
    let typed = Toolset::new();
    let err = typed
        .bind((find
            .combo()
            .with(Chain::new(&typed).with_jq("{lat: .at.lat")),))
        .unwrap_err();
    println!("typed: {err}");
    assert!(
        matches!(err, BindError::InvalidConfig { ref field, ref extension, .. } if field == "jq" && extension == "chain"),
        "{err:?}"
    );
    assert_eq!(err.rule(), Some(toolgraft::rulebook::Rule::Config));
    assert!(typed.names().is_empty());
    for config in [
        json!({"jq": "{lat: .at.lat"}),
        json!({"jq": "nosuch"}),
        json!({"jq": "x".repeat(10_000)}),
        json!({"jq": ".", "jq_steps": 0}),
        json!({"jq": ".", "jq_time_ms": 600_000}),
        json!({"jq": 7}),
        json!({"jqq": "."}),
    ] {
        let (toolset, bound) = toolset(
            Some(json!({"name": "chain", "config": config})),
            Arc::default(),
        );
        let err = bound.unwrap_err();
        println!(
            "manifest {}: {err}",
            toolgraft::error::shorten_json(&config)
        );
        assert!(
            matches!(err, BindError::InvalidConfig { .. }),
            "{config}: {err:?}"
        );
        assert!(
            !toolset.contains("find") && !toolset.contains("find_chain"),
            "a refused tool binds nothing"
        );
    }
}
