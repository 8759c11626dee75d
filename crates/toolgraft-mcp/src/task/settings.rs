//! What a server's tasks are given: which names a task may carry ([`TaskSupport`]),
//! how long tasks are kept and how many, which backends' jobs are followed.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use toolgraft::relocation::Follow;

/// Whether a name's calls may become tasks.
///
/// ```
/// use toolgraft_mcp::task::TaskSupport;
/// assert_ne!(TaskSupport::Required, TaskSupport::Allowed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskSupport {
    /// Never: the call is answered when it ends.
    Never,
    /// When the client declared the extension.
    Allowed,
    /// Always: a client that did not declare the extension is refused.
    Required,
}

/// The longest time to live a task may be given: a day.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The most tasks a table may be told to hold at once.
pub const MAX_TASKS: usize = 1_000_000;

/// MCP tasks for a [`ToolsetServer`](crate::ToolsetServer): which names a task
/// may carry, how long tasks are kept and how many at once (see the
/// [module docs](crate::task)).
///
/// ```
/// use std::time::Duration;
/// use toolgraft_mcp::task::Tasks;
/// let tasks = Tasks::new()
///     .with_ttl(Duration::from_secs(600))?
///     .with_max_tasks(1000)?
///     .require("export_report")
///     .allow("summarize");
/// let server = toolgraft_mcp::ToolsetServer::new(toolgraft::Toolset::new()).with_tasks(tasks);
/// # Ok::<(), toolgraft_mcp::task::TaskSettingError>(())
/// ```
#[derive(Clone)]
pub struct Tasks {
    pub(super) ttl: Duration,
    pub(super) poll_interval: Duration,
    pub(super) max_tasks: usize,
    support: HashMap<String, TaskSupport>,
    /// By follower (`remote:<queue>`).
    pub(super) followers: HashMap<String, Arc<dyn Follow>>,
}

