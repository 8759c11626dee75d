// `[authorize, once]`: `once` outside the check that decides who may call. It
// answers a repeated call from what it kept, so it would answer a caller the
// check never saw; `[once, authorize]` binds.
use toolgraft::access::Scopes;
use toolgraft::ext::{Authorize, OncePerKey};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Payment {
    cents: u64,
}

fn main() {
    let pay = Tool::builder()
        .name("pay")
        .description("Charge the card.")
        .body(|payment: Payment| async move { Ok(payment.cents) })
        .build()
        .unwrap();
    let payers = Authorize::new(Scopes::all(["payments:write"]));
    let _combo = pay.combo().with(payers).with(OncePerKey::default());
}
