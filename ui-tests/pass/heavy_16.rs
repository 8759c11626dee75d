// 16 layers with heavy futures of their own (timeouts; a user wrapper nesting async
// blocks, a `catch_unwind` and a timeout; spans; a cache), called typed: compiles
// with the default `recursion_limit` because a combo closes every `SEGMENT` (8)
// layers into a segment. With segments of 16 this program overflows the limit,
// which is why they are not wider (the price: one allocation per 8 layers).
use toolgraft::extension::Wrapper;
use toolgraft::ext::{Cache, Timeout, Trace};
use toolgraft::prelude::*;
use toolgraft::Wrap;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

/// A user wrapper nesting async blocks, a timeout and a `catch_unwind` around the call.
#[derive(Clone)]
struct Heavy;

impl Extension for Heavy {
    type Kind = Wrapper;
    type Locality = toolgraft::extension::Anywhere;

    fn name(&self) -> &str {
        "heavy"
    }
}

impl<S: Stack> Wrap<S> for Heavy {
    type Params = ();

    async fn around(
        &self,
        next: toolgraft::extension::Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, toolgraft::ToolError> {
        use futures_util::FutureExt;
        let guard = vec![1u8; 3];
        let guarded = std::panic::AssertUnwindSafe(async move {
            let inner = async move { next.call(input).await };
            tokio::time::timeout(std::time::Duration::from_secs(5), inner).await
        });
        let out = guarded.catch_unwind().await;
        std::hint::black_box(guard);
        out.expect("the body does not panic").expect("the body answers at once")
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
    let combo = shout
        .combo()
        .with(Timeout::new(std::time::Duration::from_secs(5)))
        .with(Heavy)
        .with(Trace)
        .with(Cache::default())
        .with(Timeout::new(std::time::Duration::from_secs(5)))
        .with(Heavy)
        .with(Trace)
        .with(Trace)
        .with(Timeout::new(std::time::Duration::from_secs(5)))
        .with(Heavy)
        .with(Trace)
        .with(Trace)
        .with(Timeout::new(std::time::Duration::from_secs(5)))
        .with(Heavy)
        .with(Trace)
        .with(Trace);
    let limits = toolgraft::limits::Limits::default().with_max_name_len(1024);
    let toolset = Toolset::with_limits(limits).unwrap();
    let (branch,) = toolset.bind((combo,)).unwrap();
    let out = runtime.block_on(branch.call(Shout { text: "hi".into() })).unwrap();
    assert_eq!(out, "hi");
}
