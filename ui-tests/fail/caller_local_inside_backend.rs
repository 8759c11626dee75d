// A user's own extension that needs the caller's session, inside (before) a backend:
// it would run on the pool's thread, away from the caller it asks.
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

fn main() {
    let fetch = Tool::builder()
        .name("fetch")
        .description("Fetch a page.")
        .body(|input: Fetch| async move { Ok(input.url) })
        .build()
        .unwrap();
    let _combo = fetch.combo().with(Announce).with(Pool::new(1).unwrap());
}
