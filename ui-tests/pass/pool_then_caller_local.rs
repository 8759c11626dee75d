// `[pool, announce]`: the extension that needs the caller's session sits outside the
// backend, so it runs where the call arrived; body-local and plain wrappers inside.
use toolgraft::ext::{Pool, Proxy, Trace};
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

#[tokio::main]
async fn main() {
    let fetch = Tool::builder()
        .name("fetch")
        .description("Fetch a page.")
        .read_only()
        .body(|input: Fetch| async move { Ok(input.url) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((fetch
            .combo()
            .with(Proxy::allow(["egress-eu"]))
            .with(Trace)
            .with(Pool::new(1).unwrap())
            .with(Announce)
            .with(Trace),))
        .unwrap();
    let info = toolset.info("fetch_proxy_trace_pool_announce").unwrap();
    let placements: Vec<String> = info.chain.iter().map(|link| link.placement.to_string()).collect();
    assert_eq!(placements, ["beside the body", "anywhere", "anywhere", "beside the caller"]);
    let page = toolset
        .call("fetch_proxy_trace_pool_announce_trace", serde_json::json!({"url": "/"}))
        .await
        .unwrap();
    assert_eq!(page, serde_json::json!("/"));
}
