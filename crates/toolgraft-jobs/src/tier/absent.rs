//! A tier this build lacks (its feature is off): [`TierUrl::parse`](super::TierUrl::parse)
//! refuses its URLs, naming the feature, so nothing connects to it.

use std::sync::Arc;

use super::{Engine, Tier};

/// Whether this build has the tier.
pub(super) const BUILT: bool = false;

pub(super) async fn connect(_: &str, _: &str, _: Engine) -> Result<Arc<dyn Tier>, String> {
    Err("this build has no job-engine tier for that URL".into())
}
