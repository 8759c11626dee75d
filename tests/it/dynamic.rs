//! The run-time path: registry, manifest binding, the same rules as typed errors,
//! live changes (scenarios 2, 3, 4 to 12, 17 to 21, 25, 26, 33).

use crate::common;

use common::{describing, marker, ping, report, shout};
use serde_json::{Value, json};
use toolgraft::combo::StartCombo;
use toolgraft::ext::chain::{ChainError, ChainErrorKind};
use toolgraft::ext::output_schema::OutputSchemaError;
use toolgraft::ext::{Batch, Cache, Chain, OutputSchema, Pool, Proxy, Trace, proxy};
use toolgraft::kind::ExtensionKind;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::{ComboSpec, ElementSpec, Manifest};
use toolgraft::runtime::{DynBranch, DynExtension, DynStack, RegistryError};
use toolgraft::toolset::BaseTools;
use toolgraft::{BindError, Name, Registry, Stack, ToolError, Toolset};

/// A registry with the test catalogue: markers `a`, `b`, `a_b`, the built-ins, two
/// pools, and a describing marker.
fn registry() -> Registry {
    let mut registry = Registry::new();
    for name in ["a", "b", "a_b", "loud_marker"] {
        registry.register(marker(name)).unwrap();
    }
    registry
        .register(describing("first"))
        .unwrap()
        .register(describing("second"))
        .unwrap()
        .register(Trace)
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(Configured::new(Batch::default()))
        .unwrap()
        .register(Configured::new(Proxy::allow(["egress-a", "egress-b"])))
        .unwrap()
        .register(Pool::new(1).unwrap())
        .unwrap()
        .register(Pool::new(1).unwrap().with_name("other_backend"))
        .unwrap()
        .register(Configured::<OutputSchema>::named("output_schema"))
        .unwrap();
    registry
}

fn manifest(tools: Value) -> Manifest {
    Manifest::from_value(&json!({ "tools": tools })).unwrap()
}

/// Binds `shout` with the manifest's combos for it; the error, if any.
fn bind_shout(registry: &Registry, combos: Value) -> (Toolset, Result<(), BindError>) {
    let toolset = Toolset::new();
    let mut outcome = toolset.bind_manifest(
        registry,
        &BaseTools::new().with(&shout()),
        &manifest(json!({ "shout": combos })),
    );
    assert_eq!(outcome.len(), 1);
    (toolset, outcome.remove(0).1)
}

fn refused(registry: &Registry, combos: Value) -> BindError {
    let (toolset, result) = bind_shout(registry, combos.clone());
    let err = result
        .err()
        .unwrap_or_else(|| panic!("{combos} was accepted"));
    assert!(
        toolset.names().is_empty(),
        "{combos}: nothing of `shout` is bound (rule `all-or-nothing`)"
    );
    err
}

#[test]
fn the_catalogue_lists_names_and_lowercase_kinds_sorted() {
    // The catalogue: every registered name with its kind, in lower case, sorted by name.
    let mut registry = Registry::new();
    registry.register(Trace).unwrap();
    registry
        .register(Configured::new(Batch::default()))
        .unwrap();
    registry.register(Pool::new(1).unwrap()).unwrap();
    assert_eq!(
        serde_json::to_value(registry.catalogue()).unwrap(),
        json!([
            {"name": "batch", "kind": "transformer"},
            {"name": "pool", "kind": "backend"},
            {"name": "trace", "kind": "wrapper"},
        ])
    );
}

#[tokio::test]
async fn registering_a_name_twice_is_refused_and_the_first_stays_usable() {
    // A second `cache` is refused, and the first one still binds and runs.
    let mut registry = Registry::new();
    registry
        .register(Configured::new(Cache::default()))
        .unwrap();
    let err = registry
        .register(Configured::new(Cache::with_capacity(2)))
        .unwrap_err();
    assert!(matches!(err, RegistryError::AlreadyRegistered { ref name } if name == "cache"));
    assert!(err.to_string().contains("already registered"));
    let (toolset, result) = bind_shout(&registry, json!(["cache"]));
    result.unwrap();
    assert_eq!(
        toolset
            .call("shout_cache", json!({"text": "hi", "exp": 5}))
            .await
            .unwrap(),
        json!("hi")
    );
}

#[tokio::test]
async fn manifest_combos_bind_one_branch_per_prefix() {
    // A combo binds one branch per prefix (`[a, b]` binds `shout_a` and `shout_a_b`),
    // a prefix two combos share binds once, and separate combos do not compose.
    let registry = registry();
    let (toolset, result) = bind_shout(&registry, json!([["a"], ["a", "b"]]));
    result.unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_a", "shout_a_b"]);
    assert_eq!(
        toolset
            .call("shout_a_b", json!({"text": "hi"}))
            .await
            .unwrap(),
        json!("hi|a|b")
    );

    let (toolset, result) = bind_shout(&registry, json!([["a"], ["b"]]));
    result.unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_a", "shout_b"]);
}

#[test]
fn two_stacks_minting_one_name_are_refused() {
    // An extension named `a_b` and the stack `[a, b]` both mint `shout_a_b`: refused.
    let err = refused(&registry(), json!([["a_b"], ["a", "b"]]));
    assert!(
        matches!(err, BindError::NameClash { ref name, .. } if name == "shout_a_b"),
        "{err:?}"
    );
}

#[test]
fn a_run_time_branch_named_like_its_base_is_refused() {
    // A run-time extension whose branch takes the base tool's own name: refused.
    let mut registry = Registry::new();
    registry
        .register(
            DynExtension::builder()
                .name("renamer")
                .kind(ExtensionKind::Wrapper)
                .factory(|layer| {
                    Ok(DynBranch::builder()
                        .stack(layer.below.clone())
                        .name(layer.input.base.as_str())
                        .build())
                })
                .build(),
        )
        .unwrap();
    let err = refused(&registry, json!(["renamer"]));
    assert!(matches!(err, BindError::SameName { .. }), "{err:?}");
    assert!(err.to_string().contains("same name"));
}

