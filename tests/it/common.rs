//! Fixture tools (`shout`, `ping`, `report`) and wrappers (`marker`, `Loud`) the
//! integration tests share.
#![allow(dead_code)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgraft::ToolError;
use toolgraft::Wrap;
use toolgraft::extension::{Anywhere, Next, Text, Wrapper};
use toolgraft::prelude::*;

// Closed (`deny_unknown_fields`, so its schema says `"additionalProperties": false`):
// a call naming a field it does not take is refused, which the strictness tests read.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Shout {
    pub text: String,
}

impl Shout {
    pub fn new(text: &str) -> Self {
        Self { text: text.into() }
    }
}

// Closed, as `Shout` is.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ping {}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ReportInput {
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Report {
    pub title: String,
    pub score: i64,
}

/// `shout { text } -> String`, "Return the text."
pub fn shout() -> impl BaseTool<Input = Shout, Output = String> {
    Tool::builder()
        .name("shout")
        .description("Return the text.")
        .read_only()
        .body(|input: Shout| std::future::ready(Ok(input.text)))
        .build()
        .unwrap()
}

/// `ping {} -> String`
pub fn ping() -> impl BaseTool<Input = Ping, Output = String> {
    Tool::builder()
        .name("ping")
        .description("Answer pong.")
        .read_only()
        .body(|_: Ping| std::future::ready(Ok("pong".to_owned())))
        .build()
        .unwrap()
}

/// `report { text } -> Report { title, score }`
pub fn report() -> impl BaseTool<Input = ReportInput, Output = Report> {
    Tool::builder()
        .name("report")
        .description("Summarise a text.")
        .read_only()
        .body(|input: ReportInput| {
            std::future::ready(Ok(Report {
                score: input.text.len() as i64,
                title: input.text,
            }))
        })
        .build()
        .unwrap()
}

/// A wrapper that appends `|<name>` to a text result; with `describes`, it also
/// appends ` | <name>` to the description it receives.
#[derive(Clone)]
pub struct Marker {
    pub name: &'static str,
    pub describes: bool,
}

pub fn marker(name: &'static str) -> Marker {
    Marker {
        name,
        describes: false,
    }
}

pub fn describing(name: &'static str) -> Marker {
    Marker {
        name,
        describes: true,
    }
}

impl Extension for Marker {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        self.name
    }

    fn describe(&self, running: &str) -> Option<String> {
        self.describes.then(|| format!("{running} | {}", self.name))
    }
}

impl<S: Stack<Output: Text>> Wrap<S> for Marker {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let mut output = next.call(input).await?;
        if let Some(text) = output.text_mut() {
            text.push('|');
            text.push_str(self.name);
        }
        Ok(output)
    }
}

/// Upper-cases a text result (scenario 4's `loud`).
#[derive(Clone)]
pub struct Loud;

impl Extension for Loud {
    type Kind = Wrapper;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        "loud"
    }
}

impl<S: Stack<Output: Text>> Wrap<S> for Loud {
    type Params = ();

    async fn around(
        &self,
        next: Next<'_, S, Self>,
        (): (),
        input: S::Input,
    ) -> Result<S::Output, ToolError> {
        let mut output = next.call(input).await?;
        if let Some(text) = output.text_mut() {
            *text = text.to_uppercase();
        }
        Ok(output)
    }
}

/// `subscriber` as this thread's default, for one test among others running in
/// parallel in this binary.
///
/// While at most one dispatcher is alive, `tracing` caches a call site's
/// interest from the default of whichever thread reaches it first: a test with
/// no subscriber that reaches a span first would disable it for the test that
/// has one. A second dispatcher kept alive for the whole process makes the
/// cache ask every live dispatcher instead.
pub fn subscribe(
    subscriber: impl tracing::Subscriber + Send + Sync + 'static,
) -> tracing::subscriber::DefaultGuard {
    static ALWAYS_ALIVE: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    ALWAYS_ALIVE.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::new()));
    tracing::subscriber::set_default(subscriber)
}
