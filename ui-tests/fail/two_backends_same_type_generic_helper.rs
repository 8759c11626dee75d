// Two backends in one combo: the same backend type twice, added by a generic helper
// written with `Takes` and `With` (a combo that can take a pool, and the combo
// then). The bound fails where the helper is called, and names the rule, not a raw
// `Pool: Takes<..>` or `Pool: Joins<..>`.
use toolgraft::combo::{Takes, With};
use toolgraft::ext::Pool;
use toolgraft::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn twice<C>(combo: C, pool: Pool) -> With<With<C, Pool>, Pool>
where
    C: Takes<Pool>,
    With<C, Pool>: Takes<Pool>,
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
