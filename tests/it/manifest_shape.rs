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

#[test]
fn match_entries_read_the_same_from_json_and_toml() {
    let json = Manifest::from_json(
        r#"{"tools": {"fs_read_file": ["cache"]},
            "match": [{"prefix": "fs_", "annotations": {"readOnlyHint": false}, "combos": [["approve"]]},
                      {"annotations": {"readOnlyHint": true, "openWorldHint": false}, "combos": ["cache"]}]}"#,
    )
    .unwrap();
    let toml = Manifest::from_toml(
        r#"
        [tools]
        fs_read_file = ["cache"]

        [[match]]
        prefix = "fs_"
        annotations = { readOnlyHint = false }
        combos = [["approve"]]

        [[match]]
        annotations = { readOnlyHint = true, openWorldHint = false }
        combos = ["cache"]
        "#,
    )
    .unwrap();
    assert_eq!(json, toml);
    assert_eq!(json.matches.len(), 2);
    assert_eq!(json.matches[0].prefix.as_deref(), Some("fs_"));
    assert_eq!(json.matches[0].annotations.read_only, Some(false));
    assert_eq!(json.matches[1].prefix, None);
    assert_eq!(json.matches[1].annotations.open_world, Some(false));
    assert_eq!(json.matches[1].combos, [vec![ElementSpec::named("cache")]]);
}

#[test]
fn tools_may_be_left_out_when_match_is_given() {
    let manifest = Manifest::from_value(&json!({"match": [{"combos": ["trace"]}]})).unwrap();
    assert!(manifest.tools.is_empty());
    assert_eq!(manifest.matches.len(), 1);
    for bad in [json!({"match": {}}), json!({"match": "trace"})] {
        let err = Manifest::from_value(&bad).unwrap_err();
        assert!(
            matches!(err, ManifestError::TopLevel { .. }),
            "{bad}: {err}"
        );
        assert!(err.to_string().contains(r#"write "match": ["#), "{err}");
    }
}

#[test]
fn every_match_shape_error_names_the_entry_and_the_fix() {
    let cases = [
        (json!("trace"), "is \"trace\"", r#"write "match": ["#),
        (
            json!({"combos": ["trace"], "name": "x"}),
            "unexpected key `name`",
            r#"write "match": ["#,
        ),
        (
            json!({"prefix": "fs_"}),
            "has no `combos`",
            r#"write "match": ["#,
        ),
        (
            json!({"combos": []}),
            "has no combos",
            "or remove the entry",
        ),
        (
            json!({"combos": "trace"}),
            "expected a list of combos",
            r#"write ["trace"]"#,
        ),
        (
            json!({"combos": [[]]}),
            "combo 1 is empty",
            "list at least one extension",
        ),
        (
            json!({"combos": [[{"name": "x"}]]}),
            "element 1 of combo 1",
            "has no `config`",
        ),
        (
            json!({"prefix": 3, "combos": ["t"]}),
            "`prefix` of 3, not a string",
            r#"write "match": ["#,
        ),
        (
            json!({"prefix": "", "combos": ["t"]}),
            "empty `prefix`",
            "leave `prefix` out",
        ),
        (
            json!({"prefix": "x".repeat(129), "combos": ["t"]}),
            "longer than 128 bytes",
            "shorten it",
        ),
        (
            json!({"annotations": [], "combos": ["t"]}),
            "has `annotations` of []",
            r#"write "annotations""#,
        ),
        (
            json!({"annotations": {"readOnly": true}, "combos": ["t"]}),
            "unknown annotation `readOnly`",
            "readOnlyHint",
        ),
        (
            json!({"annotations": {"readOnlyHint": "yes"}, "combos": ["t"]}),
            "not a boolean",
            "readOnlyHint",
        ),
        (
            json!({"annotations": {"title": "T"}, "combos": ["t"]}),
            "not a condition",
            "match on readOnlyHint",
        ),
    ];
    for (entry, problem, fix) in cases {
        // The bad entry second, so its place is 1.
        let manifest = json!({"match": [{"combos": ["trace"]}, entry]});
        let err = Manifest::from_value(&manifest).unwrap_err();
        assert!(
            matches!(err, ManifestError::Match { entry: 1, .. }),
            "{manifest}: {err:?}"
        );
        let words = err.to_string();
        assert!(words.starts_with("match[1]: "), "{words}");
        assert!(words.contains(problem), "{problem} in {words}");
        assert!(words.contains(fix), "{fix} in {words}");
        assert_eq!(err.rule(), Some(toolgraft::rulebook::Rule::ManifestShape));
    }
}

#[test]
fn a_match_within_the_depth_limit_is_read_and_one_beyond_is_refused() {
    let mut deep = serde_json::Value::Null;
    for _ in 0..toolgraft::runtime::manifest::MAX_DEPTH {
        deep = json!([deep]);
    }
    let manifest = json!({"match": [{"combos": [[{"name": "a", "config": {"c": deep}}]]}]});
    assert!(matches!(
        Manifest::from_value(&manifest),
        Err(ManifestError::TooDeep { .. })
    ));
}
