//! Hostile input and operator config never take the process down; memory and
//! errors stay bounded.
//!
//! Property tests throw generated arguments at every bound name of a realistic
//! toolset (typed and manifest-bound) and generated manifests (JSON and TOML) at
//! a live toolset. What could abort the process (stack overflows) and what is
//! measured in bytes runs in a child process: this test binary again, told by
//! `TOOLGRAFT_HOSTILE_CHILD` which case to run, so an abort fails one test instead
//! of the run, and no other test's allocations blur a measurement.

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use proptest::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use toolgraft::combo::StartCombo;
use toolgraft::error::ArgsErrorKind;
use toolgraft::ext::cache::CacheConfig;
use toolgraft::ext::{Batch, Cache, CacheParams, Chain, OutputSchema, Pool, Proxy, Trace};
use toolgraft::extension::{Anywhere, LayerInput, Next, WithParams, Wrapper};
use toolgraft::limits::Limits;
use toolgraft::runtime::Configured;
use toolgraft::runtime::manifest::{ElementSpec, Manifest};
use toolgraft::tool::BaseTool;
use toolgraft::toolset::BaseTools;
use toolgraft::{BindError, Extension, Registry, Stack, Tool, ToolError, Toolset, Wrap};

// ---------------------------------------------------------------------------
// Bytes in use, for measurements in child processes.

struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            let now = IN_USE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(pointer, layout) };
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let moved = unsafe { System.realloc(pointer, layout, size) };
        if !moved.is_null() {
            IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
            let now = IN_USE.fetch_add(size, Ordering::Relaxed) + size;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most bytes in use above the level at the start, while `work` runs.
fn peak_above<T>(work: impl FnOnce() -> T) -> (T, usize) {
    let start = IN_USE.load(Ordering::SeqCst);
    PEAK.store(start, Ordering::SeqCst);
    let out = work();
    (out, PEAK.load(Ordering::SeqCst).saturating_sub(start))
}

const MIB: f64 = 1024.0 * 1024.0;

// ---------------------------------------------------------------------------
// Child processes.

const CHILD: &str = "TOOLGRAFT_HOSTILE_CHILD";

/// Whether this process is the child asked to run `case`.
fn is_child(case: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|asked| asked == case)
}

/// Runs the test `case` of this binary in a child process; its `MEASURE` lines.
fn in_child(case: &str) -> Vec<(String, f64)> {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([case, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, case)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "child `{case}` failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("1 passed"),
        "child `{case}` ran nothing:\n{stdout}"
    );
    let measures: Vec<(String, f64)> = stdout
        .lines()
        // The harness may print `test <name> ... ` on the same line first.
        .filter_map(|line| line.split_once("MEASURE ").map(|(_, rest)| rest))
        .filter_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect();
    for (name, value) in &measures {
        println!("{case}: {name} = {value:.3}");
    }
    measures
}

fn measure(name: &str, value: f64) {
    println!("MEASURE {name} {value}");
}

fn measured(measures: &[(String, f64)], name: &str) -> f64 {
    measures
        .iter()
        .find(|(found, _)| found == name)
        .map(|(_, value)| *value)
        .unwrap_or_else(|| panic!("no measure `{name}` in {measures:?}"))
}

// ---------------------------------------------------------------------------
// A realistic toolset: typed and manifest-bound branches of every built-in.

// Closed, so a hostile unknown key is refused (and quoted shortened).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Shout {
    text: String,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
struct Forecast {
    city: String,
    days: Option<u8>,
    /// Anything: decoding it recurses into whatever the caller sends.
    hints: Option<Value>,
}

fn shout(name: &str) -> impl BaseTool<Input = Shout, Output = String> {
    Tool::builder()
        .name(name)
        .description("Return the text, loud.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text.to_uppercase()) })
        .build()
        .unwrap()
}

fn forecast(name: &str) -> impl BaseTool<Input = Forecast, Output = Value> {
    Tool::builder()
        .name(name)
        .description("Tomorrow's weather.")
        .read_only()
        .body(|input: Forecast| async move {
            Ok(json!({"city": input.city, "celsius": 21, "days": input.days.unwrap_or(1)}))
        })
        .build()
        .unwrap()
}

/// A typed wrapper whose own code panics when the text says so.
#[derive(Clone)]
struct Fragile;

impl Extension for Fragile {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "fragile"
    }
}

