// `[authorize, cache]`: a cache outside the check that decides who may call.
// It would hand a kept answer to callers the check never saw; `[cache, authorize]`
// binds.
use toolgraft::access::Scopes;
use toolgraft::ext::{Authorize, Cache};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Query {
    q: String,
}

fn main() {
    let search = Tool::builder()
        .name("search")
        .description("Search the team's notes.")
        .read_only()
        .body(|query: Query| async move { Ok(query.q) })
        .build()
        .unwrap();
    let readers = Authorize::new(Scopes::all(["notes:read"]));
    let _combo = search.combo().with(readers).with(Cache::default().with_public());
}
