// Two backends in one combo: the same backend type twice, once behind a type alias.
// An alias is the same type, so this is the same mistake as `two_backends_same_type`
// and must get the same rule's words.
use toolgraft::ext::Pool;
use toolgraft::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Shout {
    text: String,
}

type Workers = Pool;

fn main() {
    let shout = Tool::builder()
        .name("shout")
        .description("Return the text.")
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let workers: Workers = Pool::new(1).unwrap();
    let _combo = shout.combo().with(Pool::new(1).unwrap()).with(workers);
}
