// A wrapper written with `Around` (it only fits stacks with a text output) also
// needs its one-line `Layer`: without it, the combo says what is missing.
use toolgraft::extension::{Anywhere, Around, Next, Stack, Wrapper};
use toolgraft::{Extension, Tool, ToolError};

#[derive(Clone)]
struct Loud;

impl Extension for Loud {
    type Kind = Wrapper;
    type Locality = Anywhere;
    fn name(&self) -> &str {
        "loud"
    }
}

impl<S: Stack<Output = String>> Around<S> for Loud {
    type Params = ();
    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<String, ToolError> {
        Ok(next.call(input).await?.to_uppercase())
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn main() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let _combo = shout.combo().with(Loud);
}