impl<S: Stack<Input: Serialize>> Wrap<S> for Fragile {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        if serde_json::to_value(&input).is_ok_and(|args| args["text"] == "boom") {
            panic!("fragile wrapper gave up");
        }
        next.call(input).await
    }
}

/// A typed extension whose `layer` panics (registered by name).
#[derive(Clone)]
struct Explodes;

impl Extension for Explodes {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "explodes"
    }
}

impl<S: Stack> Wrap<S> for Explodes {
    type Params = ();

    fn for_branch(self, _: &LayerInput<'_, Self>) -> Self {
        panic!("explodes cannot be layered")
    }

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        next.call(input).await
    }
}

fn registry(toolset: &Toolset) -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Trace)
        .unwrap()
        .register(Configured::new(Cache::default()))
        .unwrap()
        .register(Configured::new(Batch::default()))
        .unwrap()
        .register(Configured::new(Proxy::allow(["eu", "us"])))
        .unwrap()
        .register(Pool::new(2).unwrap())
        .unwrap()
        .register(Configured::<OutputSchema>::named("output_schema"))
        .unwrap()
        .register(Chain::new(toolset))
        .unwrap()
        .register(Explodes)
        .unwrap();
    registry
}

const MANIFEST: &str = r#"{"tools": {
    "weather": [
        ["cache", "trace", "batch"],
        [{"name": "proxy", "config": {"allow": ["eu"]}}, "pool", "cache"],
        [{"name": "output_schema", "config": {"schema": {"type": "object", "required": ["city"]}}}, "chain"]
    ],
    "echo": [["trace", "proxy", "trace", "trace"], ["batch"], ["cache"]]
}}"#;

/// Typed combos on `shout` and `forecast`, manifest combos on `weather` and `echo`.
fn realistic() -> (Toolset, Registry) {
    let toolset = Toolset::new();
    let registry = registry(&toolset);
    let pool = Pool::new(2).unwrap();
    let typed = shout("shout");
    toolset
        .bind((
            typed.combo().with(Trace).with(Cache::default()),
            typed
                .combo()
                .with(Proxy::allow(["eu"]))
                .with(pool.clone())
                .with(Batch::default()),
            typed.combo().with(Fragile),
            typed.combo().with(Chain::new(&toolset)),
        ))
        .unwrap();
    let typed = forecast("forecast");
    toolset
        .bind((
            typed
                .combo()
                .with(Cache::default())
                .with(Trace)
                .with(Batch::default()),
            typed
                .combo()
                .with(OutputSchema::new(json!({"type": "object"})).unwrap()),
        ))
        .unwrap();
    let bases = BaseTools::new()
        .with(&forecast("weather"))
        .with(&shout("echo"));
    let manifest = Manifest::from_json(MANIFEST).unwrap();
    for (tool, outcome) in toolset.bind_manifest(&registry, &bases, &manifest) {
        outcome.unwrap_or_else(|err| panic!("{tool}: {err}"));
    }
    (toolset, registry)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Builds `[[..[1]..]]` `depth` deep. Not with `json!([value])`: the macro
/// serializes an expression, recursively.
fn nested(depth: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..depth {
        value = Value::Array(vec![value]);
    }
    value
}

/// `{key: value}` without `json!`, which would serialize `value` recursively.
fn object(key: &str, value: Value) -> Value {
    Value::Object(Map::from_iter([(key.to_owned(), value)]))
}

/// What every failed call must look like: a typed error, no panic, a short message.
fn assert_contained(name: &str, outcome: &Result<Value, ToolError>) {
    if let Err(err) = outcome {
        assert!(
            !matches!(err, ToolError::Panicked { .. }) || name.contains("fragile"),
            "`{name}` panicked: {err}"
        );
        let shown = err.to_string();
        assert!(
            shown.len() < 2_000,
            "`{name}`: a {}-byte message",
            shown.len()
        );
    }
}

// ---------------------------------------------------------------------------
// Generated arguments.

/// Keys a caller might send: every parameter of the toolset, and noise.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "text", "city", "days", "hints", "exp", "proxies", "items", "parallel",
            "max_concurrent", "fail_fast", "next_tool", "select", "jq",
        ])
        .prop_map(str::to_owned),
        1 => "\\PC{0,12}",
        1 => Just("k".repeat(10_000)),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => small_leaf(),
        1 => (1usize..4).prop_map(|quarters| Value::from("x".repeat(quarters << 18))),
    ]
}

