// A 64-deep stack (wrappers, a user-written wrapper, transformers and one backend)
// on a concrete base, called typed and by name from sync code (`block_on`):
// compiles with the default `recursion_limit`.
use toolgraft::ext::{Batch, Cache, Pool, Trace};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

/// A user-written wrapper, with a future of its own around the call.
#[derive(Clone)]
struct Audit;

impl toolgraft::Extension for Audit {
    type Kind = toolgraft::extension::Wrapper;
    type Locality = toolgraft::extension::Anywhere;

    fn name(&self) -> &str {
        "audit"
    }
}

impl<S: Stack> toolgraft::Wrap<S> for Audit {
    type Params = ();

    async fn around(
        &self,
        next: toolgraft::extension::Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, toolgraft::ToolError> {
        let started = std::time::Instant::now();
        let output = async move { next.call(input).await }.await;
        std::hint::black_box(started.elapsed());
        output
    }
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let shout = Tool::builder()
        .name("s")
        .description("Return the text.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let pool = Pool::new(1).unwrap();
    let combo = shout
        .combo()
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Audit)
        .with(Trace)
        .with(Cache::default().with_side_effects_allowed())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Audit)
        .with(Trace)
        .with(Trace)
        .with(Cache::default().with_side_effects_allowed())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(pool.clone())
        .with(Trace)
        .with(Trace)
        .with(Audit)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Cache::default().with_side_effects_allowed())
        .with(Trace)
        .with(Audit)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Cache::default().with_side_effects_allowed())
        .with(Audit)
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Cache::default().with_side_effects_allowed())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Audit)
        .with(Cache::default().with_side_effects_allowed())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Audit)
        .with(Trace)
        .with(Cache::default().with_side_effects_allowed())
        .with(Trace)
        .with(Trace);
    // A deep combo mints long names: 64 elements, and names past the
    // 128 bytes MCP clients expect by default.
    let limits = toolgraft::limits::Limits::default()
        .with_max_combo_len(64)
        .with_max_name_len(1024);
    let toolset = Toolset::with_limits(limits).unwrap();
    let (branch,) = toolset.bind((combo,)).unwrap();
    let args: serde_json::Value = serde_json::from_str(r#"{"items": [{"items": [{"items": [{"items": [{"items": [{"items": [{"items": [{"items": [{"text": "hi"}]}]}]}]}]}]}]}]}"#).unwrap();
    let expected: serde_json::Value = serde_json::from_str(r#"[[[[[[[["hi"]]]]]]]]"#).unwrap();
    let input = branch.decode(args.as_object().unwrap().clone()).unwrap();
    let typed = runtime.block_on(branch.call(input)).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), expected);
    let by_name = runtime.block_on(toolset.call(branch.name(), args)).unwrap();
    assert_eq!(by_name, expected);
    assert_eq!(toolset.names().len(), 65);
}
