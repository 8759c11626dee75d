// A transformer whose own input is not `Serialize` cannot be registered: run-time
// layers around its branch read that input as JSON. The message names the input
// and `Serialize`, not the registry's private bound.
use toolgraft::Registry;
use toolgraft::ToolError;
use toolgraft::error::ArgsError;
use toolgraft::extension::{
    Anywhere, Args, Extension, Layer, LayerInput, Next, Stack, Transform, Transformed,
    Transformer, decode_args,
};

#[derive(Clone, Debug)]
struct Echo;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Words {
    text: String,
}

impl Extension for Echo {
    type Kind = Transformer;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "echo"
    }
}

impl<S: Stack> Transform<S> for Echo {
    type Input = Words;
    type Output = String;
    async fn call(&self, _: Next<'_, S, Self>, input: Words) -> Result<String, ToolError> {
        Ok(input.text)
    }
    fn decode(&self, _: &S, args: Args) -> Result<Words, ArgsError> {
        decode_args(args)
    }
}

impl<S: Stack> Layer<S> for Echo {
    type Branch = Transformed<Self, S>;
    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch {
        Transformed::new(self, inner, below)
    }
}

fn main() {
    let mut registry = Registry::new();
    let _ = registry.register(Echo);
}
