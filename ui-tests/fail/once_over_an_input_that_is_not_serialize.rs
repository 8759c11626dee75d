// `once` over a tool whose input is not `Serialize`: a retry's or a job's key
// covers every call made under it, and `once` tells them apart by their
// arguments serialized.
use toolgraft::ext::OncePerKey;
use toolgraft::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
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
    let _combo = pay.combo().with(OncePerKey::default());
}
