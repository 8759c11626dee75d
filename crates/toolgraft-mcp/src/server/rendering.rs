//! How a name's results are answered, cached per bound name for the toolset at
//! one version: what a call reads instead of the name's whole `ToolInfo`.

use std::sync::PoisonError;

use rustc_hash::FxHashMap;
use toolgraft::Name;
use toolgraft::context::Identity;
use toolgraft::toolset::ToolInfo;

use super::ToolsetServer;
use crate::task::{Table, TaskSupport};
use crate::tool::{OutputShape, Rendering};

/// How results of each name called so far are answered, for the toolset as
/// it was at `version`: a call needs only that bit, and getting it from a clone of
/// the name's `ToolInfo` (its chain, its description) on every call cost more the
/// deeper the branch.
#[derive(Default)]
pub(super) struct Structuring {
    version: u64,
    /// Bound names only: a name not bound is not kept, so callers cannot grow it.
    /// FxHash (rustc-hash), as the toolset hashes its own names: every call
    /// hashes its name, and SipHash's flooding resistance buys nothing for keys
    /// that are all bound names (a caller's unknown name only misses).
    names: FxHashMap<Name, Renderings>,
    /// The same for the callers of each [audience](toolgraft::toolset::Edit::audience),
    /// whose published names may be served by other bound names.
    audiences: FxHashMap<Name, FxHashMap<Name, Renderings>>,
}

/// How a name's results are answered, for each [`OutputShape`].
#[derive(Clone, Copy)]
pub(super) struct Renderings {
    object_only: Rendering,
    any_json: Rendering,
    /// Whether the name's body is relocated (what makes it a task by default).
    pub(super) relocated: bool,
    /// Whether its call may be deferred to a backend the server follows
    /// ([`deferring_backend`]).
    pub(super) defers: bool,
    /// Whether its calls may become tasks ([`TaskSupport::Never`] on a server
    /// without tasks): read once per name and version, so a call that is no
    /// task looks up nothing of the tasks' settings, nor of the client's.
    pub(super) support: TaskSupport,
    /// Imported [per session](crate::import::per_session): its calls are keyed
    /// by their session.
    pub(super) per_session: bool,
}

impl Renderings {
    /// Of `info`, published as `name`.
    fn of(name: &str, info: &ToolInfo, tasks: Option<&Table>) -> Self {
        let relocated = info
            .chain
            .iter()
            .any(|link| link.kind.relocates_execution());
        Self {
            object_only: Rendering::of(info, OutputShape::ObjectOnly),
            any_json: Rendering::of(info, OutputShape::AnyJson),
            relocated,
            defers: deferring_backend(info).is_some_and(|backend| {
                tasks.is_some_and(|tasks| tasks.settings().follows_backend(backend))
            }),
            support: tasks.map_or(TaskSupport::Never, |tasks| {
                tasks.settings().support_of(name, relocated)
            }),
            per_session: info
                .presentation
                .extra
                .get("_meta")
                .and_then(|meta| meta.get(crate::tool::PER_SESSION_META))
                == Some(&serde_json::Value::Bool(true)),
        }
    }

    pub(super) fn for_shape(self, shape: OutputShape) -> Rendering {
        match shape {
            OutputShape::ObjectOnly => self.object_only,
            OutputShape::AnyJson => self.any_json,
        }
    }
}

/// The outermost relocating layer of a name, when only wrappers sit outside it
/// (no layer there changes the output): a backend that may defer its call.
pub(super) fn deferring_backend(info: &ToolInfo) -> Option<&Name> {
    let at = info
        .chain
        .iter()
        .rposition(|link| link.kind.relocates_execution())?;
    info.chain[at + 1..]
        .iter()
        .all(|link| link.kind == toolgraft::kind::ExtensionKind::Wrapper)
        .then(|| &info.chain[at].extension)
}

impl<H> ToolsetServer<H> {
    /// How results of `name` are answered for a client on `shape`, as the
    /// toolset is now.
    /// The session a call of `name` is keyed by, when `name` is a tool imported
    /// per session.
    pub(super) fn session_of(
        &self,
        name: &str,
        identity: Option<&Identity>,
    ) -> Option<crate::call::Session> {
        self.renderings(name, identity)
            .is_some_and(|renderings| renderings.per_session)
            .then_some(self.session)
    }

    pub(super) fn rendering(
        &self,
        name: &str,
        identity: Option<&Identity>,
        shape: OutputShape,
    ) -> Rendering {
        self.renderings(name, identity)
            .map_or(Rendering::Text, |renderings| renderings.for_shape(shape))
    }

    /// How results of `name` are answered, and whether its body is relocated, as
    /// the toolset is now; `None` for a name it does not bind.
    pub(super) fn renderings(&self, name: &str, identity: Option<&Identity>) -> Option<Renderings> {
        // Read before the toolset: a change after this is seen by the next call.
        let version = *self.changes.borrow();
        let mut structuring = self
            .structuring
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if structuring.version != version {
            structuring.version = version;
            structuring.names.clear();
            structuring.audiences.clear();
        }
        // What a published name calls depends on the caller's audience.
        let audience = self.toolset.audience_of(identity);
        let names = match &audience {
            None => &mut structuring.names,
            Some(audience) => structuring.audiences.entry(audience.clone()).or_default(),
        };
        if let Some(renderings) = names.get(name) {
            return Some(*renderings);
        }
        let (Some(info), Ok(published)) =
            (self.toolset.resolve_for(identity, name), Name::new(name))
        else {
            return None;
        };
        let renderings = Renderings::of(name, &info, self.tasks.as_deref());
        names.insert(published, renderings);
        Some(renderings)
    }
}