#[test]
fn unknown_extensions_are_all_reported_sorted_before_anything_else() {
    // Rule `unknown-extension`: even though the combo also holds two backends.
    let err = refused(
        &registry(),
        json!([["zeta", "pool", "alpha", "pool", "zeta"]]),
    );
    match &err {
        BindError::UnknownExtensions {
            tool,
            names,
            registered,
        } => {
            assert_eq!(tool, "shout");
            assert_eq!(names, &["alpha", "zeta"]);
            assert!(registered.contains(&"pool".to_owned()) && registered.is_sorted());
        }
        other => panic!("expected unknown extensions, got {other:?}"),
    }
    assert!(
        err.to_string().starts_with("unknown extensions `alpha`, `zeta` in a combo of `shout`; check the spelling, or register them; registered: `a`, `a_b`"),
        "{err}"
    );
}

#[tokio::test]
async fn one_backend_per_combo() {
    // Two backends in one combo, the same one twice or two different ones: refused,
    // naming both.
    let registry = registry();
    for (combo, offenders) in [
        (json!(["pool", "pool"]), ["pool", "pool"]),
        (json!(["pool", "other_backend"]), ["pool", "other_backend"]),
    ] {
        let err = refused(&registry, combo);
        match &err {
            BindError::MultipleOfKind {
                kind, extensions, ..
            } => {
                assert_eq!(*kind, ExtensionKind::Backend);
                assert!(extensions.iter().map(Name::as_str).eq(offenders));
            }
            other => panic!("expected one-backend error, got {other:?}"),
        }
        assert!(err.to_string().contains(&format!(
            "holds more than one backend: [{}]",
            offenders.join(", ")
        )));
    }
    let (toolset, result) = bind_shout(&registry, json!([["pool"], ["other_backend"]]));
    result.unwrap();
    assert_eq!(
        toolset.names(),
        ["shout", "shout_other_backend", "shout_pool"]
    );
    assert_eq!(
        toolset
            .call("shout_other_backend", json!({"text": "x"}))
            .await
            .unwrap(),
        json!("x")
    );
}

#[tokio::test]
async fn locality_must_sit_inside_relocation() {
    // `[pool, proxy]` is refused with the fix; `[proxy, pool]` binds, and the route
    // reaches the body on the pool's thread.
    let registry = registry();
    let err = refused(&registry, json!(["pool", "proxy"]));
    assert_eq!(
        err.to_string(),
        "on `shout`, `proxy` needs to run beside the tool body but sits outside `pool`, which runs the body elsewhere; place `proxy` before `pool`"
    );
    // The right order binds, and the route reaches the body on the pool's thread.
    let fetch = toolgraft::runtime::DynTool::builder()
        .name("fetch")
        .description("Report the route and thread.")
        .input_schema(schemars::json_schema!({"type": "object", "properties": {}}))
        .body(|_| async {
            Ok(json!({"route": proxy::current_route(), "thread": std::thread::current().name().map(str::to_owned)}))
        })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&fetch),
        &manifest(json!({"fetch": ["proxy", "pool"]})),
    );
    outcome[0].1.clone().unwrap();
    let out = toolset
        .call("fetch_proxy_pool", json!({"proxies": ["egress-b"]}))
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"route": "egress-b", "thread": "toolgraft-pool"})
    );
}

fn wrapper_presenting(name: &str, schema: Value, reserved: Option<Value>) -> DynExtension {
    let presented = schemars::Schema::try_from(schema).unwrap();
    let builder = DynExtension::builder()
        .name(name)
        .kind(ExtensionKind::Wrapper);
    let factory = move |layer: toolgraft::runtime::DynLayer<'_>| {
        Ok(DynBranch::builder()
            .stack(layer.below.clone())
            .input_schema(presented.clone())
            .build())
    };
    match reserved {
        Some(reserved) => builder
            .reserved(schemars::Schema::try_from(reserved).unwrap())
            .factory(factory)
            .build(),
        None => builder.factory(factory).build(),
    }
}

#[test]
fn run_time_wrappers_must_present_their_layer_input_schema() {
    // A run-time wrapper presenting `{ txt }` over `shout`'s `{ text }` changed the
    // schema (refused), one whose reserved `text` masks the tool's own is refused, and
    // `ping {}` plus a reserved `exp` binds with nothing required.
    let mut registry = Registry::new();
    registry
        .register(wrapper_presenting(
            "renaming",
            json!({"type": "object", "properties": {"txt": {"type": "string"}}, "required": ["txt"]}),
            None,
        ))
        .unwrap();
    let err = refused(&registry, json!(["renaming"]));
    assert!(
        err.to_string().starts_with("wrapper changed the schema"),
        "{err}"
    );

    let mut registry = Registry::new();
    let text = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    registry
        .register(wrapper_presenting("shadow", text.clone(), Some(text)))
        .unwrap();
    let err = refused(&registry, json!(["shadow"]));
    assert!(
        err.to_string()
            .starts_with("reserved param `text` already exists"),
        "{err}"
    );

    // Over `ping {}`, presenting only the reserved `exp`, with `required: []`.
    let mut registry = Registry::new();
    let exp = json!({"type": "object", "properties": {"exp": {"type": "number"}}});
    let presented = json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Ping",
                           "type": "object", "properties": {"exp": {"type": "number"}}, "required": [],
                           "additionalProperties": false});
    registry
        .register(wrapper_presenting("expiring", presented, Some(exp)))
        .unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&ping()),
        &manifest(json!({"ping": ["expiring"]})),
    );
    outcome[0].1.clone().unwrap();
    assert!(toolset.contains("ping_expiring"));
}

fn presenting(name: &str, kind: ExtensionKind, schema: Value) -> DynExtension {
    let presented = schemars::Schema::try_from(schema).unwrap();
    DynExtension::builder()
        .name(name)
        .kind(kind)
        .factory(move |layer| {
            let stack = DynStack::from_fn(layer.input.branch.clone(), |args| async move {
                Ok(Value::Object(args))
            });
            let _ = layer.below;
            Ok(DynBranch::builder()
                .stack(stack)
                .input_schema(presented.clone())
                .build())
        })
        .build()
}

