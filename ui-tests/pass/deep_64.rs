// A 64-deep stack (wrappers, transformers and one backend): each `.with` nests the
// stack built so far, so type-checking stays linear in depth.
use toolgraft::ext::{Batch, Cache, Pool, Trace};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn main() {
    let shout = Tool::builder()
        .name("s")
        .description("Return the text.")
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let pool = Pool::new(1).unwrap();
    let combo = shout
        .combo()
        .with(Cache::default())
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Cache::default())
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Cache::default())
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(pool.clone())
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Cache::default())
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Cache::default())
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Cache::default())
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Cache::default())
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Trace)
        .with(Batch::default())
        .with(Trace)
        .with(Cache::default())
        .with(Batch::default())
        .with(Trace)
        .with(Trace);
    let toolset = Toolset::new();
    toolset.bind(&shout, frunk::hlist![combo]).unwrap();
    assert_eq!(toolset.names().len(), 65);
}
