// A wrapper fits the run-time stack too, `DynStack`, which is what a manifest runs
// it over: a combo refuses one bound to a typed input only (`Input = Query`), in
// words, at the `.with` that takes it; `Wrap`'s docs show the fix (a trait of one's
// own, implemented for `Query` and for `DynInput`).
use toolgraft::extension::{Anywhere, Next, Stack, Wrapper};
use toolgraft::prelude::*;
use toolgraft::Wrap;

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

#[derive(Clone)]
struct NonEmpty;

impl Extension for NonEmpty {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "non_empty"
    }
}

impl<S: Stack<Input = Query>> Wrap<S> for NonEmpty {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: Query,
    ) -> Result<S::Output, ToolError> {
        if input.text.is_empty() {
            return Err(next.refuse("the query is empty"));
        }
        next.call(input).await
    }
}

fn main() {
    let search = Tool::builder()
        .name("search")
        .description("Search.")
        .body(|query: Query| async move { Ok(query.text) })
        .build()
        .unwrap();
    let _combo = search.combo().with(NonEmpty);
}
