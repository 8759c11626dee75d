//! `[approve, remote]`: the approval would be asked on the worker, which has no
//! caller; `[remote, approve]` binds.
use toolgraft::ext::approve::{Approve, SealKey};
use toolgraft::prelude::*;
use toolgraft_jobs::Remote;

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
    let remote = Remote::new("sqlite:///tmp/jobs.db").unwrap();
    let approve = Approve::new(SealKey::new(vec![7; 32]).unwrap());
    let _ = wipe.combo().with(approve).with(remote);
}
