// A wrapper whose branch returns another output type than the layer below: its own
// `Layer` is never used (binding mints a wrapper's branch from its `Wrap<S>` impl),
// so the combo says the wrapper has no branch over this stack.
use toolgraft::prelude::*;
use toolgraft::ToolError;
use toolgraft::error::ArgsError;
use toolgraft::extension::{Anywhere, Args, LayerInput};
use toolgraft::kind::Wrapper;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

/// Declared a wrapper, but answers with the length instead of the text.
#[derive(Clone)]
struct Measure;

impl Extension for Measure {
    type Kind = Wrapper;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "measure"
    }
}

#[derive(Clone)]
struct Measured<S>(S);

impl<S: Stack<Output = String>> Stack for Measured<S> {
    type Input = S::Input;
    type Output = usize;
    async fn call(&self, input: S::Input) -> Result<usize, ToolError> {
        Ok(self.0.call(input).await?.len())
    }
    fn decode(&self, args: Args) -> Result<S::Input, ArgsError> {
        self.0.decode(args)
    }
}

impl<S: Stack<Output = String>> Layer<S> for Measure {
    type Branch = Measured<S>;
    fn layer(self, inner: S, _: &LayerInput<'_, Self>) -> Self::Branch {
        Measured(inner)
    }
}

fn main() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let _combo = shout.combo().with(Measure);
}
