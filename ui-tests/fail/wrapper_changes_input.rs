// A wrapper whose branch takes another input than the layer below: its own `Layer`
// is never used (binding mints a wrapper's branch from its `Wrap<S>` impl, always
// `Wrapped`), so the combo says the wrapper has no branch over this stack.
use toolgraft::prelude::*;
use toolgraft::ToolError;
use toolgraft::error::ArgsError;
use toolgraft::extension::{Anywhere, Args, LayerInput, decode_args};
use toolgraft::kind::Wrapper;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Renamed {
    txt: String,
}

/// Declared a wrapper, but presents `{ txt }` instead of the layer's input.
#[derive(Clone)]
struct Rename;

impl Extension for Rename {
    type Kind = Wrapper;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "rename"
    }
}

#[derive(Clone)]
struct Renaming<S>(S);

impl<S: Stack<Input = Shout>> Stack for Renaming<S> {
    type Input = Renamed;
    type Output = S::Output;
    async fn call(&self, input: Renamed) -> Result<S::Output, ToolError> {
        self.0.call(Shout { text: input.txt }).await
    }
    fn decode(&self, args: Args) -> Result<Renamed, ArgsError> {
        decode_args(args)
    }
}

impl<S: Stack<Input = Shout>> Layer<S> for Rename {
    type Branch = Renaming<S>;
    fn layer(self, inner: S, _: &LayerInput<'_, Self>) -> Self::Branch {
        Renaming(inner)
    }
}

fn main() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let _combo = shout.combo().with(Rename);
}
