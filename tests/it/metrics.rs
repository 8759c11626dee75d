//! `metrics` (feature `metrics`): after known calls, the Prometheus text format
//! holds the numbers, typed and from a manifest.

use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::Registry;
use toolgraft::ext::{Metrics, Timeout};
use toolgraft::prelude::*;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::toolset::BaseTools;

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Echo {
    pub text: String,
}

/// `echo {text}`: answers the text; `fail` fails, `panic` panics, `slow` sleeps
/// a minute first.
fn echo() -> impl BaseTool<Input = Echo, Output = String> {
    Tool::builder()
        .name("echo")
        .description("Answer the text.")
        .read_only()
        .body(|input: Echo| async move {
            match input.text.as_str() {
                "fail" => Err("asked to fail".into()),
                "panic" => panic!("asked to panic"),
                "slow" => {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Ok(input.text)
                }
                _ => Ok(input.text),
            }
        })
        .build()
        .unwrap()
}

/// The value of the sample `name{labels..}` in Prometheus text `text` (labels
/// in any order); `None` when there is no such sample.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.rsplit_once(' '))
        .find(|(series, _)| {
            let Some(rest) = series.strip_prefix(name) else {
                return false;
            };
            let Some(inner) = rest.strip_prefix('{').and_then(|r| r.strip_suffix('}')) else {
                return labels.is_empty() && rest.is_empty();
            };
            let found: Vec<&str> = inner.split(',').collect();
            found.len() == labels.len()
                && labels
                    .iter()
                    .all(|(key, value)| found.contains(&format!("{key}=\"{value}\"").as_str()))
        })
        .and_then(|(_, value)| value.parse().ok())
}

/// Runs the known calls on a fresh recorder and returns its Prometheus text:
/// on `echo_metrics` 3 successes, 2 body errors, 1 panic; on `echo_metrics_timeout`
/// 1 call cancelled by the timeout outside; on `echo_timeout_metrics` 1 call
/// timed out inside.
fn scrape(toolset: &Toolset) -> String {
    let recorder: PrometheusRecorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            for text in ["a", "b", "c", "fail", "fail", "panic"] {
                let _ = toolset.call("echo_metrics", json!({"text": text})).await;
            }
            let err = toolset
                .call("echo_metrics_timeout", json!({"text": "slow"}))
                .await
                .unwrap_err();
            assert!(
                matches!(err, toolgraft::ToolError::TimedOut { .. }),
                "{err}"
            );
            let err = toolset
                .call("echo_timeout_metrics", json!({"text": "slow"}))
                .await
                .unwrap_err();
            assert!(
                matches!(err, toolgraft::ToolError::TimedOut { .. }),
                "{err}"
            );
        })
    });
    handle.render()
}

fn check(text: &str) {
    let calls = |tool: &str, outcome: &str| {
        sample(
            text,
            "toolgraft_tool_calls_total",
            &[("tool", tool), ("outcome", outcome)],
        )
    };
    let errors = |tool: &str, kind: &str| {
        sample(
            text,
            "toolgraft_tool_errors_total",
            &[("tool", tool), ("kind", kind)],
        )
    };
    let count = |tool: &str| {
        sample(
            text,
            "toolgraft_tool_call_duration_seconds_count",
            &[("tool", tool)],
        )
    };
    assert_eq!(calls("echo", "success"), Some(3.0), "{text}");
    assert_eq!(calls("echo", "error"), Some(3.0), "{text}");
    assert_eq!(errors("echo", "body"), Some(2.0), "{text}");
    assert_eq!(errors("echo", "panicked"), Some(1.0), "{text}");
    // The call the timeout outside dropped: cancelled, with no duration.
    assert_eq!(calls("echo", "cancelled"), Some(1.0), "{text}");
    assert_eq!(count("echo"), Some(6.0), "{text}");
    // Inside, the timeout's error is counted by kind, under its branch's name.
    assert_eq!(calls("echo_timeout", "error"), Some(1.0), "{text}");
    assert_eq!(errors("echo_timeout", "timed_out"), Some(1.0), "{text}");
    assert_eq!(calls("echo_timeout", "success"), None, "{text}");
    assert_eq!(count("echo_timeout"), Some(1.0), "{text}");
    // The slow call waited its minute on the paused clock: the timeout's 50 ms.
    let sum = sample(
        text,
        "toolgraft_tool_call_duration_seconds_sum",
        &[("tool", "echo_timeout")],
    )
    .unwrap();
    assert!((0.05..1.0).contains(&sum), "{sum}");
    assert!(
        text.contains("# HELP toolgraft_tool_calls_total"),
        "described: {text}"
    );
}

#[test]
fn the_prometheus_text_holds_the_numbers_of_known_calls() {
    let echo = echo();
    let toolset = Toolset::new();
    let timeout = Timeout::new(Duration::from_millis(50));
    toolset
        .bind((
            echo.combo().with(Metrics::default()).with(timeout),
            echo.combo().with(timeout).with(Metrics::default()),
        ))
        .unwrap();
    let text = scrape(&toolset);
    println!("{text}");
    check(&text);
}

#[test]
fn the_same_numbers_through_a_manifest() {
    let mut registry = Registry::new();
    registry
        .register(Metrics::default())
        .unwrap()
        .register(Configured::new(Timeout::new(Duration::from_secs(30))))
        .unwrap();
    let manifest = Manifest::from_value(&json!({"tools": {"echo": [
        ["metrics", {"name": "timeout", "config": {"ms": 50}}],
        [{"name": "timeout", "config": {"ms": 50}}, "metrics"],
    ]}}))
    .unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(&registry, &BaseTools::new().with(&echo()), &manifest);
    assert!(outcome[0].1.is_ok(), "{outcome:?}");
    check(&scrape(&toolset));
}
