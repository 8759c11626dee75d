// A generic helper bounded by `Joins` that adds a proxy (which needs body
// locality), given a combo that already has a backend: the bound fails where the
// helper is called, and the compiler names rule `locality-inside-relocation`, as
// `.with` on the combo itself would, not a raw type mismatch on the state.
use toolgraft::Combo;
use toolgraft::combo::typestate::{Closed, ComboState, Joins, Then};
use toolgraft::ext::{Pool, Proxy};
use toolgraft::extension::Mint;
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Fetch {
    url: String,
}

fn proxied<S, St>(
    combo: Combo<S, St>,
) -> Combo<<Proxy as Mint<Closed<St, S>>>::Branch, Then<St, Proxy>>
where
    S: Stack,
    St: ComboState,
    Proxy: Joins<S, St>,
{
    combo.with(Proxy::allow(["egress-eu"]))
}

fn main() {
    let fetch = Tool::builder()
        .name("fetch")
        .description("Fetch a page.")
        .body(|input: Fetch| async move { Ok(input.url) })
        .build()
        .unwrap();
    let _combo = proxied(fetch.combo().with(Pool::new(1).unwrap()));
}
