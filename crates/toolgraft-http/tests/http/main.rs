//! The authoring API and page, end to end: every endpoint and refusal through the
//! router (`api`), write-back to JSON and TOML manifest files, authentication, and
//! the page in a real headless Chromium (`browser`).

mod api;
mod browser;
mod common;
