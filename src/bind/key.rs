//! A combo's identity as a manifest writes it: an empty config is no config.

use serde_json::{Map, Value};

use super::element::{ComboSpec, ElementSpec};

/// Whether `spec` is the combo `key` (a [`combo_key`]), without making its key.
pub(crate) fn is_combo(key: &[ElementSpec], spec: &[ElementSpec]) -> bool {
    key.len() == spec.len()
        && key.iter().zip(spec).all(|(key, element)| {
            key.name == element.name
                && key.config.as_ref()
                    == element.config.as_ref().filter(|config| !config.is_empty())
                && key.pin.as_ref() == element.pin.as_ref().filter(|pins| !pins.is_empty())
                && key.hide.as_ref() == element.hide.as_ref().filter(|hide| !hide.is_empty())
        })
}

/// Config as written, for identity and rule `config`: an empty mapping is no config.
pub(crate) fn written_config(config: Option<&Value>) -> Option<Map<String, Value>> {
    match config? {
        Value::Object(map) if !map.is_empty() => Some(map.clone()),
        Value::Object(_) | Value::Null => None,
        other => Some(Map::from_iter([("value".to_owned(), other.clone())])),
    }
}

/// The identity of a combo as a manifest writes it: an empty config is no config.
pub(crate) fn combo_key(elements: &[ElementSpec]) -> ComboSpec {
    elements
        .iter()
        .map(|element| ElementSpec {
            name: element.name.clone(),
            config: element
                .config
                .as_ref()
                .filter(|config| !config.is_empty())
                .cloned(),
            pin: element
                .pin
                .as_ref()
                .filter(|pins| !pins.is_empty())
                .cloned(),
            hide: element
                .hide
                .as_ref()
                .filter(|hide| !hide.is_empty())
                .cloned(),
        })
        .collect()
}
