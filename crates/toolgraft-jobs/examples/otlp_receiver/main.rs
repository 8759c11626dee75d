//! A loopback OTLP/HTTP trace receiver (what a collector accepts on 4318):
//! prints each span it receives as one JSON line on stdout, for a script to
//! read (scripts/conformance.d/python_otel.py does). A stand-in for an
//! OpenTelemetry Collector where none is installed: the same wire format.
//!
//! Run: `cargo run -p toolgraft-jobs --example otlp_receiver -- [PORT]`, then
//! point an exporter at it with `OTEL_EXPORTER_OTLP_ENDPOINT=<the URL it prints>`
//! (and `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`). It prints
//! `otlp_receiver: OTLP/HTTP at <url>` on stderr once it listens.

mod receiver;

use std::io::Write as _;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = std::env::args()
        .nth(1)
        .map(|port| port.parse())
        .transpose()?
        .unwrap_or(0);
    let receiver = receiver::Receiver::start(port, |span| {
        if let Ok(line) = serde_json::to_string(span) {
            let mut out = std::io::stdout().lock();
            // A reader that went away stops nothing: the next export tries again.
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        }
    })
    .await?;
    eprintln!("otlp_receiver: OTLP/HTTP at {}", receiver.endpoint());
    tokio::signal::ctrl_c().await?;
    Ok(())
}
