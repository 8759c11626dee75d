//! Rule `manifest-shape` (scenarios 27, 28).

use serde_json::json;
use toolgraft::runtime::manifest::{ElementSpec, Manifest, ManifestError};

fn parse(value: serde_json::Value) -> Result<Manifest, ManifestError> {
    Manifest::from_value(&json!({ "tools": value }))
}

#[test]
fn a_flat_list_is_one_combo() {
    // `["chain"]` is one combo, the same as `[["chain"]]`.
    let flat = parse(json!({"weather": ["chain"]})).unwrap();
    let nested = parse(json!({"weather": [["chain"]]})).unwrap();
    assert_eq!(flat, nested);
    assert_eq!(
        flat.tools,
        [(
            "weather".to_owned(),
            vec![vec![ElementSpec::named("chain")]]
        )]
    );
}

#[test]
fn elements_are_names_or_name_and_config() {
    let manifest = parse(json!({
        "weather": [["cache", "batch"], [{"name": "output_schema", "config": {"schema": {"type": "object"}}}]],
        "search": ["trace"],
    }))
    .unwrap();
    assert_eq!(manifest.tools.len(), 2);
    let (tool, combos) = &manifest.tools[0];
    assert_eq!(tool, "weather");
    assert_eq!(
        combos[0],
        [ElementSpec::named("cache"), ElementSpec::named("batch")]
    );
    assert_eq!(
        combos[1],
        [ElementSpec::configured(
            "output_schema",
            json!({"schema": {"type": "object"}})
        )]
    );
    // Empty config is config too (and fine where config is not accepted).
    let empty = parse(json!({"search": [{"name": "trace", "config": {}}]})).unwrap();
    assert_eq!(empty.tools[0].1[0][0].config, Some(serde_json::Map::new()));
}

#[test]
fn every_shape_error_names_the_tool_key_and_the_fix() {
    // Each malformed entry (not a list, no combos, an empty combo, ..) is refused
    // naming the tool key and the fix.
    let cases = [
        (
            json!({"x": "chain"}),
            "expected a list of combos",
            r#"write ["chain"] for one combo"#,
        ),
        (json!({"x": []}), "has no combos", "write at least one"),
        (
            json!({"x": [[]]}),
            "combo 1 is empty",
            "list at least one extension",
        ),
        (
            json!({"x": ["chain", ["batch"]]}),
            "mixes extensions and combos",
            r#"[["a"], ["b"]] for several"#,
        ),
        (
            json!({"x": [["chain", 1]]}),
            "element 2 of combo 1 is 1",
            "an element is an extension name",
        ),
        (
            json!({"x": [{"config": {}}]}),
            "has no `name`",
            "an element is an extension name",
        ),
        (
            json!({"x": [{"name": "a"}]}),
            "has no `config` mapping",
            r#"write "a" alone"#,
        ),
        (
            json!({"x": [{"name": "a", "config": {}, "extra": 1}]}),
            "unexpected key `extra`",
            r#"{"name": "cache", "config": {...}}"#,
        ),
        (
            json!({"x": [{"name": "a", "config": [1]}]}),
            "`config` that is not a mapping",
            "an element is",
        ),
        (json!({"x": [""]}), "is an empty name", "an element is"),
    ];
    for (tools, problem, fix) in cases {
        let err = parse(tools.clone()).unwrap_err();
        match &err {
            ManifestError::Shape { tool, .. } => assert_eq!(tool, "x", "{tools}"),
            other => panic!("{tools}: expected a shape error, got {other:?}"),
        }
        let message = err.to_string();
        assert!(message.starts_with("tool `x`: "), "{message}");
        assert!(message.contains(problem), "{tools}: {message}");
        assert!(message.contains(fix), "{tools}: {message}");
    }
}

#[test]
fn the_top_level_must_be_tools_only() {
    for bad in [
        json!([]),
        json!({}),
        json!({"tools": []}),
        json!({"tools": {}, "extra": 1}),
    ] {
        assert!(
            matches!(
                Manifest::from_value(&bad),
                Err(ManifestError::TopLevel { .. })
            ),
            "{bad}"
        );
    }
    assert_eq!(
        Manifest::from_value(&json!({"tools": {}}))
            .unwrap()
            .tools
            .len(),
        0
    );
}

#[test]
fn json_and_toml_read_the_same() {
    let json = Manifest::from_json(
        r#"{"tools": {"a": [["x", {"name": "y", "config": {"n": 1}}]], "b": ["z"]}}"#,
    )
    .unwrap();
    let toml = Manifest::from_toml(
        r#"
        [tools]
        a = [["x", { name = "y", config = { n = 1 } }]]
        b = ["z"]
        "#,
    )
    .unwrap();
    assert_eq!(json, toml);
    assert!(matches!(
        Manifest::from_json("{"),
        Err(ManifestError::Syntax { format: "JSON", .. })
    ));
    assert!(matches!(
        Manifest::from_toml("tools = ["),
        Err(ManifestError::Syntax { format: "TOML", .. })
    ));
}

#[test]
fn files_load_by_extension() {
    let dir = std::env::temp_dir().join(format!("toolgraft-manifest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("m.json");
    std::fs::write(&json, r#"{"tools": {"a": ["x"]}}"#).unwrap();
    assert_eq!(Manifest::load(&json).unwrap().tools[0].0, "a");
    let yaml = dir.join("m.yaml");
    std::fs::write(&yaml, "tools: {}").unwrap();
    assert!(matches!(
        Manifest::load(&yaml),
        Err(ManifestError::File { .. })
    ));
    assert!(matches!(
        Manifest::load(dir.join("missing.json")),
        Err(ManifestError::File { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An access policy's `when` is CEL with toolgraft's `cel` feature; without it,
/// the manifest is refused saying to enable the feature (not an unknown field).
#[test]
fn an_access_when_needs_the_cel_feature() {
    let read = Manifest::from_json(
        r#"{"tools": {"notes": {"combos": [], "access": {"notes": {"when": "claims.tenant == 'acme'"}}}}}"#,
    );
    if cfg!(feature = "cel") {
        let manifest = read.unwrap();
        let when = manifest.access[0].1[0].1.when.as_ref().unwrap();
        assert_eq!(when.source(), "claims.tenant == 'acme'");
    } else {
        let words = read.unwrap_err().to_string();
        assert!(words.starts_with("tool `notes`"), "{words}");
        assert!(words.contains("toolgraft's `cel` feature"), "{words}");
        assert!(!words.contains("unknown field"), "{words}");
    }
}
