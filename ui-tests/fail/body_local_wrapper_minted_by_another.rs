// A wrapper's branch is minted only by the wrapper's own layer: an extension that
// could mint a branch running a body-local wrapper (the proxy sets a task-local
// route) would have the rules place it by its own locality, outside a backend.
use toolgraft::ext::Proxy;
use toolgraft::extension::{Anywhere, LayerInput, Wrapped};
use toolgraft::kind::Wrapper;
use toolgraft::{Extension, Layer, Stack};

#[derive(Clone)]
struct Route(Proxy);

impl Extension for Route {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "route"
    }
}

impl<S: Stack> Layer<S> for Route {
    type Branch = Wrapped<Proxy, S>;

    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch {
        Wrapped::new(self.0, inner, below)
    }
}

fn main() {}
