// `[approve, pool]`: the built-in that asks the caller's user, inside a backend.
// On the pool's side there is no caller to ask; `[pool, approve]` binds.
use toolgraft::ext::Pool;
use toolgraft::ext::approve::{Approve, SealKey};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Wipe {
    disk: String,
}

fn main() {
    let wipe = Tool::builder()
        .name("wipe")
        .description("Wipe a disk.")
        .body(|wipe: Wipe| async move { Ok(wipe.disk) })
        .build()
        .unwrap();
    let approve = Approve::new(SealKey::new(vec![7; 32]).unwrap());
    let _combo = wipe.combo().with(approve).with(Pool::new(1).unwrap());
}
