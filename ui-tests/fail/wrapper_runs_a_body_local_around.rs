// A wrapper cannot run a body-local wrapper's `around` (the proxy sets a task-local
// route) as its own: `around` only takes the `Next` made for its own wrapper, so
// the rules always see the locality of the code that runs.
use toolgraft::ext::{Proxy, ProxyParams};
use toolgraft::extension::{Anywhere, Next};
use toolgraft::{Stack, ToolError, Wrap};

#[derive(Clone)]
struct Route(Proxy);

impl<S: Stack> Wrap<S> for Route {
    type Locality = Anywhere;
    type Params = ();

    fn name(&self) -> &str {
        "route"
    }

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
