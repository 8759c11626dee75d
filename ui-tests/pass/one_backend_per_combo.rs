// Two backends in two different combos of one tool: each combo holds one.
use toolgraft::ext::{Pool, Trace};
use toolgraft::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Ping {}

#[tokio::main]
async fn main() {
    let ping = Tool::builder()
        .name("ping")
        .description("Answer pong.")
        .read_only()
        .body(|_: Ping| async { Ok("pong".to_owned()) })
        .build()
        .unwrap();
    let fast = Pool::new(1).unwrap().with_name("fast");
    let slow = Pool::new(1).unwrap().with_name("slow");
    let toolset = Toolset::new();
    let (on_fast, on_slow) = toolset
        .bind((
            ping.combo().with(fast).with(Trace),
            ping.combo().with(Trace).with(slow),
        ))
        .unwrap();
    assert_eq!(on_fast.name(), "ping_fast_trace");
    assert_eq!(on_slow.name(), "ping_trace_slow");
    assert_eq!(on_fast.call(Ping {}).await.unwrap(), "pong");
    assert_eq!(on_slow.call(Ping {}).await.unwrap(), "pong");
}
