//! Rules `wrapper-input-schema` to `output-schema` on the typed path (scenarios 15, 16, 18 to 20, 22, 23).

use crate::common;

use common::{ReportInput, Shout, ping, report, shout};
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgraft::Wrap;
use toolgraft::error::ArgsError;
use toolgraft::ext::{Batch, Cache, Trace};
use toolgraft::extension::{Anywhere, Args, LayerInput, Next, Params, Wrapper};
use toolgraft::kind::Transformer;
use toolgraft::prelude::*;
use toolgraft::schema::ArgNames;
use toolgraft::{BindError, ToolError};

#[derive(Deserialize, Serialize, JsonSchema)]
struct Counted {
    /// The text to repeat.
    text: String,
    /// How many times.
    #[serde(default = "two")]
    #[schemars(range(min = 1))]
    count: i64,
}

fn two() -> i64 {
    2
}

#[test]
fn a_wrapper_presents_its_layer_input_schema_byte_for_byte() {
    // Wrappers present the tool's input schema unchanged, byte for byte.
    let repeat = Tool::builder()
        .name("repeat")
        .description("Repeat a text.")
        .read_only()
        .body(|input: Counted| async move { Ok(input.text.repeat(input.count as usize)) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((repeat.combo().with(Trace).with(Trace),))
        .unwrap();
    let base = serde_json::to_string(&toolset.info("repeat").unwrap().input_schema).unwrap();
    for branch in ["repeat_trace", "repeat_trace_trace"] {
        let schema = serde_json::to_string(&toolset.info(branch).unwrap().input_schema).unwrap();
        assert_eq!(schema, base, "{branch}");
    }
    // Defaults, descriptions and constraints are in what was compared.
    assert!(
        base.contains(r#""default":2"#)
            && base.contains("How many times.")
            && base.contains(r#""minimum":1"#)
    );
}

#[tokio::test]
async fn a_wrapper_adds_only_its_reserved_params() {
    // `cache` adds its reserved `exp` and nothing else; what the tool requires stays.
    let shout = shout();
    let toolset = Toolset::new();
    toolset
        .bind((shout.combo().with(Cache::default()),))
        .unwrap();
    let base = toolset.info("shout").unwrap().input_schema;
    let cached = toolset.info("shout_cache").unwrap().input_schema;
    assert_eq!(cached.get("required"), base.get("required"));
    assert_eq!(cached.get("required").unwrap(), &json!(["text"]));
    let properties = cached.get("properties").unwrap().as_object().unwrap();
    assert_eq!(properties.keys().collect::<Vec<_>>(), ["text", "exp"]);
    assert_eq!(properties["text"], base.get("properties").unwrap()["text"]);
    assert_eq!(properties["exp"]["type"], "number");

    let out = toolset
        .call("shout_cache", json!({"text": "hi", "exp": 10}))
        .await
        .unwrap();
    assert_eq!(out, json!("hi"));
    let err = toolset
        .call("shout", json!({"text": "hi", "exp": 10}))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("`shout`") && message.contains("unknown field `exp`"),
        "{message}"
    );
    assert!(
        message.contains("`exp` is a parameter of `shout_cache`"),
        "{message}"
    );
    match err {
        ToolError::InvalidArguments { tool, field, .. } => {
            assert_eq!((tool.as_str(), field.as_deref()), ("shout", Some("exp")));
        }
        other => panic!("expected invalid arguments, got {other:?}"),
    }
}

/// A wrapper reserving `text`, which `shout` already takes.
#[derive(Clone)]
struct Shadow;

#[derive(Clone, Default, Deserialize, Serialize, JsonSchema)]
struct ShadowParams {
    text: Option<String>,
}

impl Params for ShadowParams {}

impl Extension for Shadow {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "shadow"
    }
}

impl<S: Stack> Wrap<S> for Shadow {
    type Params = ShadowParams;

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        _: ShadowParams,
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        next.call(input).await
    }
}

#[test]
fn a_reserved_param_may_not_mask_a_real_one() {
    // A reserved param named like one of the tool's fields, typed: the collision is
    // found when binding.
    let shout = shout();
    let toolset = Toolset::new();
    let err = toolset.bind((shout.combo().with(Shadow),)).err().unwrap();
    match &err {
        BindError::ReservedParamExists {
            tool,
            extension,
            param,
            ..
        } => {
            assert_eq!(
                (tool.as_str(), extension.as_str(), param.as_str()),
                ("shout", "shadow", "text")
            );
        }
        other => panic!("expected a reserved-param collision, got {other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with("reserved param `text` already exists")
    );
    assert!(toolset.names().is_empty());
}

#[tokio::test]
async fn reserved_params_over_a_tool_without_params_bind() {
    // `ping {}` plus `cache`'s `exp`: the branch binds, and nothing is required.
    let ping = ping();
    let toolset = Toolset::new();
    toolset
        .bind((ping.combo().with(Cache::default()),))
        .unwrap();
    let schema = toolset.info("ping_cache").unwrap().input_schema;
    let properties = schema.get("properties").unwrap().as_object().unwrap();
    assert_eq!(properties.keys().collect::<Vec<_>>(), ["exp"]);
    assert!(schema.get("required").is_none_or(|r| r == &json!([])));
    assert_eq!(
        toolset.call("ping_cache", json!({"exp": 1})).await.unwrap(),
        json!("pong")
    );
    assert_eq!(
        toolset.call("ping_cache", json!({})).await.unwrap(),
        json!("pong")
    );
}

/// A transformer that presents a given schema and echoes its arguments.
#[derive(Clone)]
struct Presenting(Value);

impl Extension for Presenting {
    type Kind = Transformer;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "present"
    }
    fn input_schema(&self, _: &LayerInput<'_, Self>) -> Option<Schema> {
        Schema::try_from(self.0.clone()).ok()
    }
}

/// Echoes its arguments, admitting those its schema names.
#[derive(Clone)]
struct Echo(ArgNames);

impl Stack for Echo {
    type Input = Args;
    type Output = Value;
    async fn call(&self, input: Args) -> Result<Value, ToolError> {
        Ok(Value::Object(input))
    }
    fn decode(&self, args: Args) -> Result<Args, ArgsError> {
        self.0.check(&args)?;
        Ok(args)
    }
}

impl<S: Stack> Layer<S> for Presenting {
    type Branch = Echo;
    fn layer(self, _: S, _: &LayerInput<'_, Self>) -> Echo {
        Echo(ArgNames::of(&Schema::try_from(self.0).unwrap()))
    }
}

#[tokio::test]
async fn a_transformer_must_present_a_concrete_schema() {
    // A typed transformer presenting any JSON (`true`, `{}`, an open object) is refused.
    for any_json in [
        json!(true),
        json!({}),
        json!({"type": "object", "additionalProperties": true}),
    ] {
        let shout = shout();
        let toolset = Toolset::new();
        let err = toolset
            .bind((shout.combo().with(Presenting(any_json.clone())),))
            .err();
        let err = err.unwrap_or_else(|| panic!("{any_json} was accepted"));
        assert!(
            matches!(err, BindError::TransformerSchemaNotConcrete { .. }),
            "{any_json}: {err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("transformer must present its own concrete schema")
        );
        assert!(toolset.names().is_empty());
    }
    // Zero parameters is concrete.
    let shout = shout();
    let toolset = Toolset::new();
    let empty = json!({"type": "object", "properties": {}, "additionalProperties": false});
    toolset
        .bind((shout.combo().with(Presenting(empty)),))
        .unwrap();
    assert_eq!(
        toolset.call("shout_present", json!({})).await.unwrap(),
        json!({})
    );
    let err = toolset
        .call("shout_present", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("unknown field `text`, expected no arguments"),
        "{err}"
    );
}

#[test]
fn output_schemas_are_inherited_exactly_through_shape_preserving_prefixes() {
    // `report` keeps its output schema through `trace`; through `batch`, in either
    // order with `trace`, the branch declares a list instead.
    let report = report();
    let toolset = Toolset::new();
    toolset
        .bind((
            report.combo().with(Trace),
            report.combo().with(Batch::default()),
            report.combo().with(Trace).with(Batch::default()),
            report.combo().with(Batch::default()).with(Trace),
        ))
        .unwrap();
    let output = |name: &str| toolset.info(name).unwrap().output_schema;
    let base = output("report").expect("a typed base declares its output");
    assert_eq!(base.get("title").unwrap(), "Report");
    assert_eq!(output("report_trace").as_ref(), Some(&base));
    for reshaped in ["report_batch", "report_trace_batch", "report_batch_trace"] {
        let schema = output(reshaped).unwrap_or_else(|| panic!("{reshaped} declares a list"));
        assert_ne!(schema, base, "{reshaped}");
        assert_eq!(schema.get("type").unwrap(), "array", "{reshaped}");
    }
    // A wrapper over the batch keeps the batch's (declared) schema, not the base's.
    assert_eq!(output("report_batch_trace"), output("report_batch"));
}

#[derive(Deserialize, Serialize, JsonSchema)]
enum Unit {
    Celsius,
    Fahrenheit,
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct Forecast {
    city: String,
    unit: Unit,
}

#[test]
fn nested_definitions_still_resolve_inside_a_batch_schema() {
    let forecast = Tool::builder()
        .name("forecast")
        .description("Forecast.")
        .read_only()
        .body(|input: Forecast| async move { Ok(input.city) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((forecast.combo().with(Batch::default()),))
        .unwrap();
    let base = toolset.info("forecast").unwrap().input_schema;
    let batch = toolset.info("forecast_batch").unwrap().input_schema;
    let reference =
        &batch.get("properties").unwrap()["items"]["items"]["properties"]["unit"]["$ref"];
    assert_eq!(reference, "#/$defs/Unit");
    assert_eq!(
        batch.get("$defs").unwrap()["Unit"],
        base.get("$defs").unwrap()["Unit"]
    );
    assert!(
        batch.get("properties").unwrap()["items"]["items"]
            .get("$defs")
            .is_none()
    );
}

#[tokio::test]
async fn a_report_batch_carries_values_and_errors() {
    let report = report();
    let toolset = Toolset::new();
    toolset
        .bind((report.combo().with(Batch::default()),))
        .unwrap();
    let out = toolset
        .call(
            "report_batch",
            json!({"items": [{"text": "ab"}, {"text": "abc"}]}),
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        json!([{"title": "ab", "score": 2}, {"title": "abc", "score": 3}])
    );
    let _ = ReportInput {
        text: String::new(),
    };
    let _ = Shout::new("");
}

/// What a model reads of a branch is one line per description: MCP clients
/// show a description as it is, and a doc comment's line breaks would show as
/// breaks mid-sentence. Every built-in, in what it adds to the input schema and
/// to the tool's description (the base's is one line).
#[cfg(all(
    feature = "proxy",
    feature = "chain",
    feature = "approve",
    feature = "limit"
))]
#[test]
fn the_built_ins_describe_their_params_and_branches_in_one_line_each() {
    use std::time::Duration;
    use toolgraft::ext::approve::{Approve, SealKey};
    use toolgraft::ext::{Chain, Concurrency, OutputSchema, Pool, Proxy, RateLimit, Timeout};
    fn descriptions<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(description)) = map.get("description") {
                    found.push(description);
                }
                map.values().for_each(|value| descriptions(value, found));
            }
            Value::Array(items) => items.iter().for_each(|value| descriptions(value, found)),
            _ => {}
        }
    }
    let toolset = Toolset::new();
    let key = SealKey::new(vec![7; 32]).unwrap();
    let typed = OutputSchema::new(json!({"type": "string"})).unwrap();
    toolset
        .bind((
            shout()
                .combo()
                .with(Cache::default())
                .with(Proxy::allow(["eu"]))
                .with(Batch::default())
                .with(Trace),
            shout().combo().with(Chain::new(&toolset)).with(typed),
            shout()
                .combo()
                .with(Timeout::new(Duration::from_secs(1)))
                .with(RateLimit::per_second(5))
                .with(Concurrency::at_most(2))
                .with(Pool::new(1).unwrap())
                .with(Approve::new(key)),
        ))
        .unwrap();
    let mut checked = 0;
    for name in toolset.names() {
        let info = toolset.info(&name).unwrap();
        assert!(
            !info.description.contains('\n'),
            "{name}: {:?}",
            info.description
        );
        let mut found = Vec::new();
        descriptions(info.input_schema.as_value(), &mut found);
        for description in found {
            checked += 1;
            assert!(!description.contains('\n'), "{name}: {description:?}");
        }
    }
    assert!(checked >= 8, "the params are described ({checked})");
    assert_eq!(toolset.names().len(), 12, "{:?}", toolset.names());
}
