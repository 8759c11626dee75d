// A generic helper that adds a pool, given a combo that already has a backend: the
// helper's `Takes` bound fails at the call, and the compiler names rule
// `cardinality`, as `.with` on the combo itself would.
use toolgraft::ToolError;
use toolgraft::combo::{Takes, With};
use toolgraft::error::ArgsError;
use toolgraft::ext::Pool;
use toolgraft::extension::{Anywhere, Args, LayerInput};
use toolgraft::kind::Backend;
use toolgraft::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

/// A second backend: runs the layer below on a blocking thread.
#[derive(Clone)]
struct Blocking;

impl Extension for Blocking {
    type Kind = Backend;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "blocking"
    }
}

#[derive(Clone)]
struct OnBlockingThread<S>(S);

impl<S: Stack> Stack for OnBlockingThread<S> {
    type Input = S::Input;
    type Output = S::Output;
    async fn call(&self, input: S::Input) -> Result<S::Output, ToolError> {
        let inner = self.0.clone();
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || handle.block_on(inner.call(input)))
            .await
            .expect("the blocking thread finished")
    }
    fn decode(&self, args: Args) -> Result<S::Input, ArgsError> {
        self.0.decode(args)
    }
}

impl<S: Stack> Layer<S> for Blocking {
    type Branch = OnBlockingThread<S>;
    fn layer(self, inner: S, _: &LayerInput<'_, Self>) -> Self::Branch {
        OnBlockingThread(inner)
    }
}

fn pooled<C: Takes<Pool>>(combo: C) -> With<C, Pool> {
    combo.with(Pool::new(1).unwrap())
}

fn main() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let _combo = pooled(shout.combo().with(Blocking));
}
