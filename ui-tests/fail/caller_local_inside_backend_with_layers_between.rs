// An extension that needs the caller's session, with wrappers between it and the
// backend outside it: the rule still names both.
use toolgraft::ext::{Pool, Timeout, Trace};
use toolgraft::extension::{CallerLocal, Next, Stack, Wrapper};
use toolgraft::prelude::*;
use toolgraft::{ToolError, Wrap};

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
    let _combo = fetch
        .combo()
        .with(Announce)
        .with(Trace)
        .with(Timeout::new(std::time::Duration::from_secs(5)))
        .with(Pool::new(1).unwrap());
}
