//! The entries toolgraft itself sets on a call: the name it came in by, its
//! depth in tool-calls-tool, and the body-local layer it runs in.

use serde::Serialize;

use super::{CURRENT, Entry, Pinned, Serialized, Unkeyed};
use crate::name::Name;

/// The bound name a call came in by (`fetch_proxy_cache`): set by every call by
/// name ([`Toolset::call`](crate::Toolset::call)), so a body or an extension deep
/// in a combo knows what the caller asked for.
///
/// ```
/// use serde_json::json;
/// use toolgraft::{context::{self, CallName}, Tool, Toolset};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Ping {}
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ping = Tool::builder().name("ping").description("Say which name was called.")
///     .body(|_: Ping| async { Ok(context::get::<CallName>().map(|name| name.0.to_string())) })
///     .build()?;
/// let toolset = Toolset::new();
/// toolset.bind((ping.combo(),))?;
/// assert_eq!(toolset.call("ping", json!({})).await?, json!("ping"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CallName(pub Name);

impl Entry for CallName {
    const NAME: &'static str = "toolgraft.call_name";
    type Travel = Serialized;
    type Key = Unkeyed;
}

/// How deep in tool-calls-tool the call is (a chain calling a chain, over any
/// number of backends); absent means 0. It travels to every worker, so a cycle
/// through a backend still ends at
/// [`MAX_CHAIN_DEPTH`](crate::ext::chain::MAX_CHAIN_DEPTH).
///
/// ```
/// use toolgraft::context::{self, ChainDepth};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// assert_eq!(ChainDepth::current(), 0);
/// assert_eq!(context::with(ChainDepth(3), async { ChainDepth::current() }).await, 3);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct ChainDepth(pub usize);

impl ChainDepth {
    /// The current call's depth (0 outside any chain).
    ///
    /// A depth that arrived from a caller's process and does not read as one (a
    /// string, a negative number, one over this build's `usize`) reads as
    /// `usize::MAX`: a depth that cannot be read cannot be trusted to be
    /// shallow, so a cycle through a worker still ends.
    ///
    /// ```
    /// use toolgraft::context::ChainDepth;
    /// use toolgraft::relocation::WireContext;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), serde_json::Error> {
    /// let wire: WireContext = serde_json::from_str(r#"[{"name": "toolgraft.chain_depth", "value": "0"}]"#)?;
    /// assert_eq!(wire.arrive(async { ChainDepth::current() }).await, usize::MAX);
    /// # Ok(()) }
    /// ```
    pub fn current() -> usize {
        CURRENT
            .try_with(|context| match context.find::<ChainDepth>() {
                None => 0,
                Some(Some(depth)) => depth.0,
                Some(None) => usize::MAX,
            })
            .unwrap_or(0)
    }
}

impl Entry for ChainDepth {
    const NAME: &'static str = "toolgraft.chain_depth";
    type Travel = Serialized;
    type Key = Unkeyed;
}

/// The body-local layer whose call this is: the extension (`proxy`) and the
/// branch it runs in (`fetch_proxy`). Every call through a body-local wrapper
/// has it; it pins the call ([`Pinned`]), so a backend reached from inside it (a
/// tool body calling a branch that relocates) refuses, naming the layer.
///
/// ```
/// use toolgraft::context::{self, BodyLocalCall};
/// assert!(context::get::<BodyLocalCall>().is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyLocalCall {
    /// The extension (`proxy`).
    pub extension: Name,
    /// The branch it runs in (`fetch_proxy`).
    pub branch: Name,
}

impl Entry for BodyLocalCall {
    const NAME: &'static str = "toolgraft.body_local_call";
    type Travel = Pinned;
    type Key = Unkeyed;
}

/// How many times each thing was counted in one scope (a retry's attempt, a
/// job's run): what tells apart two calls made within it with the same
/// arguments. Shared by the clones of the entry that holds it; a copy that
/// arrives from another process starts at zero, as a new run does. Always
/// equal to another (it is not part of what the entry says).
// Read by `once` only.
#[cfg_attr(not(feature = "once"), allow(dead_code))]
#[derive(Clone, Debug, Default)]
pub(crate) struct Occurrences(
    std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>,
);

#[cfg_attr(not(feature = "once"), allow(dead_code))]
impl Occurrences {
    /// Counts `what` once more; the count before this one (0 the first time).
    pub(crate) fn next(&self, what: &str) -> u64 {
        let mut seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = seen.entry(what.to_owned()).or_default();
        *count += 1;
        *count - 1
    }
}

impl PartialEq for Occurrences {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Occurrences {}
