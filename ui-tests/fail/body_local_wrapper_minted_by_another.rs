// A branch that runs a body-local wrapper (the proxy sets a task-local route) can
// only be minted by an extension that is itself body-local: otherwise the rules
// would let it sit outside a backend.
use toolgraft::ext::Proxy;
use toolgraft::{Anywhere, Extension, Layer, LayerInput, Stack, Wrapped, Wrapper};

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
