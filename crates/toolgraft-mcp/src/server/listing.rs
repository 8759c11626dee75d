//! The `tools/list` answer: one listing per output shape for the toolset at one
//! version, shared by every session's server.

use std::sync::{Arc, PoisonError};

use rmcp::model::Tool;

use super::ToolsetServer;
use crate::outcome::UnknownArguments;
use crate::tool::{OutputShape, published_tool};

/// `tool`'s input schema, saying that it takes no property it does not name:
/// a schema that names its properties at its top and says nothing of others.
/// One that composes others (`oneOf`, `allOf`, `$ref`: closing its top would
/// refuse the properties its parts name) or takes more by a schema of its own
/// is left as it says, and so is what it takes.
fn close(tool: &mut Tool) {
    let schema = &tool.input_schema;
    let composed = ["oneOf", "anyOf", "allOf", "$ref", "unevaluatedProperties"]
        .iter()
        .any(|key| schema.contains_key(*key));
    if composed || !schema.contains_key("properties") || schema.contains_key("additionalProperties")
    {
        return;
    }
    Arc::make_mut(&mut tool.input_schema).insert(
        "additionalProperties".to_owned(),
        serde_json::Value::Bool(false),
    );
}

/// The listings of one toolset version (see [`ToolsetServer::list`]).
#[derive(Default)]
pub(super) struct Listings {
    version: u64,
    object_only: Option<Arc<Vec<Tool>>>,
    any_json: Option<Arc<Vec<Tool>>>,
}

impl<H> ToolsetServer<H> {
    /// Every published name as an MCP tool for a client on `shape`, sorted by
    /// name: the toolset's part of what `tools/list` returns.
    ///
    /// ```
    /// # use toolgraft::{Tool, Toolset};
    /// # use toolgraft::tool::BaseTool;
    /// # use toolgraft::ext::Trace;
    /// use toolgraft_mcp::{OutputShape, ToolsetServer};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
    /// # let shout = Tool::builder().name("shout").description("Return the text.")
    /// #     .body(|i: Shout| async move { Ok(i.text) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind((shout.combo().with(Trace),))?;
    /// let tools = ToolsetServer::new(toolset).list(OutputShape::AnyJson);
    /// assert_eq!(tools[1].name, "shout_trace");
    /// assert_eq!(tools[1].output_schema.as_ref().unwrap()["type"], "string");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn list(&self, shape: OutputShape) -> Vec<Tool> {
        // Copied outside the listings' lock, so sessions listing at once do not
        // wait for each other; the copy shares every schema (`Arc`): names and
        // descriptions only.
        Vec::clone(&self.listing(shape))
    }

    /// The listing for `shape` of the toolset as it is, built by the first list
    /// after a change and shared by every session until the next.
    pub(super) fn listing(&self, shape: OutputShape) -> Arc<Vec<Tool>> {
        // Read before the toolset: a listing built after a change is labelled with
        // the version before it at worst, and built again by the next list.
        let version = *self.changes.borrow();
        let mut listings = self.listings.lock().unwrap_or_else(PoisonError::into_inner);
        if listings.version != version {
            *listings = Listings {
                version,
                ..Listings::default()
            };
        }
        let slot = match shape {
            OutputShape::ObjectOnly => &mut listings.object_only,
            OutputShape::AnyJson => &mut listings.any_json,
        };
        slot.get_or_insert_with(|| {
            Arc::new(
                self.toolset
                    .published()
                    .iter()
                    .map(|published| {
                        let mut tool = published_tool(published, shape);
                        if self.unknown_arguments == UnknownArguments::Refuse {
                            close(&mut tool);
                        }
                        tool
                    })
                    .collect(),
            )
        })
        .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::ServerHandler as _;
    use toolgraft::Tool as BaseTool;
    use toolgraft::Toolset;
    use toolgraft::combo::StartCombo;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Shout {
        text: String,
    }

    fn shout(name: &str) -> impl toolgraft::tool::BaseTool {
        BaseTool::builder()
            .name(name)
            .description("Return the text.")
            .body(|input: Shout| async move { Ok(input.text) })
            .build()
            .unwrap()
    }

    // Sessions are the HTTP transport's.
    #[cfg(feature = "http")]
    #[test]
    fn every_session_shares_one_listing_until_the_toolset_changes() {
        let toolset = Toolset::new();
        toolset.bind((shout("shout").combo(),)).unwrap();
        let server = ToolsetServer::new(toolset.clone());
        let session = server.fresh();
        let first = server.list(OutputShape::AnyJson);
        let again = session.list(OutputShape::AnyJson);
        // One copy of each schema, whoever lists: no schema is copied per list.
        assert!(Arc::ptr_eq(&first[0].input_schema, &again[0].input_schema));
        let older = session.list(OutputShape::ObjectOnly);
        assert_eq!(older.len(), 1);

        toolset.bind((shout("echo").combo(),)).unwrap();
        let after = session.list(OutputShape::AnyJson);
        let names: Vec<_> = after.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(names, ["echo", "shout"]);
        assert_eq!(server.list(OutputShape::ObjectOnly).len(), 2);
    }

    #[test]
    fn a_tool_is_looked_up_in_the_shared_listing() {
        let toolset = Toolset::new();
        for name in ["b", "a", "c_d", "c"] {
            toolset.bind((shout(name).combo(),)).unwrap();
        }
        let server = ToolsetServer::new(toolset.clone());
        let listed = server.list(OutputShape::AnyJson);
        for tool in &listed {
            let found = server.get_tool(&tool.name).expect("a listed name is found");
            assert_eq!(found.name, tool.name);
            assert!(Arc::ptr_eq(&found.input_schema, &tool.input_schema));
        }
        for missing in ["", "c_", "d", "A"] {
            assert!(server.get_tool(missing).is_none(), "{missing}");
        }
        toolset.bind((shout("e").combo(),)).unwrap();
        assert!(
            server.get_tool("e").is_some(),
            "a name bound later is found"
        );
    }
}
