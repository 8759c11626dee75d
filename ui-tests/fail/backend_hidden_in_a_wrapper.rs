// An extension cannot mint another extension's branch: a "wrapper" whose branch is
// really a pool's would hide the relocation from the rules. The pool only accepts
// the `LayerInput` made for it (and a wrapper's branch must be `Wrapped`).
use toolgraft::ext::Pool;
use toolgraft::ext::pool::Pooled;
use toolgraft::{Extension, Layer, Stack};
use toolgraft::extension::{Anywhere, LayerInput};
use toolgraft::kind::Wrapper;

#[derive(Clone)]
struct QuietPool(Pool);

impl Extension for QuietPool {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "quiet"
    }
}

impl<S: Stack> Layer<S> for QuietPool {
    type Branch = Pooled<S>;

    fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Pooled<S> {
        self.0.layer(inner, below)
    }
}

fn main() {}
