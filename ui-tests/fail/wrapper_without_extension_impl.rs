// A wrapper says what it is (its kind, locality and name) once, in `impl Extension`;
// `Wrap` holds only what it does per stack. One that writes `Wrap` alone is told what
// to write. (This replaces `wrapper_locality_differs_by_stack`: with the locality in
// the one `Extension` impl, a wrapper cannot declare another over some stack.)
use toolgraft::extension::{Next, Stack};
use toolgraft::prelude::*;
use toolgraft::Wrap;

#[derive(Clone)]
struct Route;

impl<S: Stack> Wrap<S> for Route {
    type Params = ();
    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        next.call(input).await
    }
}

fn main() {}