#[tokio::test]
async fn run_time_transformers_present_concrete_schemas_backends_anything() {
    // A run-time transformer must present a concrete schema (`true` is refused, an
    // object with no properties binds); a backend may present any.
    let mut registry = Registry::new();
    registry
        .register(presenting(
            "anything",
            ExtensionKind::Transformer,
            json!(true),
        ))
        .unwrap();
    registry
        .register(presenting(
            "nothing",
            ExtensionKind::Transformer,
            json!({"type": "object", "properties": {}}),
        ))
        .unwrap();
    registry
        .register(presenting(
            "remote",
            ExtensionKind::Backend,
            json!({"type": "object", "properties": {"other": {"type": "integer"}}}),
        ))
        .unwrap();
    let err = refused(&registry, json!(["anything"]));
    assert!(
        err.to_string()
            .starts_with("transformer must present its own concrete schema"),
        "{err}"
    );
    let (toolset, result) = bind_shout(&registry, json!([["nothing"], ["remote"]]));
    result.unwrap();
    assert_eq!(
        toolset.call("shout_nothing", json!({})).await.unwrap(),
        json!({})
    );
    let schema = toolset.info("shout_remote").unwrap().input_schema;
    assert_eq!(
        schema.get("properties").unwrap(),
        &json!({"other": {"type": "integer"}})
    );
}

#[test]
fn config_reaches_only_extensions_that_accept_it() {
    // Config for an extension that takes none is refused unless empty; a config that
    // does not parse, or is out of range, is refused naming the extension and field.
    let registry = registry();
    let err = refused(&registry, json!([{"name": "trace", "config": {"x": 1}}]));
    assert_eq!(
        err.to_string(),
        "`trace` (on `shout`) does not accept config; remove its `config` or leave it empty"
    );
    bind_shout(&registry, json!([{"name": "trace", "config": {}}]))
        .1
        .unwrap();

    let err = refused(
        &registry,
        json!([{"name": "batch", "config": {"max_items": "many"}}]),
    );
    match &err {
        BindError::InvalidConfig {
            extension, field, ..
        } => assert_eq!((extension.as_str(), field.as_str()), ("batch", "max_items")),
        other => panic!("expected an invalid config, got {other:?}"),
    }
    let err = refused(
        &registry,
        json!([{"name": "batch", "config": {"max_itms": 3}}]),
    );
    assert!(err.to_string().contains("max_itms"), "{err}");
    let err = refused(
        &registry,
        json!([{"name": "proxy", "config": {"allow": []}}]),
    );
    assert!(
        matches!(err, BindError::InvalidConfig { ref field, .. } if field == "allow"),
        "{err:?}"
    );
}

#[tokio::test]
async fn configured_instances_are_used() {
    let registry = registry();
    let (toolset, result) = bind_shout(
        &registry,
        json!([[{"name": "batch", "config": {"max_items": 2}}]]),
    );
    result.unwrap();
    let err = toolset
        .call(
            "shout_batch",
            json!({"items": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("3 items is over the limit of 2"),
        "{err}"
    );
    let info = toolset.info("shout_batch").unwrap();
    assert_eq!(info.chain[0].config, Some(json!({"max_items": 2})));
}

#[tokio::test]
async fn output_schema_is_checked_at_bind_and_enforced_at_call() {
    // `output_schema`: a missing or invalid schema is refused at bind, and a result
    // that does not match it fails the call.
    #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
    struct GetUser {
        user_id: i64,
    }
    let get_user = toolgraft::Tool::builder()
        .name("get_user")
        .description("Look a user up.")
        .read_only()
        .body(|input: GetUser| async move {
            Ok(json!({"name": if input.user_id == 1 { "Alice" } else { "Al" }}))
        })
        .build()
        .unwrap();
    let registry = registry();
    let bind = |combos: Value| {
        let toolset = Toolset::new();
        let mut outcome = toolset.bind_manifest(
            &registry,
            &BaseTools::new().with(&get_user),
            &manifest(json!({"get_user": combos})),
        );
        (toolset, outcome.remove(0).1)
    };
    let err = bind(json!(["output_schema"])).1.unwrap_err();
    assert!(
        matches!(err, BindError::InvalidConfig { ref field, ref problem, .. } if field == "schema" && problem.contains("missing field `schema`")),
        "{err:?}"
    );
    let err =
        bind(json!([{"name": "output_schema", "config": {"schema": {"type": "no-such-type"}}}]))
            .1
            .unwrap_err();
    assert!(
        matches!(err, BindError::InvalidConfig { ref field, .. } if field == "schema"),
        "{err:?}"
    );

    let schema = json!({"type": "object", "properties": {"name": {"type": "string", "minLength": 3}}, "required": ["name"]});
    let (toolset, result) = bind(json!([{"name": "output_schema", "config": {"schema": schema}}]));
    result.unwrap();
    assert_eq!(
        toolset
            .info("get_user_output_schema")
            .unwrap()
            .output_schema
            .unwrap()
            .as_value(),
        &schema
    );
    assert_eq!(
        toolset
            .call("get_user_output_schema", json!({"user_id": 1}))
            .await
            .unwrap(),
        json!({"name": "Alice"})
    );
    let err = toolset
        .call("get_user_output_schema", json!({"user_id": 2}))
        .await
        .unwrap_err();
    match err.downcast_ref::<OutputSchemaError>() {
        Some(OutputSchemaError {
            tool,
            path,
            value,
            problem,
            ..
        }) => {
            assert_eq!(
                (tool.as_str(), path.as_str(), &**value),
                ("get_user_output_schema", "/name", &json!("Al"))
            );
            assert!(problem.contains("shorter than 3"), "{problem}");
        }
        None => panic!("expected an output mismatch, got {err:?}"),
    }
}

#[test]
fn descriptions_and_output_schemas_fold_the_same_way_at_run_time() {
    // At run time as typed: descriptions carry forward and each element may replace
    // them, and output schemas are inherited only through shape-preserving prefixes.
    let registry = registry();
    let (toolset, result) = bind_shout(&registry, json!([["first", "second", "trace"]]));
    result.unwrap();
    assert_eq!(
        toolset.info("shout_first_second").unwrap().description,
        "Return the text. | first | second"
    );
    assert_eq!(
        toolset
            .info("shout_first_second_trace")
            .unwrap()
            .description,
        "Return the text. | first | second"
    );

    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&report()),
        &manifest(json!({"report": [["trace", "batch"]]})),
    );
    outcome[0].1.clone().unwrap();
    let base = toolset.info("report").unwrap().output_schema;
    assert_eq!(toolset.info("report_trace").unwrap().output_schema, base);
    let batch = toolset
        .info("report_trace_batch")
        .unwrap()
        .output_schema
        .unwrap();
    assert_eq!(
        batch.get("type").unwrap(),
        "array",
        "the batch declares a list of results"
    );
}

