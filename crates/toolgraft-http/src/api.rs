//! The JSON endpoints: reading bound names and combos, and changing a tool's combos
//! (checked in order: body, tool, membership, binding engine; then written back).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use toolgraft::Name;
use toolgraft::error::shorten;
use toolgraft::kind::ExtensionKind;
use toolgraft::rulebook::Rule;
use toolgraft::runtime::manifest::ComboSpec;
use toolgraft::schema::Schema;
use toolgraft::toolset::{Site, ToolInfo};

use crate::body;
use crate::problem::Problem;
use crate::state::{Shared, State as Inner};
use crate::writeback::{self, ManifestText};

/// One bound name as `GET /tools` lists it.
#[derive(Serialize)]
pub(crate) struct BoundName {
    pub name: Name,
    pub base: Name,
    pub branch: bool,
    pub description: String,
    /// The extensions applied to the base, innermost first, each with where it runs.
    pub layers: Vec<LayerView>,
    /// Where the tool body runs.
    pub body_runs: Site,
    pub input_schema: Arc<Schema>,
    pub output_schema: Option<Arc<Schema>>,
}

#[derive(Serialize)]
pub(crate) struct LayerView {
    pub extension: Name,
    pub kind: ExtensionKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    pub runs: Site,
}

impl From<ToolInfo> for BoundName {
    fn from(info: ToolInfo) -> Self {
        let layers = info
            .chain
            .iter()
            .zip(info.sites())
            .map(|(link, runs)| LayerView {
                extension: link.extension.clone(),
                kind: link.kind,
                config: link.config.clone(),
                runs,
            })
            .collect();
        Self {
            branch: info.is_branch(),
            body_runs: info.body_site(),
            name: info.name,
            base: info.base,
            description: info.description,
            layers,
            input_schema: info.input_schema,
            output_schema: info.output_schema,
        }
    }
}

pub(crate) fn json(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_string(value) {
        Ok(text) => (status, [(header::CONTENT_TYPE, "application/json")], text).into_response(),
        Err(err) => Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the answer could not be written as JSON: {err}"),
        )
        .into_response(),
    }
}

/// `GET /tools`.
pub(crate) async fn tools(State(state): State<Shared>) -> Response {
    let tools: Vec<BoundName> = state.toolset.tools().into_iter().map(Into::into).collect();
    json(StatusCode::OK, &tools)
}

/// What `GET /tools/{name}/extensions` answers, and every change too.
fn document(state: &Inner, tool: &str) -> Result<Response, Problem> {
    let combos = state.toolset.combos(tool)?;
    let names: Vec<Name> = state
        .toolset
        .tools()
        .into_iter()
        .filter(|info| info.base.as_str() == tool)
        .map(|info| info.name)
        .collect();
    Ok(json(
        StatusCode::OK,
        &json!({
            "tool": tool,
            "combos": body::combos_value(&combos),
            "names": names,
            "catalogue": state.registry.catalogue(),
        }),
    ))
}

fn tool_name(path: Result<Path<String>, PathRejection>) -> Result<String, Problem> {
    path.map(|Path(name)| name)
        .map_err(|rejection| Problem::bad_request(rejection.body_text()))
}

/// `GET /tools/{name}/extensions`.
pub(crate) async fn extensions(
    State(state): State<Shared>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, Problem> {
    document(&state, &tool_name(path)?)
}

/// `PUT /tools/{name}/extensions`.
pub(crate) async fn replace(
    State(state): State<Shared>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let tool = tool_name(path)?;
    let object = body::object(&headers, bytes)?;
    let combos = body::replacement(&tool, &object)?;
    change(&state, &tool, Change::Replace(combos)).await
}

/// `DELETE /tools/{name}/extensions`.
pub(crate) async fn clear(
    State(state): State<Shared>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, Problem> {
    let tool = tool_name(path)?;
    change(&state, &tool, Change::Replace(Vec::new())).await
}

/// `POST /tools/{name}/extensions/combos`.
pub(crate) async fn edit(
    State(state): State<Shared>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let tool = tool_name(path)?;
    let object = body::object(&headers, bytes)?;
    let (add, remove) = body::edit(&tool, &object)?;
    change(&state, &tool, Change::Edit { add, remove }).await
}

/// Anything else.
pub(crate) async fn not_found() -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "no such endpoint; see GET /tools and /tools/{name}/extensions",
    )
}

enum Change {
    Replace(Vec<ComboSpec>),
    Edit {
        add: Vec<ComboSpec>,
        remove: Vec<ComboSpec>,
    },
}

/// Applies a change live and writes it to the manifest file, or refuses it and
/// changes nothing.
async fn change(state: &Shared, tool: &str, change: Change) -> Result<Response, Problem> {
    let _one_at_a_time = state.changing.lock().await;
    // The tool: unknown (404) or a branch (refused, naming its base).
    let before = state.toolset.combos(tool)?;
    let file = match &state.manifest {
        Some(path) => {
            let path = path.clone();
            let file = blocking(move || ManifestText::read(&path))
                .await
                .map_err(|problem| {
                    Problem::new(
                        problem.status,
                        format!("{}; nothing changed", problem.error),
                    )
                })?;
            let added = match &change {
                Change::Replace(combos) => combos,
                Change::Edit { add, .. } => add,
            };
            writeback::representable(file.format, added)
                .map_err(|problem| Problem::bad_request(problem).with_rule(Rule::ManifestShape))?;
            Some(file)
        }
        None => None,
    };
    // Membership, then the binding engine: all or nothing.
    let edit = match &change {
        Change::Replace(combos) => state.toolset.edit().replace(&state.registry, tool, combos),
        Change::Edit { add, remove } => {
            let edit = remove
                .iter()
                .fold(state.toolset.edit(), |edit, combo| edit.detach(tool, combo));
            add.iter().fold(edit, |edit, combo| {
                edit.attach(&state.registry, tool, combo)
            })
        }
    };
    edit.commit()?;
    if let Some(file) = file {
        let after = state.toolset.combos(tool)?;
        let name = tool.to_owned();
        let written = blocking(move || {
            let text = file.with_tool(&name, &after)?;
            writeback::write_atomically(&file.path, &text).map_err(|err| {
                format!(
                    "the manifest file {} could not be written: {err}",
                    file.path.display()
                )
            })
        })
        .await;
        if let Err(problem) = written {
            // The file is what a restart binds: undo the live change to match it.
            let undone = state
                .toolset
                .edit()
                .replace(&state.registry, tool, &before)
                .commit();
            let error = match undone {
                Ok(()) => format!("{}; the change was undone", problem.error),
                Err(err) => format!(
                    "{}; undoing the change failed too ({}), so the live combos differ from the file",
                    problem.error,
                    shorten(&err.to_string())
                ),
            };
            return Err(Problem::new(StatusCode::INTERNAL_SERVER_ERROR, error));
        }
    }
    document(state, tool)
}

/// Runs file work off the async threads; its error is a 500.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, Problem> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|err| Err(format!("the file work failed: {err}")))
        .map_err(|problem| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, problem))
}