fn small_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec![
            "",
            "eu",
            "cn",
            "shout",
            "forecast_output_schema",
            "/a",
            "boom",
            "weather"
        ])
        .prop_map(Value::from),
        "\\PC{0,40}".prop_map(Value::from),
    ]
}

fn hostile_value() -> impl Strategy<Value = Value> {
    let tree = leaf().prop_recursive(8, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    });
    prop_oneof![
        6 => tree,
        // Past the depth limit, but shallow enough to build in-process.
        1 => (60usize..300).prop_map(|depth| object("hints", nested(depth))),
        // Plausible arguments with one part off.
        3 => (prop::collection::vec((key(), leaf()), 0..5), "\\PC{0,20}").prop_map(
            |(extra, text)| {
                let mut args = Map::new();
                args.insert("text".into(), Value::from(text.clone()));
                args.insert("city".into(), Value::from(text));
                args.extend(extra);
                Value::Object(args)
            }
        ),
        // Batches: many items, or items of the wrong shape.
        1 => (0usize..300, small_leaf()).prop_map(|(count, item)| {
            json!({"items": vec![json!({"text": item, "city": "x"}); count], "parallel": true})
        }),
    ]
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Every bound name takes any JSON: a result or a typed error, never a panic or
    /// an abort, and never a long message.
    #[test]
    fn every_bound_name_survives_hostile_arguments(args in hostile_value()) {
        let (toolset, _) = realistic();
        let runtime = runtime();
        for info in toolset.tools() {
            let outcome = runtime.block_on(toolset.call(&info.name, args.clone()));
            assert_contained(&info.name, &outcome);
        }
        // Still serving.
        let out = runtime.block_on(toolset.call("echo_batch", json!({"items": [{"text": "a"}]})));
        prop_assert_eq!(out.unwrap(), json!(["A"]));
    }
}

// ---------------------------------------------------------------------------
// Generated manifests.

fn element() -> impl Strategy<Value = Value> {
    let name = prop::sample::select(vec![
        "trace",
        "cache",
        "batch",
        "proxy",
        "pool",
        "output_schema",
        "chain",
        "explodes",
        "ghost",
        "",
    ]);
    let number = prop_oneof![
        any::<u64>().prop_map(Value::from),
        Just(json!(1e12)),
        Just(json!(u64::MAX)),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(1e8)),
        Just(json!(100)),
    ];
    let config = (
        prop::sample::select(vec![
            "capacity",
            "max_bytes",
            "default_ttl_secs",
            "max_items",
            "allow",
            "schema",
            "junk",
        ]),
        prop_oneof![
            number,
            leaf(),
            Just(json!(["eu"])),
            Just(json!({"type": "object"}))
        ],
    )
        .prop_map(|(field, value)| json!({ field: value }));
    prop_oneof![
        3 => name.clone().prop_map(Value::from),
        2 => (name.clone(), config).prop_map(|(name, config)| json!({"name": name, "config": config})),
        1 => (name, leaf()).prop_map(|(name, junk)| json!({"name": name, "junk": junk})),
        1 => leaf(),
    ]
}

