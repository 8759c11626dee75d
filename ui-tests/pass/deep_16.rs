// A typed call through 16 stacked `Trace` wrappers, inside an `async fn`, on a base
// returned as `impl BaseTool`: compiles with the default `recursion_limit`.
use toolgraft::ext::Trace;
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn base() -> impl toolgraft::tool::BaseTool<Input = Shout, Output = String> {
    Tool::builder()
        .name("s")
        .description("Return the text.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap()
}

async fn run() {
    let shout = base();
    let combo = shout
        .combo()
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace);
    let toolset = Toolset::new();
    let (branch,) = toolset.bind((combo,)).unwrap();
    let args: serde_json::Value = serde_json::from_str(r#"{"text": "hi"}"#).unwrap();
    let expected: serde_json::Value = serde_json::from_str(r#""hi""#).unwrap();
    let input = branch.decode(args.as_object().unwrap().clone()).unwrap();
    let typed = branch.call(input).await.unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), expected);
    let by_name = toolset.call(branch.name(), args).await.unwrap();
    assert_eq!(by_name, expected);
    assert_eq!(toolset.names().len(), 17);
}

fn main() {
    tokio::runtime::Runtime::new().unwrap().block_on(run());
}
