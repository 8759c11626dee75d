//! Calls: typed through the outermost branch, or by name with JSON; bad input gives
//! typed errors naming the tool and the field.

use crate::common;

use common::{Loud, Shout, report, shout};
use serde_json::json;
use toolgraft::ToolError;
use toolgraft::ext::{Batch, Cache, Trace};
use toolgraft::prelude::*;

fn invalid(err: ToolError) -> (String, Option<String>, String) {
    match err {
        ToolError::InvalidArguments {
            tool,
            field,
            problem,
            ..
        } => (tool.to_string(), field, problem),
        other => panic!("expected invalid arguments, got {other:?}"),
    }
}

#[tokio::test]
async fn typed_and_by_name_calls_run_the_same_stack() {
    let shout = shout();
    let toolset = Toolset::new();
    let (loud,) = toolset
        .bind((shout.combo().with(Trace).with(Loud),))
        .unwrap();
    assert_eq!(loud.call(Shout::new("hi")).await.unwrap(), "HI");
    assert_eq!(
        toolset
            .call("shout_trace_loud", json!({"text": "hi"}))
            .await
            .unwrap(),
        json!("HI")
    );
    // The base itself is a typed stack too.
    assert_eq!(shout.call(Shout::new("hi")).await.unwrap(), "hi");
}

#[tokio::test]
async fn bad_arguments_name_the_tool_and_the_field() {
    let (shout, report) = (shout(), report());
    let toolset = Toolset::new();
    toolset
        .bind((shout.combo().with(Cache::default()).with(Batch::default()),))
        .unwrap();
    toolset.bind((report.combo(),)).unwrap();

    let (tool, field, problem) = invalid(toolset.call("shout", json!({})).await.unwrap_err());
    assert_eq!((tool.as_str(), field.as_deref()), ("shout", Some("text")));
    assert!(problem.contains("missing field `text`"), "{problem}");

    let (tool, field, problem) = invalid(
        toolset
            .call("report", json!({"text": 3}))
            .await
            .unwrap_err(),
    );
    assert_eq!((tool.as_str(), field.as_deref()), ("report", Some("text")));
    assert!(
        problem.contains("invalid type: integer `3`, expected a string"),
        "{problem}"
    );

    let (_, field, problem) = invalid(
        toolset
            .call("shout", json!({"text": "a", "txt": "b"}))
            .await
            .unwrap_err(),
    );
    assert_eq!(field.as_deref(), Some("txt"));
    assert!(
        problem.contains("unknown field `txt`, expected one of `text`"),
        "{problem}"
    );

    let (tool, field, problem) = invalid(
        toolset
            .call("shout_cache", json!({"text": "a", "exp": "soon"}))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (tool.as_str(), field.as_deref()),
        ("shout_cache", Some("exp"))
    );
    assert!(problem.contains("invalid type"), "{problem}");

    let (_, field, problem) = invalid(
        toolset
            .call("shout_cache", json!({"text": "a", "exp": -1}))
            .await
            .unwrap_err(),
    );
    assert_eq!(field.as_deref(), Some("exp"));
    assert!(problem.contains("at least 1"), "{problem}");

    // Inside a batch, the path goes through the item.
    let args = json!({"items": [{"text": "a"}, {"text": 1}]});
    let (tool, field, _) = invalid(toolset.call("shout_cache_batch", args).await.unwrap_err());
    assert_eq!(
        (tool.as_str(), field.as_deref()),
        ("shout_cache_batch", Some("items[1].text"))
    );

    let (_, field, problem) = invalid(toolset.call("shout", json!(["hi"])).await.unwrap_err());
    assert_eq!(field, None);
    assert!(problem.contains("must be a JSON object"), "{problem}");
}

