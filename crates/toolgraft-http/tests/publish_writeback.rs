//! The manifest's object form (`{"combos", "publish"}`) through the authoring
//! API's write-back: a change of combos keeps what the file publishes.

#[allow(dead_code)]
#[path = "http/common.rs"]
mod common;

use common::{restart, send, server};

/// The operator's file publishes only the cached branch of `weather`. A change
/// of its combos through the API keeps that live (an edit keeps the
/// publication), but the write-back replaces the whole entry with a list of
/// combos: the file loses `publish`, and after a restart every branch of
/// `weather`, the raw base included, is published again.
#[tokio::test]
async fn a_write_back_keeps_what_the_file_publishes() {
    let manifest = r#"{
  "tools": {
    "weather": {"combos": [["trace", "cache"]], "publish": {"weather": "weather_trace_cache"}},
    "translate": [["proxy", "pool"]]
  }
}
"#;
    let server = server("json", manifest, None);
    let published = |toolset: &toolgraft::Toolset| -> Vec<(String, String)> {
        toolset
            .published()
            .into_iter()
            .map(|p| (p.name.to_string(), p.info.name.to_string()))
            .filter(|(name, _)| name.starts_with("weather"))
            .collect()
    };
    let body = r#"{"combos": [["trace", "cache"], ["pool"]]}"#;
    let answer = send(
        &server.router,
        "PUT",
        "/tools/weather/extensions",
        Some(body),
        None,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let live = published(&server.toolset);
    assert_eq!(
        live,
        [("weather".to_owned(), "weather_trace_cache".to_owned())]
    );

    let text = std::fs::read_to_string(&server.manifest).unwrap();
    assert_eq!(
        published(&restart(&server.manifest)),
        live,
        "the file after the write-back:\n{text}"
    );
}
