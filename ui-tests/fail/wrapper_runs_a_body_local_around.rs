// A wrapper cannot run a body-local wrapper's `around` (the proxy sets a task-local
// route) as its own: `around` only takes the `Next` made for its own wrapper, so
// the rules always see the locality of the code that runs.
use toolgraft::ext::{Proxy, ProxyParams};
use toolgraft::extension::{Anywhere, Next, Wrapper};
use toolgraft::{Stack, ToolError, Wrap, Extension};

#[derive(Clone)]
struct Route(Proxy);

impl Extension for Route {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "route"
    }
}

impl<S: Stack> Wrap<S> for Route {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        Wrap::around(&self.0, next, ProxyParams::default(), input).await
    }
}

fn main() {}
