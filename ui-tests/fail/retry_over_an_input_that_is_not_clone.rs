// A retry calls the layer below again with a clone of its input, so it fits the
// stacks whose input is `Resendable` (`Clone`): over a tool whose input is not, the
// combo says what the wrapper needs, and the fix.
use toolgraft::extension::{Anywhere, Next, Resendable, Stack, Wrapper};
use toolgraft::prelude::*;
use toolgraft::Wrap;

#[derive(Clone)]
struct Retry;

impl Extension for Retry {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "retry"
    }
}

impl<S: Stack<Input: Resendable>> Wrap<S> for Retry {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        match next.call(input.clone()).await {
            Err(_) => next.call(input).await,
            done => done,
        }
    }
}

// Deserialize and JsonSchema, as a tool's input must be; not Clone.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

fn main() {
    let search = Tool::builder()
        .name("search")
        .description("Search.")
        .body(|query: Query| async move { Ok(query.text) })
        .build()
        .unwrap();
    let _combo = search.combo().with(Retry);
}
