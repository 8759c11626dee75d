//! The identity of a combo element: an extension name with its config, as the
//! engine compares elements (and a manifest writes them).

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{shorten, shorten_json};

/// One element of a combo: an extension name, with author config or not.
///
/// ```
/// use toolgraft::runtime::manifest::ElementSpec;
/// let plain = ElementSpec::named("trace");
/// assert_eq!(plain.to_string(), "trace");
/// let configured = ElementSpec::configured("batch", serde_json::json!({"max_items": 5}));
/// assert_eq!(configured.to_string(), r#"batch{"max_items":5}"#);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ElementSpec {
    /// The registered extension name.
    pub name: String,
    /// Author config, closed over at bind time; `None` when the element is a bare
    /// name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<Map<String, Value>>,
    /// Reserved params the operator pins: not advertised to the model, refused
    /// from it, and passed with these values on every call
    /// ([reserved-params](crate::rulebook#reserved-params)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pin: Option<Map<String, Value>>,
    /// Reserved params the operator hides: not advertised to the model, refused
    /// from it, and left out of every call, so the layer uses its default
    /// ([reserved-params](crate::rulebook#reserved-params)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hide: Option<Vec<String>>,
}

impl ElementSpec {
    /// A bare extension name.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            config: None,
            pin: None,
            hide: None,
        }
    }

    /// The element with its reserved params `params` hidden by the operator:
    /// not advertised to the model, refused from it as a pinned param is, and
    /// left out of every call, so the layer uses its default (a manifest writes
    /// `{"name": "cache", "hide": ["exp"]}`).
    ///
    /// ```
    /// use toolgraft::runtime::manifest::ElementSpec;
    /// let hidden = ElementSpec::named("cache").with_hidden(["exp"]);
    /// assert_eq!(hidden.to_string(), r#"cache hide["exp"]"#);
    /// ```
    pub fn with_hidden<P: Into<String>>(mut self, params: impl IntoIterator<Item = P>) -> Self {
        self.hide = Some(params.into_iter().map(Into::into).collect());
        self
    }

    /// The element with its reserved params in `pins` pinned by the operator:
    /// not advertised to the model, refused from it, and passed with these
    /// values on every call.
    ///
    /// ```
    /// use toolgraft::runtime::manifest::ElementSpec;
    /// let pinned = ElementSpec::named("cache").with_pins(serde_json::json!({"exp": 60}));
    /// assert_eq!(pinned.to_string(), r#"cache pin{"exp":60}"#);
    /// ```
    ///
    /// # Panics
    ///
    /// If `pins` is not a JSON object (a manifest with one is refused with an
    /// error).
    pub fn with_pins(mut self, pins: Value) -> Self {
        match pins {
            Value::Object(pins) => self.pin = Some(pins),
            other => panic!("an element's pins are a JSON object, not {other}"),
        }
        self
    }

    /// An extension with config.
    ///
    /// # Panics
    ///
    /// If `config` is not a JSON object: config is a mapping, and writing anything
    /// else in code is a bug (manifests with one are refused with an error).
    pub fn configured(name: impl Into<String>, config: Value) -> Self {
        match config {
            Value::Object(config) => Self {
                name: name.into(),
                config: Some(config),
                pin: None,
                hide: None,
            },
            other => panic!("an element's config is a JSON object, not {other}"),
        }
    }
}

impl fmt::Display for ElementSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = shorten(&self.name);
        match &self.config {
            Some(config) if !config.is_empty() => write!(f, "{name}{}", shorten_json(config))?,
            _ => f.write_str(&name)?,
        }
        if let Some(pins) = self.pin.as_ref().filter(|pins| !pins.is_empty()) {
            write!(f, " pin{}", shorten_json(pins))?;
        }
        match &self.hide {
            Some(hidden) if !hidden.is_empty() => {
                let hidden = Value::from(hidden.clone());
                write!(f, " hide{}", shorten_json(&hidden))
            }
            _ => Ok(()),
        }
    }
}

/// An ordered, non-empty list of elements: `[a, b]` binds `b(a(tool))`.
pub type ComboSpec = Vec<ElementSpec>;