#[tokio::test]
async fn chain_calls_the_next_tool_by_name() {
    let toolset = Toolset::new();
    let mut registry = registry();
    registry.register(Chain::new(&toolset)).unwrap();
    let outcome = toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&report()).with(&shout()),
        &manifest(json!({"report": ["chain"], "shout": ["a"]})),
    );
    assert!(
        outcome.iter().all(|(_, result)| result.is_ok()),
        "{outcome:?}"
    );
    // Each failure mode, with its kind.
    let chain_error = async |args| toolset.call("report_chain", args).await.unwrap_err();
    let err = chain_error(json!({"text": "hello", "next_tool": "nope"})).await;
    assert!(
        matches!(err, ToolError::InvalidArguments { ref field, .. } if field.as_deref() == Some("next_tool")),
        "{err:?}"
    );
    let err = chain_error(json!({"text": "hello", "next_tool": "report_chain"})).await;
    assert!(
        err.to_string().contains("cannot chain into itself"),
        "{err}"
    );
    let err =
        chain_error(json!({"text": "hello", "next_tool": "shout_a", "select": "/missing"})).await;
    assert!(
        err.downcast_ref::<ChainError>().is_some() && err.to_string().contains("selects nothing"),
        "{err:?}"
    );
    let err =
        chain_error(json!({"text": "hello", "next_tool": "shout_a", "select": "/title"})).await;
    assert!(
        err.to_string().contains("not the arguments object"),
        "{err}"
    );
    // The whole result, as arguments: `shout_a` takes `{text}`, report gives
    // `{title, score}`, so the next tool refuses them, naming itself.
    let err = chain_error(json!({"text": "hello", "next_tool": "shout_a"})).await;
    assert!(
        matches!(err, ToolError::InvalidArguments { ref tool, .. } if tool == "shout_a"),
        "{err:?}"
    );
    assert_eq!(
        toolset.info("report_chain").unwrap().output_schema,
        None,
        "a transformer inherits nothing"
    );
}

#[tokio::test]
async fn chain_feeds_a_selection_into_the_next_tool() {
    let finder = toolgraft::runtime::DynTool::builder()
        .name("find")
        .description("Find a message.")
        .input_schema(
            schemars::json_schema!({"type": "object", "properties": {"id": {"type": "integer"}}}),
        )
        .body(|args| async move { Ok(json!({"id": args["id"], "message": {"text": "found it"}})) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    let mut registry = registry();
    registry.register(Chain::new(&toolset)).unwrap();
    let outcome = toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&finder).with(&shout()),
        &manifest(json!({"find": ["chain"], "shout": ["a"]})),
    );
    assert!(
        outcome.iter().all(|(_, result)| result.is_ok()),
        "{outcome:?}"
    );
    let out = toolset
        .call(
            "find_chain",
            json!({"id": 7, "next_tool": "shout_a", "select": "/message"}),
        )
        .await
        .unwrap();
    assert_eq!(out, json!("found it|a"));
}

#[tokio::test]
async fn live_changes_are_atomic_and_target_base_tools_only() {
    // A live change commits whole or not at all (an attached combo again, a combo not
    // attached, two backends: refused, the binding left callable), and names only
    // base tools.
    let registry = registry();
    let (toolset, result) = bind_shout(&registry, json!([["a"]]));
    result.unwrap();
    let combo = |names: &[&str]| -> ComboSpec {
        names.iter().map(|name| ElementSpec::named(*name)).collect()
    };

    toolset
        .edit()
        .attach(&registry, "shout", &combo(&["b"]))
        .commit()
        .unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_a", "shout_b"]);
    let err = toolset
        .edit()
        .attach(&registry, "shout", &combo(&["a"]))
        .commit()
        .unwrap_err();
    assert!(
        matches!(err, BindError::AlreadyAttached { .. })
            && err.to_string().contains("already attached"),
        "{err}"
    );
    let err = toolset
        .edit()
        .detach("shout", &combo(&["c"]))
        .commit()
        .unwrap_err();
    assert!(
        matches!(err, BindError::NotAttached { .. }) && err.to_string().contains("not attached"),
        "{err}"
    );
    assert!(err.to_string().contains("its combos are [a], [b]"), "{err}");

    let err = toolset
        .edit()
        .replace(&registry, "shout", &[combo(&["pool", "pool"])])
        .commit()
        .unwrap_err();
    assert!(matches!(err, BindError::MultipleOfKind { .. }), "{err:?}");
    assert_eq!(toolset.names(), ["shout", "shout_a", "shout_b"]);
    for name in ["shout", "shout_a", "shout_b"] {
        toolset.call(name, json!({"text": "still"})).await.unwrap();
    }

    for change in [
        toolset
            .edit()
            .attach(&registry, "shout_a", &combo(&["b"]))
            .commit(),
        toolset.edit().detach("shout_a", &combo(&["b"])).commit(),
        toolset
            .edit()
            .replace(&registry, "shout_a", &[combo(&["b"])])
            .commit(),
    ] {
        let err = change.unwrap_err();
        assert!(
            matches!(err, BindError::NotABase { ref base, .. } if base == "shout"),
            "{err:?}"
        );
    }
    assert!(matches!(
        toolset
            .edit()
            .attach(&registry, "ghost", &combo(&["a"]))
            .commit(),
        Err(BindError::UnknownTool { .. })
    ));

    toolset
        .edit()
        .detach("shout", &combo(&["a"]))
        .commit()
        .unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_b"]);
    toolset
        .edit()
        .replace(&registry, "shout", &[combo(&["trace", "loud_marker"])])
        .commit()
        .unwrap();
    assert_eq!(
        toolset.names(),
        ["shout", "shout_trace", "shout_trace_loud_marker"]
    );
}

