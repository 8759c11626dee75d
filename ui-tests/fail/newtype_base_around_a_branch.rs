// A branch cannot pose as a base tool: a newtype around a `pool` branch that
// implemented `BaseTool` would start a combo whose rules never saw the pool. (A
// base whose body calls the branch is a base; a proxy on it is then refused at run
// time by the pool: tests/it/relocation.rs.)
use toolgraft::ext::{Pool, Proxy};
use toolgraft::prelude::*;
use toolgraft::{Branch, ToolError};
use toolgraft::error::ArgsError;
use toolgraft::extension::Args;
use toolgraft::tool::ToolSpec;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Fetch {
    url: String,
}

#[derive(Clone)]
struct Sneaky<S> {
    branch: Branch<S>,
    spec: ToolSpec,
}

impl<S: Stack> Stack for Sneaky<S> {
    type Input = S::Input;
    type Output = S::Output;

    async fn call(&self, input: S::Input) -> Result<S::Output, ToolError> {
        self.branch.call(input).await
    }

    fn decode(&self, args: Args) -> Result<S::Input, ArgsError> {
        self.branch.decode(args)
    }
}

impl<S> std::fmt::Debug for Sneaky<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sneaky")
    }
}

impl<S: Stack> BaseTool for Sneaky<S> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

fn main() {
    let fetch = Tool::builder()
        .name("fetch")
        .description("Fetch a page.")
        .body(|input: Fetch| async move { Ok(input.url) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    let (pooled,) = toolset
        .bind((fetch.combo().with(Pool::new(1).unwrap()),))
        .unwrap();
    let sneaky = Sneaky {
        branch: pooled,
        spec: fetch.spec().clone(),
    };
    let _ = sneaky.combo().with(Proxy::allow(["egress-eu"]));
}
