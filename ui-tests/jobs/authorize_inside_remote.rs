//! `[authorize, remote]`: the check would decide on the worker, once the call
//! was enqueued, so a refused caller would still have a job sent;
//! `[remote, authorize]` binds, and decides in the caller's process.
use toolgraft::access::Scopes;
use toolgraft::ext::Authorize;
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
    let admins = Authorize::new(Scopes::all(["disks:wipe"]));
    let _ = wipe.combo().with(admins).with(remote);
}