#[tokio::test]
async fn typed_combos_can_be_changed_live_too() {
    let registry = registry();
    let shout = shout();
    let toolset = Toolset::new();
    toolset.bind((shout.combo().with(marker("a")),)).unwrap();
    toolset
        .edit()
        .attach(&registry, "shout", &[ElementSpec::named("b")])
        .commit()
        .unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_a", "shout_b"]);
    toolset
        .edit()
        .detach("shout", &[ElementSpec::named("a")])
        .commit()
        .unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_b"]);
}

#[test]
fn a_manifest_key_that_is_not_a_base_tool_is_reported() {
    let registry = registry();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&shout()),
        &manifest(json!({"shout": ["a"], "shout_a": ["b"]})),
    );
    assert!(outcome[0].1.is_ok());
    assert!(
        matches!(outcome[1].1, Err(BindError::UnknownTool { .. })),
        "{outcome:?}"
    );
    let outcome = toolset.apply_manifest(&registry, &manifest(json!({"shout_a": ["b"]})));
    assert!(
        matches!(outcome[0].1, Err(BindError::NotABase { .. })),
        "{outcome:?}"
    );
}

/// A tool whose result is the next chain call: `{"again": {"next_tool": <next>}}`.
fn looping(name: &str, next: &str) -> toolgraft::runtime::DynTool {
    let next = next.to_owned();
    toolgraft::runtime::DynTool::builder()
        .name(name)
        .description("Answers with a call to make next.")
        .input_schema(schemars::json_schema!({"type": "object", "properties": {}}))
        .body(move |_| {
            let next = next.clone();
            async move { Ok(json!({"again": {"next_tool": next, "select": "/again"}})) }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_chain_into_a_branch_that_runs_it_again_is_refused() {
    let toolset = Toolset::new();
    let mut registry = registry();
    registry.register(Chain::new(&toolset)).unwrap();
    let lp = looping("lp", "lp_chain_pool");
    toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&lp),
        &manifest(json!({"lp": [["chain", "pool"]]})),
    )[0]
    .1
    .clone()
    .unwrap();
    let err = toolset
        .call(
            "lp_chain_pool",
            json!({"next_tool": "lp_chain_pool", "select": "/again"}),
        )
        .await
        .unwrap_err();
    assert!(
        err.downcast_ref::<ChainError>().map(|stopped| stopped.kind)
            == Some(ChainErrorKind::IntoItself),
        "an outer branch of the chain runs the chain again: {err:?}"
    );
    let err = toolset
        .call("lp_chain", json!({"next_tool": "lp_chain"}))
        .await
        .unwrap_err();
    assert!(
        err.downcast_ref::<ChainError>().map(|stopped| stopped.kind)
            == Some(ChainErrorKind::IntoItself),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_cycle_through_other_tools_and_a_pool_ends_at_the_depth_limit() {
    let toolset = Toolset::new();
    let mut registry = registry();
    registry.register(Chain::new(&toolset)).unwrap();
    // Each answers with a call that makes the other chain call it again.
    let (ping, pong) = (
        looping("ping", "ping_chain_pool"),
        looping("pong", "pong_chain_pool"),
    );
    let outcome = toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&ping).with(&pong),
        &manifest(json!({"ping": [["chain", "pool"]], "pong": [["chain", "pool"]]})),
    );
    assert!(
        outcome.iter().all(|(_, result)| result.is_ok()),
        "{outcome:?}"
    );
    let call = toolset.call(
        "ping_chain_pool",
        json!({"next_tool": "pong_chain_pool", "select": "/again"}),
    );
    let err = tokio::time::timeout(std::time::Duration::from_secs(10), call)
        .await
        .expect("the cycle ends")
        .unwrap_err();
    assert!(
        err.downcast_ref::<ChainError>().map(|stopped| stopped.kind)
            == Some(ChainErrorKind::TooDeep),
        "{err:?}"
    );
}

#[test]
fn changes_from_many_threads_do_not_lose_updates() {
    // Slow factories widen the window between preparing a change and installing
    // it, so concurrent changes really race and retry.
    let mut registry = registry();
    let names: Vec<String> = (0..8).map(|i| format!("slow{i}")).collect();
    for name in &names {
        registry
            .register(
                DynExtension::builder()
                    .name(name.as_str())
                    .kind(ExtensionKind::Wrapper)
                    .factory(|layer| {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        Ok(DynBranch::builder().stack(layer.below.clone()).build())
                    })
                    .build(),
            )
            .unwrap();
    }
    let (toolset, result) = bind_shout(&registry, json!([["trace"]]));
    result.unwrap();
    let barrier = std::sync::Barrier::new(names.len());
    std::thread::scope(|scope| {
        for name in &names {
            let (toolset, registry, barrier) = (&toolset, &registry, &barrier);
            scope.spawn(move || {
                barrier.wait();
                toolset
                    .edit()
                    .attach(registry, "shout", &[ElementSpec::named(name.clone())])
                    .commit()
                    .unwrap();
            });
        }
    });
    let bound = toolset.names();
    assert_eq!(bound.len(), 2 + names.len(), "{bound:?}");
    for name in &names {
        assert!(
            toolset.contains(&format!("shout_{name}")),
            "{name} was lost"
        );
    }
}

#[tokio::test]
async fn a_run_time_extension_really_wraps_the_layer_below() {
    let mut registry = Registry::new();
    registry
        .register(
            DynExtension::builder()
                .name("suffix")
                .kind(ExtensionKind::Wrapper)
                .accepts_config(true)
                .factory(|layer| {
                    let suffix = layer
                        .config
                        .and_then(|config| config.get("with"))
                        .and_then(Value::as_str)
                        .unwrap_or("!")
                        .to_owned();
                    let stack = DynStack::around(
                        layer.input.branch.clone(),
                        layer.below.clone(),
                        move |input, below| {
                            let suffix = suffix.clone();
                            async move {
                                let out = below.call(input).await?;
                                Ok(json!(format!(
                                    "{}{suffix}",
                                    out.as_str().unwrap_or_default()
                                )))
                            }
                        },
                    );
                    Ok(DynBranch::builder()
                        .stack(stack)
                        .description("Shouts louder.")
                        .build())
                })
                .build(),
        )
        .unwrap();
    let (toolset, result) = bind_shout(
        &registry,
        json!([[{"name": "suffix", "config": {"with": "?!"}}]]),
    );
    result.unwrap();
    assert_eq!(
        toolset
            .call("shout_suffix", json!({"text": "hi"}))
            .await
            .unwrap(),
        json!("hi?!")
    );
    assert_eq!(
        toolset.info("shout_suffix").unwrap().description,
        "Shouts louder."
    );
    // Arguments are checked up front, naming the tool called.
    let err = toolset
        .call("shout_suffix", json!({"txt": "hi"}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidArguments { ref tool, .. } if tool == "shout_suffix"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_run_time_wrappers_reserved_params_stop_at_the_wrapper() {
    // `ping {}` under a run-time wrapper reserving `exp`, called: `exp` reaches the
    // wrapper, not `ping`.
    let mut registry = Registry::new();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    registry
        .register(
            DynExtension::builder()
                .name("expiring")
                .kind(ExtensionKind::Wrapper)
                .reserved(schemars::json_schema!({"type": "object", "properties": {"exp": {"type": "number"}}}))
                .factory(move |layer| {
                    let record = record.clone();
                    let stack = DynStack::around(layer.input.branch.clone(), layer.below.clone(), move |input, below| {
                        record.lock().unwrap().push(input.args().clone());
                        async move { below.call(input).await }
                    });
                    Ok(DynBranch::builder().stack(stack).build())
                })
                .build(),
        )
        .unwrap();
    let toolset = Toolset::new();
    toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&ping()),
        &manifest(json!({"ping": ["expiring"]})),
    )[0]
    .1
    .clone()
    .unwrap();
    assert_eq!(
        toolset
            .call("ping_expiring", json!({"exp": 30}))
            .await
            .unwrap(),
        json!("pong")
    );
    assert_eq!(
        toolset.call("ping_expiring", json!({})).await.unwrap(),
        json!("pong")
    );
    assert!(toolset.call("ping", json!({"exp": 30})).await.is_err());
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn a_panicking_factory_refuses_the_tool_and_keeps_the_caller_alive() {
    let mut registry = Registry::new();
    registry
        .register(
            DynExtension::builder()
                .name("broken")
                .kind(ExtensionKind::Wrapper)
                .factory(|_| panic!("factory bug"))
                .build(),
        )
        .unwrap();
    let err = refused(&registry, json!(["broken"]));
    assert!(matches!(err, BindError::ExtensionFailed { .. }), "{err:?}");
    assert!(err.to_string().contains("factory bug"), "{err}");
}

#[test]
fn run_time_factories_run_only_for_combos_that_pass_cardinality() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = calls.clone();
    let mut registry = registry();
    registry
        .register(
            DynExtension::builder()
                .name("counted")
                .kind(ExtensionKind::Backend)
                .factory(move |layer| {
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(DynBranch::builder().stack(layer.below.clone()).build())
                })
                .build(),
        )
        .unwrap();
    let err = refused(&registry, json!(["counted", "pool"]));
    assert!(matches!(err, BindError::MultipleOfKind { .. }), "{err:?}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[test]
fn a_chain_over_a_tool_that_takes_select_is_refused() {
    let picky = toolgraft::runtime::DynTool::builder()
        .name("picky")
        .description("Takes its own `select`.")
        .input_schema(schemars::json_schema!({"type": "object", "properties": {"select": {"type": "integer"}}}))
        .body(|args| async move { Ok(Value::Object(args)) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    let mut registry = registry();
    registry.register(Chain::new(&toolset)).unwrap();
    let outcome = toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&picky),
        &manifest(json!({"picky": ["chain"]})),
    );
    let err = outcome[0].1.clone().unwrap_err();
    assert!(
        matches!(err, BindError::ReservedParamExists { ref param, .. } if param == "select"),
        "{err:?}"
    );
}

#[test]
fn empty_and_repeated_combos_are_refused_on_every_path() {
    let registry = registry();
    let err = refused(&registry, json!([["a"], ["a"]]));
    assert!(matches!(err, BindError::AlreadyAttached { .. }), "{err:?}");
    let (toolset, result) = bind_shout(&registry, json!(["trace"]));
    result.unwrap();
    assert!(matches!(
        toolset.edit().attach(&registry, "shout", &[]).commit(),
        Err(BindError::EmptyCombo { .. })
    ));
    let repeated = vec![vec![ElementSpec::named("a")], vec![ElementSpec::named("a")]];
    assert!(matches!(
        toolset
            .edit()
            .replace(&registry, "shout", &repeated)
            .commit(),
        Err(BindError::AlreadyAttached { .. })
    ));
    assert_eq!(toolset.names(), ["shout", "shout_trace"]);
}

#[test]
fn a_typed_combo_and_the_same_combo_written_in_a_manifest_are_one_combo() {
    let registry = registry();
    let shout = shout();
    let toolset = Toolset::new();
    toolset
        .bind((shout.combo().with(Batch::default()),))
        .unwrap();
    // The registry's `batch` is the same extension with the same (default) config.
    assert!(matches!(
        toolset
            .edit()
            .attach(&registry, "shout", &[ElementSpec::named("batch")])
            .commit(),
        Err(BindError::AlreadyAttached { .. })
    ));
    toolset
        .edit()
        .detach("shout", &[ElementSpec::named("batch")])
        .commit()
        .unwrap();
    assert_eq!(toolset.names(), ["shout"]);
    // A manifest config shows in the branch's chain, as typed config does.
    toolset
        .edit()
        .attach(
            &registry,
            "shout",
            &[ElementSpec::configured(
                "proxy",
                json!({"allow": ["egress-z"]}),
            )],
        )
        .commit()
        .unwrap();
    assert_eq!(
        toolset.info("shout_proxy").unwrap().chain[0].config,
        Some(json!({"allow": ["egress-z"]}))
    );
    toolset
        .edit()
        .detach(
            "shout",
            &[ElementSpec::configured(
                "proxy",
                json!({"allow": ["egress-z"]}),
            )],
        )
        .commit()
        .unwrap();
}

#[test]
fn dropping_a_replaced_binding_may_call_back_into_the_toolset() {
    struct CallsBack(Toolset);
    impl Drop for CallsBack {
        fn drop(&mut self) {
            let _ = self.0.names();
        }
    }
    let toolset = Toolset::new();
    let mut registry = Registry::new();
    let back = std::sync::Arc::new(std::sync::Mutex::new(None::<CallsBack>));
    let holder = back.clone();
    let weak = toolset.downgrade();
    registry
        .register(
            DynExtension::builder()
                .name("holder")
                .kind(ExtensionKind::Wrapper)
                .factory(move |layer| {
                    let guard = std::sync::Arc::new(CallsBack(weak.upgrade().unwrap()));
                    let _ = &holder;
                    let stack = DynStack::around(
                        layer.input.branch.clone(),
                        layer.below.clone(),
                        move |input, below| {
                            let _keep = guard.clone();
                            async move { below.call(input).await }
                        },
                    );
                    Ok(DynBranch::builder().stack(stack).build())
                })
                .build(),
        )
        .unwrap();
    toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&shout()),
        &manifest(json!({"shout": ["holder"]})),
    )[0]
    .1
    .clone()
    .unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    let changer = toolset.clone();
    std::thread::spawn(move || {
        let _ = done.send(
            changer
                .edit()
                .detach("shout", &[ElementSpec::named("holder")])
                .commit(),
        );
    });
    let result = finished
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("no deadlock");
    result.unwrap();
    assert_eq!(toolset.names(), ["shout"]);
    drop(back);
}

#[tokio::test]
async fn the_manifest_path_keeps_relocation_and_reserved_params_straight() {
    // From a manifest: what runs in the caller and what via `pool` in
    // `[trace, pool, cache]`, `[batch, pool]` and `[pool, batch]`, the cache answering
    // in the caller, and `exp` an argument of the cached branch only.
    let registry = registry();
    let outcome = Toolset::new();
    let toolset = outcome;
    let result = toolset.bind_manifest(
        &registry,
        &BaseTools::new().with(&shout()),
        &manifest(
            json!({"shout": [["trace", "pool", "cache"], ["batch", "pool"], ["pool", "batch"]]}),
        ),
    );
    result[0].1.clone().unwrap();
    let sites = |name: &str| {
        toolset
            .info(name)
            .unwrap()
            .sites()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        sites("shout_trace_pool_cache"),
        ["via pool", "caller", "caller"]
    );
    assert_eq!(sites("shout_batch_pool"), ["via pool", "caller"]);
    assert_eq!(sites("shout_pool_batch"), ["caller", "caller"]);
    for _ in 0..2 {
        let out = toolset
            .call("shout_trace_pool_cache", json!({"text": "hi", "exp": 60}))
            .await
            .unwrap();
        assert_eq!(out, json!("hi"));
    }
    let err = toolset
        .call("shout", json!({"text": "hi", "exp": 60}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown field `exp`"), "{err}");
}

#[test]
fn a_name_of_another_tool_is_refused_in_a_manifest_too() {
    let squatter = toolgraft::runtime::DynTool::builder()
        .name("shout_a")
        .description("Squats a branch name.")
        .input_schema(schemars::json_schema!({"type": "object", "properties": {}}))
        .body(|_| async { Ok(json!(null)) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    let outcome = toolset.bind_manifest(
        &registry(),
        &BaseTools::new().with(&squatter).with(&shout()),
        &manifest(json!({"shout": ["a"]})),
    );
    assert!(outcome[0].1.is_ok());
    assert!(
        matches!(outcome[1].1, Err(BindError::NameTaken { ref owner, .. }) if owner == "shout_a"),
        "{outcome:?}"
    );
    assert_eq!(toolset.names(), ["shout_a"]);
}

#[test]
fn a_json_manifest_that_writes_a_tool_twice_is_refused() {
    let err = Manifest::from_json(r#"{"tools": {"x": ["a"], "x": ["b"]}}"#).unwrap_err();
    assert!(
        err.to_string().contains("the key `x` is written twice"),
        "{err}"
    );
}

/// A run-time wrapper reserving `param`: it records the arguments it sees, then
/// passes its input down, or (`again`) calls the layer below by JSON with them.
fn recording(
    name: &'static str,
    param: &'static str,
    seen: std::sync::Arc<std::sync::Mutex<Vec<(&'static str, Value)>>>,
    again: bool,
) -> DynExtension {
    let reserved = json!({"type": "object", "properties": {param: {"type": "string"}}});
    DynExtension::builder()
        .name(name)
        .kind(ExtensionKind::Wrapper)
        .reserved(schemars::Schema::try_from(reserved).unwrap())
        .factory(move |layer| {
            let seen = seen.clone();
            let stack = DynStack::around(
                layer.input.branch.clone(),
                layer.below.clone(),
                move |input, below| {
                    let seen = seen.clone();
                    async move {
                        let args = input.args().clone();
                        seen.lock()
                            .unwrap()
                            .push((name, Value::Object(args.clone())));
                        if again {
                            below.call_json(args).await
                        } else {
                            below.call(input).await
                        }
                    }
                },
            );
            Ok(DynBranch::builder().stack(stack).build())
        })
        .build()
}

/// Rule `reserved-params` with run-time wrappers stacked: each sees its own
/// params and none of the wrappers' above it, whether it passes its input down or
/// calls the layer below again with what it saw; a raw body gets the arguments
/// in the caller's order, reserved params taken out.
#[tokio::test]
async fn stacked_run_time_wrappers_see_only_their_own_reserved_params() {
    for again in [false, true] {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut registry = registry();
        registry
            .register(recording("wa", "ra", seen.clone(), again))
            .unwrap()
            .register(recording("wb", "rb", seen.clone(), again))
            .unwrap()
            .register(presenting(
                "echo",
                ExtensionKind::Transformer,
                json!({"type": "object", "properties": {
                    "x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer"}
                }}),
            ))
            .unwrap();
        let (toolset, bound) = bind_shout(&registry, json!([["wb", "wa"], ["echo", "wb", "wa"]]));
        bound.unwrap();
        let answer = toolset
            .call("shout_wb_wa", json!({"text": "hi", "ra": "A", "rb": "B"}))
            .await
            .unwrap();
        assert_eq!(answer, "hi");
        assert_eq!(
            *seen.lock().unwrap(),
            [
                ("wa", json!({"text": "hi", "ra": "A", "rb": "B"})),
                ("wb", json!({"text": "hi", "rb": "B"})),
            ],
            "again: {again}"
        );
        seen.lock().unwrap().clear();
        let echoed = toolset
            .call(
                "shout_echo_wb_wa",
                json!({"x": 1, "ra": "A", "y": 2, "rb": "B", "z": 3}),
            )
            .await
            .unwrap();
        let keys: Vec<&String> = echoed.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["x", "y", "z"], "again: {again}: {echoed}");
    }
}

/// `Pool` with another name from `{"name": ..}`: a refinement of an instance.
#[derive(serde::Deserialize)]
struct Renamed {
    name: String,
}

fn rename(pool: &Pool, config: Renamed) -> Result<Pool, toolgraft::extension::ConfigError> {
    Ok(pool.clone().with_name(config.name))
}

#[test]
fn every_case_registers_through_one_verb_and_config_follows_the_case() {
    use toolgraft::runtime::Refined;
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(Configured::<OutputSchema>::named("schema"))
        .unwrap()
        .register(Refined::new(Pool::new(1).unwrap(), rename))
        .unwrap()
        .register(
            DynExtension::builder()
                .name("audit")
                .kind(ExtensionKind::Wrapper)
                .factory(|layer| Ok(DynBranch::builder().stack(layer.below).build()))
                .build(),
        )
        .unwrap();
    let kinds: Vec<(String, ExtensionKind)> = registry
        .catalogue()
        .into_iter()
        .map(|entry| (entry.name.to_string(), entry.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("audit".to_owned(), ExtensionKind::Wrapper),
            ("cache".to_owned(), ExtensionKind::Wrapper),
            ("pool".to_owned(), ExtensionKind::Backend),
            ("schema".to_owned(), ExtensionKind::Transformer),
            ("trace".to_owned(), ExtensionKind::Wrapper),
        ]
    );
    // A name is taken whichever case registered it.
    let again = registry.register(Pool::new(1).unwrap());
    assert!(
        matches!(again, Err(RegistryError::AlreadyRegistered { ref name }) if name == "pool"),
        "{again:?}"
    );
    let invalid = registry.register(Configured::<OutputSchema>::named("no spaces"));
    assert!(matches!(invalid, Err(RegistryError::InvalidName(_))));

    // As itself: no config. `Configured` and `Refined`: config builds or refines.
    let (_, plain) = bind_shout(&registry, json!([[{"name": "trace", "config": {"x": 1}}]]));
    assert!(
        matches!(plain, Err(BindError::ConfigNotAccepted { .. })),
        "{plain:?}"
    );
    let (toolset, refined) = bind_shout(
        &registry,
        json!([[{"name": "pool", "config": {"name": "gpu"}}], [{"name": "cache", "config": {"capacity": 4}}]]),
    );
    refined.unwrap();
    assert_eq!(
        toolset.info("shout_pool").unwrap().chain[0].extension,
        "pool"
    );
    assert!(toolset.contains("shout_cache"));
    // `named`: the element must carry a config it can be built from.
    let (_, bare) = bind_shout(&registry, json!([["schema"]]));
    assert!(
        matches!(bare, Err(BindError::InvalidConfig { .. })),
        "{bare:?}"
    );
}

/// Rule `caller-outside-relocation`: a run-time authorization check
/// (`AccessRole::Authorizes`) decides before anything is enqueued, whatever
/// placement its extension says (the builder's default is `Anywhere`), so a
/// relocating element outside it is refused, as for the typed `Authorize`.
#[test]
fn a_run_time_authorizer_of_any_placement_stays_outside_relocation() {
    use toolgraft::extension::AccessRole;
    let gate = DynExtension::builder()
        .name("gate")
        .kind(ExtensionKind::Wrapper)
        .access(AccessRole::Authorizes)
        .factory(|layer| {
            Ok(DynBranch::builder()
                .stack(DynStack::around(
                    layer.input.branch.clone(),
                    layer.below.clone(),
                    |input, below| async move { below.call(input).await },
                ))
                .build())
        })
        .build();
    let mut registry = registry();
    registry.register(gate).unwrap();
    let toolset = Toolset::new();
    toolset.bind((shout().combo(),)).unwrap();
    let refused = toolset
        .edit()
        .attach(
            &registry,
            "shout",
            &[ElementSpec::named("gate"), ElementSpec::named("pool")],
        )
        .commit();
    assert!(
        matches!(
            &refused,
            Err(BindError::AuthorizationInsideRelocation { authorizer, .. }) if authorizer == "gate"
        ),
        "{refused:?}"
    );
}
