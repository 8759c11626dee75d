// A wrapper whose impl over one stack (a pool's branch) declares `BodyLocal`, while
// its impl over `DynStack`, the locality the rules read, says `Anywhere`: the typed
// declaration would be ignored and the wrapper would sit outside the pool.
use toolgraft::ext::Pool;
use toolgraft::ext::pool::Pooled;
use toolgraft::extension::{Anywhere, BodyLocal, DynInput, Next, Stack};
use toolgraft::prelude::*;
use toolgraft::Wrap;
use toolgraft::runtime::DynStack;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Fetch {
    url: String,
}

#[derive(Clone)]
struct Route;

impl Wrap<DynStack> for Route {
    type Locality = Anywhere;
    type Params = ();
    fn name(&self) -> &str {
        "route"
    }
    async fn around(
        &self,
        next: Next<'_, DynStack, Self>,
        (): (),
        input: DynInput,
    ) -> Result<serde_json::Value, ToolError> {
        next.call(input).await
    }
}

impl<S: Stack> Wrap<Pooled<S>> for Route {
    type Locality = BodyLocal;
    type Params = ();
    fn name(&self) -> &str {
        "route"
    }
    async fn around(
        &self,
        next: Next<'_, Pooled<S>, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        next.call(input).await
    }
}

fn main() {
    let fetch = Tool::builder()
        .name("fetch")
        .description("Fetch a page.")
        .body(|input: Fetch| async move { Ok(input.url) })
        .build()
        .unwrap();
    let _combo = fetch.combo().with(Pool::new(1).unwrap()).with(Route);
}
