// A generic helper bounded by `Joins` that adds a backend, given a combo that
// already has an extension that needs the caller's session: the bound fails where
// the helper is called, and the compiler names rule `caller-outside-relocation`.
use toolgraft::Combo;
use toolgraft::combo::typestate::{Closed, ComboState, Joins, Then};
use toolgraft::extension::Mint;
use toolgraft::ext::Pool;
use toolgraft::extension::{CallerLocal, Next, Stack, Wrapper};
use toolgraft::prelude::*;
use toolgraft::{ToolError, Wrap};

/// Tells the caller's client that the call started.
#[derive(Clone)]
struct Announce;

impl Extension for Announce {
    type Kind = Wrapper;
    type Locality = CallerLocal;

    fn name(&self) -> &str {
        "announce"
    }
}

impl<S: Stack> Wrap<S> for Announce {
    type Params = ();

    async fn around(&self, next: Next<'_, S, Self>, (): (), input: S::Input) -> Result<S::Output, ToolError> {
        next.call(input).await
    }
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Fetch {
    url: String,
}

fn pooled<S, St>(combo: Combo<S, St>) -> Combo<<Pool as Mint<Closed<St, S>>>::Branch, Then<St, Pool>>
where
    S: Stack,
    St: ComboState,
    Pool: Joins<S, St>,
{
    combo.with(Pool::new(1).unwrap())
}

fn main() {
    let fetch = Tool::builder()
        .name("fetch")
        .description("Fetch a page.")
        .body(|input: Fetch| async move { Ok(input.url) })
        .build()
        .unwrap();
    let _combo = pooled(fetch.combo().with(Announce));
}
