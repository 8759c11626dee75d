// Two backends in one combo: the same backend type twice.
use toolgraft::ext::Pool;
use toolgraft::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

fn main() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let pool = worker_pool();
    let _combo = shout.combo().with(pool.clone()).with(pool);
}

fn worker_pool() -> Pool {
    Pool::new(1).expect("a pool of one thread starts")
}
