//! Kinds are data (scenario 1).

use toolgraft::kind::{Backend, ExtensionKind, Kind, Transformer, Wrapper};

#[test]
fn every_property_row_of_the_spec_holds() {
    use ExtensionKind::*;
    // (kind, multiple, preserves_schema, declares_schema, relocates_execution, preserves_output_shape)
    let table = [
        (Wrapper, true, true, false, false, true),
        (Transformer, true, false, true, false, false),
        (Backend, false, false, false, true, true),
    ];
    for (kind, multiple, preserves, declares, relocates, output) in table {
        assert_eq!(kind.multiple(), multiple, "{kind}.multiple");
        assert_eq!(
            kind.preserves_schema(),
            preserves,
            "{kind}.preserves_schema"
        );
        assert_eq!(kind.declares_schema(), declares, "{kind}.declares_schema");
        assert_eq!(
            kind.relocates_execution(),
            relocates,
            "{kind}.relocates_execution"
        );
        assert_eq!(
            kind.preserves_output_shape(),
            output,
            "{kind}.preserves_output_shape"
        );
    }
    assert!(!ExtensionKind::Backend.multiple());
}

#[test]
fn markers_carry_the_same_properties_as_the_enum() {
    fn row<K: Kind>() -> (ExtensionKind, [bool; 5]) {
        (
            K::KIND,
            [
                K::MULTIPLE,
                K::PRESERVES_SCHEMA,
                K::DECLARES_SCHEMA,
                K::RELOCATES_EXECUTION,
                K::PRESERVES_OUTPUT_SHAPE,
            ],
        )
    }
    for (kind, props) in [row::<Wrapper>(), row::<Transformer>(), row::<Backend>()] {
        let expected = [
            kind.multiple(),
            kind.preserves_schema(),
            kind.declares_schema(),
            kind.relocates_execution(),
            kind.preserves_output_shape(),
        ];
        assert_eq!(props, expected, "{kind}");
    }
}

#[test]
fn kinds_parse_and_print_as_lowercase_strings_only() {
    assert_eq!(
        "backend".parse::<ExtensionKind>(),
        Ok(ExtensionKind::Backend)
    );
    for kind in ExtensionKind::iter() {
        assert_eq!(kind.as_str().parse::<ExtensionKind>(), Ok(kind));
        assert_eq!(kind.to_string(), kind.as_str());
    }
    for bad in ["BACKEND", "back end", "Backend", "", " backend"] {
        let err = bad.parse::<ExtensionKind>().unwrap_err();
        assert_eq!(err.input, bad);
        assert!(
            err.to_string()
                .contains("expected `wrapper`, `transformer` or `backend`")
        );
    }
}

#[test]
fn serde_round_trips_the_lowercase_string() {
    for kind in ExtensionKind::iter() {
        let json = serde_json::to_string(&kind).unwrap();
        assert_eq!(json, format!("\"{}\"", kind.as_str()));
        assert_eq!(serde_json::from_str::<ExtensionKind>(&json).unwrap(), kind);
    }
    assert!(serde_json::from_str::<ExtensionKind>("\"BACKEND\"").is_err());
}

#[test]
fn all_kinds_are_listed_once_in_declaration_order() {
    let kinds: Vec<_> = ExtensionKind::iter().collect();
    assert_eq!(kinds, ExtensionKind::ALL);
    assert_eq!(
        kinds,
        [
            ExtensionKind::Wrapper,
            ExtensionKind::Transformer,
            ExtensionKind::Backend
        ]
    );
}
