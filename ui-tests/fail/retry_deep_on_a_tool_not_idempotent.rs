// A `retry` deeper than `SEGMENT` (8) layers, over a segment of the layers below,
// on a tool that says nothing of calling it twice: refused as on the tool itself,
// naming rule `side-effects` and the tool's hints.
use toolgraft::ext::{Retry, Trace};
use toolgraft::prelude::*;

#[derive(Clone, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Mail {
    to: String,
}

fn main() {
    let send = Tool::builder()
        .name("send")
        .description("Send a mail.")
        .body(|mail: Mail| async move { Ok(mail.to) })
        .build()
        .unwrap();
    let _combo = send
        .combo()
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Trace)
        .with(Retry::default());
}