#[tokio::test]
async fn unknown_names_and_body_errors_are_typed() {
    let failing = Tool::builder()
        .name("fail")
        .description("Always fails.")
        .read_only()
        .body(|input: Shout| async move {
            Err::<String, _>(format!("cannot handle {}", input.text).into())
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((failing.combo().with(Trace),)).unwrap();

    let err = toolset.call("nope", json!({})).await.unwrap_err();
    assert!(matches!(err, ToolError::UnknownTool { ref name } if name == "nope"));
    assert_eq!(err.to_string(), "unknown tool `nope`");

    let err = toolset
        .call("fail_trace", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "tool `fail` failed: cannot handle x");
    assert!(matches!(err, ToolError::Body { ref tool, .. } if tool == "fail"));
    assert!(std::error::Error::source(&err).is_some());
}

#[tokio::test]
async fn null_arguments_mean_none() {
    let ping = common::ping();
    let toolset = Toolset::new();
    toolset.bind((ping.combo(),)).unwrap();
    assert_eq!(
        toolset.call("ping", serde_json::Value::Null).await.unwrap(),
        json!("pong")
    );
}

#[tokio::test]
async fn calls_by_name_work_from_many_tasks_at_once() {
    let shout = shout();
    let toolset = Toolset::new();
    toolset.bind((shout.combo().with(Loud),)).unwrap();
    let calls: Vec<_> = (0..64)
        .map(|i| {
            let toolset = toolset.clone();
            tokio::spawn(async move {
                toolset
                    .call("shout_loud", json!({"text": format!("n{i}")}))
                    .await
            })
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        assert_eq!(call.await.unwrap().unwrap(), json!(format!("N{i}")));
    }
}

#[derive(Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(tag = "op")]
enum Calc {
    Add { a: i64, b: i64 },
    Neg { a: i64 },
}

#[tokio::test]
async fn enum_inputs_are_callable_by_name() {
    let calc = Tool::builder()
        .name("calc")
        .description("Calculate.")
        .read_only()
        .body(|input: Calc| async move {
            Ok(match input {
                Calc::Add { a, b } => a + b,
                Calc::Neg { a } => -a,
            })
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((calc.combo().with(Cache::default()),))
        .unwrap();
    assert_eq!(
        toolset
            .call("calc", json!({"op": "Add", "a": 1, "b": 2}))
            .await
            .unwrap(),
        json!(3)
    );
    assert_eq!(
        toolset
            .call("calc_cache", json!({"op": "Neg", "a": 4, "exp": 5}))
            .await
            .unwrap(),
        json!(-4)
    );
    // The schema does not forbid more properties (no `deny_unknown_fields`):
    // one it does not name is no error, as in rmcp.
    assert_eq!(
        toolset
            .call("calc", json!({"op": "Neg", "a": 1, "zzz": 0}))
            .await
            .unwrap(),
        json!(-1)
    );
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Sum {
    a: i64,
    b: i64,
}

/// Issue 36, item 2: arguments are checked as the advertised schema says. A
/// schema that does not forbid more properties takes one it does not name (rmcp's
/// `sum` with `c: 3` answers 3; toolgraft answered "unknown field"), at the base
/// and through its branches; one that forbids them (`deny_unknown_fields`)
/// refuses it. The layers' reserved params are still taken out first, and a
/// pinned one is still the operator's alone.
#[tokio::test]
async fn a_property_the_schema_does_not_forbid_is_no_error() {
    let sum = Tool::builder()
        .name("sum")
        .description("Add two numbers.")
        .read_only()
        .body(|input: Sum| async move { Ok(input.a + input.b) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((sum.combo().with(Cache::default()).with(Trace),))
        .unwrap();
    for name in ["sum", "sum_cache", "sum_cache_trace"] {
        let out = toolset
            .call(name, json!({"a": 1, "b": 2, "c": 3}))
            .await
            .unwrap();
        assert_eq!(out, json!(3), "{name}");
    }
    assert!(
        toolset
            .info("sum")
            .unwrap()
            .input_schema
            .get("additionalProperties")
            .is_none()
    );

    let closed = Toolset::new();
    closed.bind((shout().combo().with(Trace),)).unwrap();
    for name in ["shout", "shout_trace"] {
        let (_, field, problem) = invalid(
            closed
                .call(name, json!({"text": "hi", "c": 3}))
                .await
                .unwrap_err(),
        );
        assert_eq!(field.as_deref(), Some("c"), "{name}: {problem}");
    }

    let registry = {
        let mut registry = toolgraft::Registry::new();
        registry.register(Cache::default()).unwrap();
        registry
    };
    let pinned = Toolset::new();
    let manifest = toolgraft::runtime::manifest::Manifest::from_json(
        r#"{"tools": {"sum": [{"name": "cache", "pin": {"exp": 60}}]}}"#,
    )
    .unwrap();
    let bases = toolgraft::toolset::BaseTools::new().with(&sum);
    for (_, outcome) in pinned.bind_manifest(&registry, &bases, &manifest) {
        outcome.unwrap();
    }
    let smuggled = pinned
        .call("sum_cache", json!({"a": 1, "b": 2, "exp": 0}))
        .await
        .unwrap_err();
    assert!(
        smuggled.to_string().contains("the operator pins it"),
        "{smuggled}"
    );
}

/// A closed schema whose property names are partly behind a `$ref` (an
/// `allOf` of a definition, closed by `unevaluatedProperties`) is not read as
/// naming only what is in sight: the call goes to the tool, whose decoding
/// knows them (a hostile review found `id` refused as unknown).
#[tokio::test]
async fn a_closed_schema_composed_by_reference_takes_the_names_it_refers_to() {
    let schema: schemars::Schema = serde_json::from_value(json!({
        "type": "object",
        "allOf": [{"$ref": "#/$defs/Base"}],
        "properties": {"note": {"type": "string"}},
        "unevaluatedProperties": false,
        "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "string"}}}}
    }))
    .unwrap();
    let noted = toolgraft::runtime::DynTool::builder()
        .name("noted")
        .description("Take a note.")
        .input_schema(schema)
        .body(|args: toolgraft::schema::Args| async move { Ok(serde_json::Value::Object(args)) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind((noted.combo(),)).unwrap();
    let out = toolset
        .call("noted", json!({"id": "1", "note": "n"}))
        .await
        .unwrap();
    assert_eq!(out, json!({"id": "1", "note": "n"}));
}
