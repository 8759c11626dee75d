// A typed `retry` outside `once` on a tool that says nothing of side effects:
// `once` answers a repeated call from the first one's outcome, so its branch is
// idempotent (rule `side-effects`). Also across a segment, and over a
// transformer's branch (a new tool, made idempotent by `once` all the same).
use toolgraft::ext::{Batch, OncePerKey, Retry, Trace};
use toolgraft::prelude::*;
use toolgraft::tool::{Hinted, Idempotent};

#[derive(Clone, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Payment {
    cents: u64,
}

fn idempotent<S: Hinted<Hints = Idempotent>>(_: &S) {}

async fn run() {
    let pay = Tool::builder()
        .name("pay")
        .description("Charge the card.")
        .body(|payment: Payment| async move { Ok(payment.cents) })
        .build()
        .unwrap();
    let retried = pay.combo().with(OncePerKey::default()).with(Retry::default());
    idempotent(pay.combo().with(OncePerKey::default()).stack());
    // Nine layers: `once` is in the segment under the retry.
    let deep = pay
        .combo()
        .with(OncePerKey::default())
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Retry::default());
    let batched = pay
        .combo()
        .with(Batch::default())
        .with(OncePerKey::default())
        .with(Retry::default());
    let toolset = Toolset::new();
    let (retried, deep, batched) = toolset.bind((retried, deep, batched)).unwrap();
    assert_eq!(retried.name(), "pay_once_retry");
    assert_eq!(retried.call(Payment { cents: 5 }).await.unwrap(), 5);
    assert_eq!(deep.call(Payment { cents: 6 }).await.unwrap(), 6);
    let _ = batched;
}

fn main() {
    tokio::runtime::Runtime::new().unwrap().block_on(run());
}
