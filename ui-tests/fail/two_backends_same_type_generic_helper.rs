// Two backends in one combo: the same backend type twice, added by a generic helper
// whose bounds ask for both joins. The bound fails where the helper is called, and
// must still name the rule, not the raw `Pool: Joins<..>`.
use toolgraft::combo::TypedCombo;
use toolgraft::combo::typestate::{Closed, ComboState, Joins, Then};
use toolgraft::ext::Pool;
use toolgraft::extension::Mint;
use toolgraft::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn twice<S, St>(combo: Combo<S, St>, pool: Pool) -> impl TypedCombo
where
    S: Stack,
    St: ComboState,
    Pool: Joins<S, St>,
    Then<St, Pool>: ComboState,
    Pool: Joins<<Pool as Mint<Closed<St, S>>>::Branch, Then<St, Pool>>,
{
    combo.with(pool.clone()).with(pool)
}

fn main() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let _combo = twice(shout.combo(), Pool::new(1).unwrap());
}
