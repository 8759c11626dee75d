//! Request bodies: JSON objects whose combos are written as in a manifest, checked
//! before anything else (the first step of every change).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use serde_json::{Map, Value, json};
use toolgraft::error::{shorten, shorten_json};
use toolgraft::runtime::manifest::{ComboSpec, Manifest};

use crate::problem::Problem;

/// The largest request body the API reads (combos are small; a manifest's config
/// rarely passes a few kilobytes).
pub const MAX_BODY: usize = 256 * 1024;

/// The body as a JSON object: sent as `application/json` (which a cross-site HTML
/// form cannot send), within the size limit, and an object.
pub(crate) fn object(
    headers: &HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Map<String, Value>, Problem> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the body as JSON, with `Content-Type: application/json`",
        ));
    }
    let bytes = bytes.map_err(|rejection| {
        Problem::new(
            rejection.status(),
            format!(
                "the body could not be read: {} (at most {} bytes)",
                rejection.body_text(),
                MAX_BODY
            ),
        )
    })?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|err| {
        Problem::bad_request(format!(
            "the body is not JSON: {}",
            shorten(&err.to_string())
        ))
    })?;
    match value {
        Value::Object(object) => Ok(object),
        other => Err(Problem::bad_request(format!(
            "the body must be a JSON object, not {}",
            shorten_json(&other)
        ))),
    }
}

/// The keys of `object` are among `allowed`.
fn only(object: &Map<String, Value>, allowed: &[&str]) -> Result<(), Problem> {
    match object.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => {
            let listed: Vec<String> = allowed.iter().map(|key| format!("`{key}`")).collect();
            Err(Problem::bad_request(format!(
                "unexpected key `{}` in the body; it takes {}",
                shorten(key),
                listed.join(" and ")
            )))
        }
        None => Ok(()),
    }
}

/// `PUT`'s body: `{"combos": [...]}`; an empty list clears.
pub(crate) fn replacement(
    tool: &str,
    object: &Map<String, Value>,
) -> Result<Vec<ComboSpec>, Problem> {
    only(object, &["combos"])?;
    let combos = object.get("combos").ok_or_else(|| {
        Problem::bad_request(
            r#"the body has no `combos`; write {"combos": [["trace", "cache"], ["pool"]]}, or {"combos": []} for none"#,
        )
    })?;
    combos_of(tool, "combos", combos)
}

/// `POST`'s body: `{"add": [...], "remove": [...]}`, at least one combo in all.
pub(crate) fn edit(
    tool: &str,
    object: &Map<String, Value>,
) -> Result<(Vec<ComboSpec>, Vec<ComboSpec>), Problem> {
    only(object, &["add", "remove"])?;
    let list = |key: &str| match object.get(key) {
        Some(value) => combos_of(tool, key, value),
        None => Ok(Vec::new()),
    };
    let (add, remove) = (list("add")?, list("remove")?);
    if add.is_empty() && remove.is_empty() {
        return Err(Problem::bad_request(
            r#"nothing to change; write {"add": [["trace", "cache"]], "remove": [["pool"]]} (either list may be left out)"#,
        ));
    }
    Ok((add, remove))
}

/// A list of combos in the manifest's shape (a flat list is one combo); an empty
/// list is none.
fn combos_of(tool: &str, key: &str, value: &Value) -> Result<Vec<ComboSpec>, Problem> {
    if value.as_array().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let manifest = Manifest::from_value(&json!({ "tools": { tool: value } }))
        .map_err(|err| Problem::bad_request(format!("`{key}`: {err}")).with_rule(err.rule()))?;
    Ok(manifest
        .tools
        .into_iter()
        .next()
        .map(|(_, combos)| combos)
        .unwrap_or_default())
}

/// A combo as a manifest writes it: `"trace"` for a bare name, `{"name", "config"}`
/// with config, and `"pin"` beside them with pinned params.
pub(crate) fn combo_value(combo: &ComboSpec) -> Value {
    Value::Array(
        combo
            .iter()
            .map(|element| {
                let config = element.config.as_ref().filter(|config| !config.is_empty());
                let pin = element.pin.as_ref().filter(|pins| !pins.is_empty());
                match (config, pin) {
                    (None, None) => Value::String(element.name.clone()),
                    (Some(config), None) => json!({"name": element.name, "config": config}),
                    (None, Some(pin)) => json!({"name": element.name, "pin": pin}),
                    (Some(config), Some(pin)) => {
                        json!({"name": element.name, "config": config, "pin": pin})
                    }
                }
            })
            .collect(),
    )
}

/// A tool's combos as a manifest writes them.
pub(crate) fn combos_value(combos: &[ComboSpec]) -> Value {
    Value::Array(combos.iter().map(combo_value).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgraft::runtime::manifest::{ElementSpec, Manifest};

    use super::combo_value;

    #[test]
    fn a_combo_is_written_back_with_its_config_and_pins_and_reads_the_same() {
        let combo = vec![
            ElementSpec::named("trace"),
            ElementSpec::named("cache").with_pins(json!({"exp": 60})),
            ElementSpec::configured("batch", json!({"max_items": 5})).with_pins(json!({"x": 1})),
        ];
        let written = combo_value(&combo);
        assert_eq!(
            written,
            json!(["trace", {"name": "cache", "pin": {"exp": 60}},
                   {"name": "batch", "config": {"max_items": 5}, "pin": {"x": 1}}])
        );
        let read = Manifest::from_value(&json!({"tools": {"t": [written]}})).unwrap();
        assert_eq!(read.tools[0].1[0], combo);
    }
}