fn hostile_manifest() -> impl Strategy<Value = Value> {
    let combo = prop_oneof![
        8 => prop::collection::vec(element(), 0..5).prop_map(Value::Array),
        1 => (0usize..300).prop_map(|len| Value::Array(vec![json!("trace"); len])),
    ]
    .boxed();
    let combos = prop_oneof![
        4 => prop::collection::vec(combo.clone(), 0..4).prop_map(Value::Array),
        2 => combo,
        1 => leaf(),
    ];
    let tool = prop::sample::select(vec![
        "shout",
        "forecast",
        "weather",
        "echo",
        "shout_trace",
        "ghost",
    ]);
    prop_oneof![
        8 => prop::collection::vec((tool, combos), 0..4).prop_map(|tools| {
            json!({"tools": tools.into_iter().map(|(tool, combos)| (tool.to_owned(), combos)).collect::<Map<String, Value>>()})
        }),
        1 => leaf(),
        1 => hostile_value(),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// A manifest is read, or refused with an error; applied, every tool it
    /// changes either changes or keeps its previous binding, callable.
    #[test]
    fn hostile_manifests_are_refused_or_applied_whole(value in hostile_manifest(), as_toml in any::<bool>()) {
        let (toolset, registry) = realistic();
        let runtime = runtime();
        let before: Vec<_> = toolset.tools().into_iter().map(|info| (info.name, info.base)).collect();
        let text = if as_toml {
            match toml::to_string(&value) {
                Ok(text) => text,
                // TOML has no null, and no top-level non-table.
                Err(_) => return Ok(()),
            }
        } else {
            value.to_string()
        };
        let read = if as_toml { Manifest::from_toml(&text) } else { Manifest::from_json(&text) };
        let Ok(manifest) = read else {
            prop_assert!(read.unwrap_err().to_string().len() < 2_000);
            return Ok(());
        };
        let outcome = toolset.apply_manifest(&registry, &manifest);
        for (tool, result) in &outcome {
            let Err(err) = result else { continue };
            prop_assert!(err.to_string().len() < 2_000, "{}", err);
            let kept = before.iter().filter(|(_, base)| base.as_str() == tool.as_str());
            for (name, _) in kept {
                prop_assert!(toolset.contains(name), "`{}` lost `{}` after {}", tool, name, err);
            }
        }
        for base in ["shout", "forecast", "weather", "echo"] {
            let args = json!({"text": "hi", "city": "Lisbon"});
            let args = toolset.info(base).map(|info| {
                let names = toolgraft::schema::property_names(&info.input_schema).unwrap_or_default();
                Value::Object(args.as_object().unwrap().clone().into_iter().filter(|(k, _)| names.contains(k)).collect())
            });
            if let Some(args) = args {
                let out = runtime.block_on(toolset.call(base, args));
                prop_assert!(out.is_ok(), "`{}` stopped serving: {:?}", base, out);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Finding 1: deep JSON.

#[test]
fn arguments_100_000_deep_are_refused_without_overflowing() {
    let measures = in_child("child_deep_arguments");
    assert!(measured(&measures, "refused_100000_deep_us") >= 0.0);
}

#[test]
fn child_deep_arguments() {
    if !is_child("child_deep_arguments") {
        return;
    }
    let (toolset, _) = realistic();
    let runtime = runtime();
    // On a thread with a small stack: nothing may recurse once per level.
    let names: Vec<String> = toolset.tools().iter().map(|t| t.name.to_string()).collect();
    let mut times = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let mut times = Vec::new();
            for name in names {
                for args in [
                    object("hints", nested(100_000)),
                    nested(100_000),
                    object("items", Value::Array(vec![object("text", nested(100_000))])),
                ] {
                    let started = Instant::now();
                    let err = runtime.block_on(toolset.call(&name, args)).unwrap_err();
                    times.push(started.elapsed().as_micros());
                    assert!(
                        matches!(
                            err,
                            ToolError::InvalidArguments {
                                kind: ArgsErrorKind::TooDeep,
                                ..
                            }
                        ),
                        "{name}: {err}"
                    );
                    assert!(err.to_string().contains("Limits::with_max_depth"));
                }
            }
            times
        })
        .unwrap()
        .join()
        .unwrap();
    times.sort_unstable();
    // The call includes dropping the caller's value, level by level.
    measure("refused_100000_deep_us", times[times.len() / 2] as f64);
    measure(
        "refused_100000_deep_worst_us",
        times[times.len() - 1] as f64,
    );
}

#[tokio::test]
async fn depth_is_configurable_and_a_deep_any_json_field_decodes_within_it() {
    let toolset = Toolset::with_limits(Limits::default().with_max_depth(128)).unwrap();
    let forecast = forecast("forecast");
    toolset.bind((forecast.combo(),)).unwrap();
    let mut deep = object("hints", nested(120));
    deep["city"] = json!("x");
    assert!(toolset.call("forecast", deep).await.is_ok());
    let mut deeper = object("hints", nested(128));
    deeper["city"] = json!("x");
    let err = toolset.call("forecast", deeper).await.unwrap_err();
    assert!(err.to_string().contains("more than 128 levels"), "{err}");
    assert!(Toolset::with_limits(Limits::default().with_max_depth(129)).is_err());
}

// ---------------------------------------------------------------------------
// Finding 2: long combos.

#[test]
fn a_3000_element_combo_is_refused_at_bind_in_linear_memory() {
    let measures = in_child("child_long_combo");
    assert!(measured(&measures, "bind_3000_peak_mib") < 4.0);
}

#[test]
fn child_long_combo() {
    if !is_child("child_long_combo") {
        return;
    }
    let (toolset, registry) = realistic();
    let combo = vec![ElementSpec::named("trace"); 3000];
    let (outcome, peak) = peak_above(|| {
        let started = Instant::now();
        let outcome = toolset
            .edit()
            .replace(&registry, "echo", std::slice::from_ref(&combo))
            .commit();
        measure("bind_3000_us", started.elapsed().as_micros() as f64);
        outcome
    });
    let err = outcome.unwrap_err();
    assert!(
        matches!(
            err,
            BindError::ComboTooLong {
                len: 3000,
                limit: 64,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("Limits::with_max_combo_len"));
    measure("bind_3000_peak_mib", peak as f64 / MIB);
    // The previous binding serves on.
    let runtime = runtime();
    let out = runtime.block_on(toolset.call("echo_trace_proxy_trace_trace", json!({"text": "a"})));
    assert_eq!(out.unwrap(), json!("A"));
}

#[tokio::test]
async fn the_combo_length_limit_holds_on_the_typed_path_and_can_be_raised() {
    let limits = Limits::default()
        .with_max_combo_len(2)
        .with_max_name_len(256);
    let toolset = Toolset::with_limits(limits).unwrap();
    let shout = shout("shout");
    let Err(err) = toolset.bind((shout.combo().with(Trace).with(Trace).with(Trace),)) else {
        panic!("a combo over the limit bound");
    };
    assert!(
        matches!(
            err,
            BindError::ComboTooLong {
                len: 3,
                limit: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(toolset.names().is_empty());
    let toolset = Toolset::with_limits(limits.with_max_combo_len(3)).unwrap();
    toolset
        .bind((shout.combo().with(Trace).with(Trace).with(Trace),))
        .unwrap();
    assert_eq!(toolset.names().len(), 4);
}

// ---------------------------------------------------------------------------
// Finding 3: operator config.

#[test]
fn numeric_operator_config_is_bounded_at_bind() {
    let measures = in_child("child_cache_capacity");
    assert!(measured(&measures, "bind_capacity_1e6_peak_mib") < 4.0);
}

#[test]
fn child_cache_capacity() {
    if !is_child("child_cache_capacity") {
        return;
    }
    let (toolset, registry) = realistic();
    let before = toolset.names();
    for (config, field) in [
        (json!({"capacity": 1_000_000_000_000u64}), "capacity"),
        (json!({"capacity": u64::MAX}), "capacity"),
        (json!({"capacity": 100_000_000}), "capacity"),
        (json!({"max_bytes": 0}), "max_bytes"),
        (json!({"max_bytes": u64::MAX}), "max_bytes"),
        (json!({"default_ttl_secs": -1}), "default_ttl_secs"),
    ] {
        let combo = vec![ElementSpec::configured("cache", config.clone())];
        let err = toolset
            .edit()
            .replace(&registry, "weather", &[combo])
            .commit()
            .unwrap_err();
        assert!(
            matches!(&err, BindError::InvalidConfig { field: f, .. } if f == field),
            "{config}: {err}"
        );
        assert_eq!(toolset.names(), before);
    }
    for (config, field) in [
        (json!({"max_items": 0}), "max_items"),
        (json!({"max_items": u64::MAX}), "max_items"),
    ] {
        let combo = vec![ElementSpec::configured("batch", config.clone())];
        let err = toolset
            .edit()
            .replace(&registry, "weather", &[combo])
            .commit()
            .unwrap_err();
        assert!(
            matches!(&err, BindError::InvalidConfig { field: f, .. } if f == field),
            "{config}: {err}"
        );
    }
    // A large but allowed capacity costs nothing up front.
    let combo = vec![ElementSpec::configured(
        "cache",
        json!({"capacity": 1_000_000}),
    )];
    let (outcome, peak) = peak_above(|| {
        toolset
            .edit()
            .replace(&registry, "weather", &[combo])
            .commit()
    });
    outcome.unwrap();
    measure("bind_capacity_1e6_peak_mib", peak as f64 / MIB);
    assert!(Pool::new(1_000_000).is_err());
}

#[test]
fn a_panic_in_a_typed_extension_at_bind_refuses_the_tool_only() {
    let (toolset, registry) = realistic();
    let before = toolset.names();
    let err = toolset
        .edit()
        .replace(&registry, "echo", &[vec![ElementSpec::named("explodes")]])
        .commit()
        .unwrap_err();
    assert!(
        matches!(&err, BindError::ExtensionFailed { problem, .. } if problem.contains("cannot be layered")),
        "{err}"
    );
    assert_eq!(toolset.names(), before);
}

// ---------------------------------------------------------------------------
// Finding 4: copies before checks.

#[test]
fn a_manifest_branch_copies_no_more_than_the_typed_one() {
    let measures = in_child("child_memory");
    let typed = measured(&measures, "arg_64mib_typed_peak_mib");
    let manifest = measured(&measures, "arg_64mib_manifest_peak_mib");
    assert!(
        manifest <= typed * 1.25 + 1.0,
        "manifest {manifest:.1} MiB, typed {typed:.1} MiB"
    );
    assert!(measured(&measures, "batch_1m_manifest_peak_mib") < 8.0);
    assert!(measured(&measures, "batch_1m_typed_peak_mib") < 8.0);
}

#[test]
fn child_memory() {
    if !is_child("child_memory") {
        return;
    }
    let runtime = runtime();
    let toolset = Toolset::new();
    let registry = registry(&toolset);
    let typed = shout("typed");
    toolset
        .bind((
            typed
                .combo()
                .with(Trace)
                .with(Proxy::allow(["eu"]))
                .with(OutputSchema::new(json!({"type": "string"})).unwrap())
                .with(Trace),
            typed.combo().with(Batch::default()),
        ))
        .unwrap();
    let manifest = Manifest::from_json(
        r#"{"tools": {"dynamic": [
            ["trace", "proxy", {"name": "output_schema", "config": {"schema": {"type": "string"}}}, "trace"],
            ["batch"]
        ]}}"#,
    )
    .unwrap();
    let bases = BaseTools::new().with(&shout("dynamic"));
    for (_, outcome) in toolset.bind_manifest(&registry, &bases, &manifest) {
        outcome.unwrap();
    }
    let big = || json!({"text": "x".repeat(64 << 20)});
    for (label, name) in [
        ("typed", "typed_trace_proxy_output_schema_trace"),
        ("manifest", "dynamic_trace_proxy_output_schema_trace"),
    ] {
        let args = big();
        let (out, peak) = peak_above(|| runtime.block_on(toolset.call(name, args)));
        assert_eq!(out.unwrap().as_str().map(str::len), Some(64 << 20));
        // The result itself (64 MiB, upper-cased) is part of both peaks.
        measure(&format!("arg_64mib_{label}_peak_mib"), peak as f64 / MIB);
    }
    let items = || json!({"items": vec![json!({"text": "x"}); 1_000_000]});
    for (label, name) in [("typed", "typed_batch"), ("manifest", "dynamic_batch")] {
        let args = items();
        let started = Instant::now();
        let (out, peak) = peak_above(|| runtime.block_on(toolset.call(name, args)));
        let elapsed = started.elapsed();
        let err = out.unwrap_err();
        assert!(err.to_string().contains("over the limit of 100"), "{err}");
        measure(&format!("batch_1m_{label}_peak_mib"), peak as f64 / MIB);
        measure(
            &format!("batch_1m_{label}_ms"),
            elapsed.as_secs_f64() * 1000.0,
        );
    }
}

#[tokio::test]
async fn a_run_time_layer_still_sees_its_arguments_as_given() {
    let (toolset, _) = realistic();
    // `weather`'s first combo: cache over the base, keyed by its arguments.
    let args = json!({"city": "Lisbon", "days": 2, "exp": 30});
    let first = toolset.call("weather_cache", args.clone()).await.unwrap();
    assert_eq!(toolset.call("weather_cache", args).await.unwrap(), first);
    let other = json!({"city": "Porto", "exp": 30});
    assert_eq!(
        toolset.call("weather_cache", other).await.unwrap()["city"],
        "Porto"
    );
}

// ---------------------------------------------------------------------------
// Finding 5: panics in typed extension code.

#[tokio::test]
async fn a_panic_in_a_typed_wrapper_is_a_typed_error_and_the_toolset_serves_on() {
    let (toolset, _) = realistic();
    let err = toolset
        .call("shout_fragile", json!({"text": "boom"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Panicked { tool, message } if tool == "shout_fragile" && message.contains("gave up")),
        "{err}"
    );
    let out = toolset.call("shout_fragile", json!({"text": "ok"})).await;
    assert_eq!(out.unwrap(), json!("OK"));
}

// ---------------------------------------------------------------------------
// Finding 6: the cache bounds bytes.

#[tokio::test]
async fn the_cache_bounds_bytes_as_well_as_entries() {
    let shout = shout("shout");
    let cache = Cache::new(CacheConfig {
        max_bytes: 1 << 20,
        ..CacheConfig::default()
    });
    let (cached,) = Toolset::new().bind((shout.combo().with(cache),)).unwrap();
    // Scaled down from the finding (200 distinct 1 MiB arguments against 64 MiB)
    // to keep a debug build quick: 200 distinct 64 KiB arguments against 1 MiB.
    for n in 0..200 {
        let text = format!("{n}{}", "t".repeat(64 << 10));
        cached
            .call(WithParams::new(CacheParams::default(), Shout { text }))
            .await
            .unwrap();
    }
    let store = cached.stack().wrapper();
    assert!(store.bytes() <= 1 << 20, "{} bytes", store.bytes());
    assert!(
        store.len() >= 7 && store.len() <= 8,
        "{} entries",
        store.len()
    );
    // A result over the bound alone is not kept.
    let huge = "y".repeat(2 << 20);
    cached
        .call(WithParams::new(
            CacheParams::default(),
            Shout { text: huge },
        ))
        .await
        .unwrap();
    assert!(store.bytes() <= 1 << 20);
}

// ---------------------------------------------------------------------------
// Finding 7: errors quote at most 200 characters.

#[tokio::test]
async fn errors_quote_values_shortened() {
    let (toolset, _) = realistic();
    let ten_mb = "z".repeat(10 << 20);
    let cases = [
        ("shout", Value::from(ten_mb.clone())),
        ("shout", json!({"text": 5, &ten_mb: 1})),
        ("forecast", json!({"city": "x", "days": ten_mb})),
        ("shout_proxy_pool_batch", json!({"items": ten_mb})),
        ("shout_proxy_pool_batch", json!({"items": [ten_mb]})),
        ("echo_batch", json!({"items": [ten_mb]})),
        ("shout_chain", json!({"text": "a", "next_tool": ten_mb})),
        ("shout_chain", json!({"text": "a", "next_tool": [ten_mb]})),
        (
            "shout_chain",
            json!({"text": "a", "next_tool": "forecast", "select": ten_mb}),
        ),
        (
            "echo_trace_proxy_trace_trace",
            json!({"text": "a", "proxies": [ten_mb]}),
        ),
        (ten_mb.as_str(), json!({})),
    ];
    for (name, args) in cases {
        let err = toolset.call(name, args).await.unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.len() < 1_000,
            "{} bytes: {}",
            shown.len(),
            &shown[..300]
        );
        assert!(shown.contains("bytes)"), "{shown}");
    }
}

#[test]
fn manifest_and_bind_errors_quote_values_shortened() {
    let (toolset, registry) = realistic();
    let ten_mb = "q".repeat(10 << 20);
    let manifest = Manifest::from_value(&json!({"tools": {&ten_mb: ["trace"]}})).unwrap();
    let outcome = toolset.apply_manifest(&registry, &manifest);
    assert!(outcome[0].1.as_ref().unwrap_err().to_string().len() < 1_000);
    let err =
        Manifest::from_value(&json!({"tools": {"x": [{"name": "a", &ten_mb: 1}]}})).unwrap_err();
    assert!(err.to_string().len() < 1_000);
    let combo = vec![ElementSpec::configured(
        "cache",
        json!({"capacity": ten_mb}),
    )];
    let err = toolset
        .edit()
        .replace(&registry, "echo", &[combo])
        .commit()
        .unwrap_err();
    assert!(err.to_string().len() < 1_000, "{}", err.to_string().len());
    let err = toolset
        .edit()
        .replace(&registry, "echo", &[vec![ElementSpec::named(&ten_mb)]])
        .commit()
        .unwrap_err();
    assert!(err.to_string().len() < 1_000);
}

// ---------------------------------------------------------------------------
// Finding 8: bound names.

#[test]
fn bound_names_longer_than_128_bytes_are_refused_unless_allowed() {
    let (toolset, registry) = realistic();
    let combo = vec![ElementSpec::named("trace"); 30];
    let err = toolset
        .edit()
        .replace(&registry, "echo", std::slice::from_ref(&combo))
        .commit()
        .unwrap_err();
    assert!(
        matches!(&err, BindError::NameTooLong { limit: 128, len, .. } if *len > 128),
        "{err}"
    );
    assert!(err.to_string().contains("Limits::with_max_name_len"));
    assert!(toolset.names().iter().all(|name| name.len() <= 128));

    let roomy = Toolset::with_limits(Limits::default().with_max_name_len(512)).unwrap();
    let registry = self::registry(&roomy);
    roomy.bind((shout("echo").combo(),)).unwrap();
    roomy
        .edit()
        .replace(&registry, "echo", &[combo])
        .commit()
        .unwrap();
    assert_eq!(roomy.names().len(), 31);
}

/// Keeping arguments without copies must not change what each layer sees: a
/// run-time wrapper sees its reserved params, the raw tool below does not.
#[tokio::test]
async fn reserved_params_stop_at_a_run_time_wrapper_over_a_raw_tool() {
    use std::sync::{Arc, Mutex};
    use toolgraft::kind::ExtensionKind;
    use toolgraft::runtime::{DynBranch, DynExtension, DynStack, DynTool};

    let echo = DynTool::builder()
        .name("raw")
        .description("Return the arguments.")
        .input_schema(schemars::json_schema!({
            "type": "object", "properties": {"text": {"type": "string"}}
        }))
        .body(|args| async move { Ok(Value::Object(args)) })
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let mut registry = Registry::new();
    registry
        .register(
            DynExtension::builder()
                .name("expiring")
                .kind(ExtensionKind::Wrapper)
                .reserved(schemars::json_schema!({"type": "object", "properties": {"exp": {"type": "number"}}}))
                .factory(move |layer| {
                    let record = record.clone();
                    let stack = DynStack::around(layer.input.branch.clone(), layer.below.clone(), move |input, below| {
                        record.lock().unwrap().push(Value::Object(input.args().clone()));
                        async move { below.call(input).await }
                    });
                    Ok(DynBranch::builder().stack(stack).build())
                })
                .build(),
        )
        .unwrap();
    let toolset = Toolset::new();
    let manifest = Manifest::from_json(r#"{"tools": {"raw": ["expiring"]}}"#).unwrap();
    for (_, outcome) in toolset.bind_manifest(&registry, &BaseTools::new().with(&echo), &manifest) {
        outcome.unwrap();
    }
    let out = toolset
        .call("raw_expiring", json!({"text": "a", "exp": 3}))
        .await
        .unwrap();
    assert_eq!(out, json!({"text": "a"}));
    assert_eq!(*seen.lock().unwrap(), [json!({"text": "a", "exp": 3})]);
}
