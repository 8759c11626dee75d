//! `--upstream URL`: the suite's tools served through an upstream connection.
//! Another `everything` (or any server of the suite's tools) at `URL` is the
//! upstream; each of its tools is bound here under its own name with `trace`
//! on it, its `trace` branch published in its place, and the toolset is kept
//! in step with the upstream's list (its `test_trigger_tool_change` changes
//! it on each call).

use std::error::Error;

use serde_json::{Map, json};
use toolgraft::Registry;
use toolgraft::ext::Trace;
use toolgraft::prelude::*;
use toolgraft::runtime::manifest::Manifest;
use toolgraft::tool::BaseTool;
use toolgraft_mcp::task::{TaskSettingError, Tasks};
use toolgraft_mcp::upstream::{Endpoint, Upstream, UpstreamConfig};

/// The upstream's tools, bound and followed; the upstream is kept as long as
/// the returned handle lives.
pub async fn toolset(url: &str) -> Result<(Toolset, Upstream), Box<dyn Error>> {
    let upstream = Upstream::connect(UpstreamConfig::new("", Endpoint::http(url))).await?;
    let mut tools = Map::new();
    for tool in upstream.tools() {
        let name = tool.spec().name.to_string();
        let served = format!("{name}_trace");
        tools.insert(
            name.clone(),
            json!({"combos": [["trace"]], "publish": {name: served}}),
        );
    }
    let manifest = Manifest::from_value(&json!({ "tools": tools }))?;
    let mut registry = Registry::new();
    registry.register(Trace)?;
    let toolset = Toolset::new();
    let mirror = upstream.mirror(&toolset, registry, manifest);
    for (tool, outcome) in &mirror.latest().outcomes {
        if let Err(error) = outcome {
            return Err(format!("{tool}: {error}").into());
        }
    }
    for refused in &mirror.latest().refused {
        eprintln!("everything: {refused}");
    }
    Ok((toolset, upstream))
}

/// The direct server's tasks policy, and its relocated names (which take a
/// task there by default) allowed one here: behind the upstream connection
/// none of them is relocated in this process.
pub fn policy() -> Result<Tasks, TaskSettingError> {
    Ok(crate::tasks::policy()?
        .allow("slow_compute")
        .allow("confirm_delete")
        .allow("multi_input")
        .allow("test_tool_with_progress")
        .allow("wipe"))
}
