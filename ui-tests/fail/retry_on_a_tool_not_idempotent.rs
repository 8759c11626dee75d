// `retry` makes a call again after a transient failure, so it binds only on a tool
// whose hints say a second call does no more than the first: one that sends a
// mail and says nothing of it is refused, with the rule and the fix.
use toolgraft::ext::Retry;
use toolgraft::prelude::*;

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Mail {
    to: String,
}

fn main() {
    let send = Tool::builder()
        .name("send_mail")
        .description("Send a mail.")
        .body(|mail: Mail| async move { Ok(mail.to) })
        .build()
        .unwrap();
    let _combo = send.combo().with(Retry::default());
}