impl fmt::Debug for Tasks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tasks")
            .field("ttl", &self.ttl)
            .field("poll_interval", &self.poll_interval)
            .field("max_tasks", &self.max_tasks)
            .field("support", &self.support)
            .field("followers", &self.followers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Default for Tasks {
    fn default() -> Self {
        Self::new()
    }
}

impl Tasks {
    /// Tasks for relocated names, kept an hour, 10 000 at once, polled every
    /// half second.
    pub fn new() -> Self {
        Self {
            ttl: Duration::from_secs(60 * 60),
            poll_interval: Duration::from_millis(500),
            max_tasks: 10_000,
            support: HashMap::new(),
            followers: HashMap::new(),
        }
    }

    /// Follows the jobs of a backend that defers (toolgraft-jobs' `Remote`):
    /// a call to a branch whose outermost relocating layer is that backend,
    /// with only wrappers outside it, is enqueued and answered with a task
    /// that is its job, which every server following the same backend answers
    /// for (a fleet's replicas behind a balancer: register it on each).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use toolgraft::relocation::{Follow, Followed};
    /// # struct Jobs;
    /// # impl Follow for Jobs {
    /// #     fn follower(&self) -> String { "remote:reports".into() }
    /// #     fn backend(&self) -> String { "remote".into() }
    /// #     fn kept_for(&self) -> std::time::Duration { std::time::Duration::from_secs(3600) }
    /// #     fn status(&self, _: &str) -> toolgraft::store::StoreFuture<'static, Option<Followed>> { Box::pin(async { Ok(None) }) }
    /// #     fn cancel(&self, _: &str) -> toolgraft::store::StoreFuture<'static, ()> { Box::pin(async { Ok(()) }) }
    /// # }
    /// let tasks = toolgraft_mcp::task::Tasks::new().with_follower(Jobs);
    /// assert!(tasks.follows_backend("remote"));
    /// ```
    pub fn with_follower(mut self, follow: impl Follow) -> Self {
        self.followers.insert(follow.follower(), Arc::new(follow));
        self
    }

    /// How often a client should poll.
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// The followers followed, by [`Follow::follower`].
    pub(crate) fn follower_keys(&self) -> impl Iterator<Item = String> + '_ {
        self.followers.keys().cloned()
    }

    /// Whether a backend named `backend` is followed.
    pub fn follows_backend(&self, backend: &str) -> bool {
        self.followers
            .values()
            .any(|follow| follow.backend() == backend)
    }

    /// How long a task is kept from its creation (`ttlMs`), whether or not it
    /// ended: 1 s to a day ([`MAX_TTL`]).
    ///
    /// # Errors
    ///
    /// [`TaskSettingError`] outside that range.
    pub fn with_ttl(mut self, ttl: Duration) -> Result<Self, TaskSettingError> {
        if ttl < Duration::from_secs(1) || ttl > MAX_TTL {
            return Err(TaskSettingError::new(
                "ttl",
                format!("{ttl:?}"),
                "1 s to 24 h",
            ));
        }
        self.ttl = ttl;
        Ok(self)
    }

    /// How often a client should poll (`pollIntervalMs`): 10 ms to a minute.
    ///
    /// # Errors
    ///
    /// [`TaskSettingError`] outside that range.
    pub fn with_poll_interval(mut self, every: Duration) -> Result<Self, TaskSettingError> {
        if every < Duration::from_millis(10) || every > Duration::from_secs(60) {
            return Err(TaskSettingError::new(
                "poll_interval",
                format!("{every:?}"),
                "10 ms to 60 s",
            ));
        }
        self.poll_interval = every;
        Ok(self)
    }

    /// How many tasks are kept at once, ended or not: 1 to [`MAX_TASKS`]. A call
    /// that would make one more is refused (an internal error saying so).
    ///
    /// # Errors
    ///
    /// [`TaskSettingError`] outside that range.
    pub fn with_max_tasks(mut self, max: usize) -> Result<Self, TaskSettingError> {
        if max == 0 || max > MAX_TASKS {
            return Err(TaskSettingError::new(
                "max_tasks",
                max.to_string(),
                "1 to 1000000",
            ));
        }
        self.max_tasks = max;
        Ok(self)
    }

    /// Calls to the published name `name` are tasks for clients with the
    /// extension (answered at once when not relocated and done without waiting),
    /// and are refused to clients without it.
    pub fn require(self, name: impl Into<String>) -> Self {
        self.support(name, TaskSupport::Required)
    }

    /// Calls to `name` may become tasks, relocated or not.
    pub fn allow(self, name: impl Into<String>) -> Self {
        self.support(name, TaskSupport::Allowed)
    }

    /// Calls to `name` never become tasks, relocated or not.
    pub fn forbid(self, name: impl Into<String>) -> Self {
        self.support(name, TaskSupport::Never)
    }

    fn support(mut self, name: impl Into<String>, support: TaskSupport) -> Self {
        self.support.insert(name.into(), support);
        self
    }

    /// Whether calls to `name` may become tasks; `relocated` says whether its
    /// body is relocated.
    ///
    /// ```
    /// use toolgraft_mcp::task::{TaskSupport, Tasks};
    /// let tasks = Tasks::new().require("export");
    /// assert_eq!(tasks.support_of("export", false), TaskSupport::Required);
    /// assert_eq!(tasks.support_of("search_pool", true), TaskSupport::Allowed);
    /// assert_eq!(tasks.support_of("search", false), TaskSupport::Never);
    /// ```
    pub fn support_of(&self, name: &str, relocated: bool) -> TaskSupport {
        match self.support.get(name) {
            Some(support) => *support,
            None if relocated => TaskSupport::Allowed,
            None => TaskSupport::Never,
        }
    }
}

/// A [`Tasks`] setting out of its range.
///
/// ```
/// let error = toolgraft_mcp::task::Tasks::new().with_max_tasks(0).unwrap_err();
/// assert_eq!(error.to_string(), "the tasks setting `max_tasks` takes 1 to 1000000, not 0");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskSettingError {
    /// The setting.
    pub setting: &'static str,
    /// The value given.
    pub value: String,
    /// What it takes.
    pub range: &'static str,
}

impl TaskSettingError {
    fn new(setting: &'static str, value: String, range: &'static str) -> Self {
        Self {
            setting,
            value,
            range,
        }
    }
}

impl fmt::Display for TaskSettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the tasks setting `{}` takes {}, not {}",
            self.setting, self.range, self.value
        )
    }
}

impl std::error::Error for TaskSettingError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_outside_their_ranges_are_refused() {
        assert!(Tasks::new().with_ttl(Duration::from_millis(999)).is_err());
        assert!(
            Tasks::new()
                .with_ttl(MAX_TTL + Duration::from_secs(1))
                .is_err()
        );
        assert!(Tasks::new().with_ttl(MAX_TTL).is_ok());
        assert!(
            Tasks::new()
                .with_poll_interval(Duration::from_millis(9))
                .is_err()
        );
        assert!(
            Tasks::new()
                .with_poll_interval(Duration::from_secs(61))
                .is_err()
        );
        assert!(Tasks::new().with_max_tasks(MAX_TASKS + 1).is_err());
        assert!(Tasks::new().with_max_tasks(MAX_TASKS).is_ok());
        let error = Tasks::new().with_ttl(Duration::ZERO).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the tasks setting `ttl` takes 1 s to 24 h, not 0ns"
        );
    }
}
