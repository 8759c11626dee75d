// A typed extension registers as itself only if it is `Clone`: each manifest
// element gets its own clone. The message is the registry's (the missing bound's
// `Self` is the extension itself, so rustc reports `Registrable`), and its notes
// say what a typed extension needs; the `help` line names `Clone`.
use toolgraft::Registry;
use toolgraft::ToolError;
use toolgraft::error::ArgsError;
use toolgraft::extension::{Anywhere, Args, LayerInput};
use toolgraft::kind::Backend;
use toolgraft::prelude::*;

/// A backend that is not `Clone`.
struct Inline;

impl Extension for Inline {
    type Kind = Backend;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "inline"
    }
}

#[derive(Clone)]
struct Here<S>(S);

impl<S: Stack> Stack for Here<S> {
    type Input = S::Input;
    type Output = S::Output;
    async fn call(&self, input: S::Input) -> Result<S::Output, ToolError> {
        self.0.call(input).await
    }
    fn decode(&self, args: Args) -> Result<S::Input, ArgsError> {
        self.0.decode(args)
    }
}

impl<S: Stack> Layer<S> for Inline {
    type Branch = Here<S>;
    fn layer(self, inner: S, _: &LayerInput<'_, Self>) -> Self::Branch {
        Here(inner)
    }
}

fn main() {
    let mut registry = Registry::new();
    let _ = registry.register(Inline);
}
