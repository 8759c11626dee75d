//! MCP tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663): a call
//! that must wait answers at once with a task, which the client follows with
//! `tasks/get`, answers with `tasks/update` and stops with `tasks/cancel`.
//!
//! [`Tasks`] turns them on ([`ToolsetServer::with_tasks`](crate::ToolsetServer::with_tasks)).
//! Which names a task may carry ([`TaskSupport`]): every name whose body is
//! relocated (a `pool` or `remote` branch) unless told otherwise, and the names
//! [`Tasks::allow`] and [`Tasks::require`] add. A call to such a name from a
//! client that declared the extension:
//!
//! - is a task from the start when its body is relocated (it leaves the
//!   caller's thread or process: whether it is done by the time the server first
//!   looks is a race, and a client should not see which way it went);
//! - otherwise answers at once what it has without waiting (a result, or a
//!   request for input: an input-required result, the multi-round-trip flow)
//!   and becomes a task the moment it must wait;
//! - as a task, it is in the table before the client reads its id, and the call
//!   runs on, every layer of the combo included, beside the table;
//! - a layer or body that asks the caller for input later (an
//!   [`InputRequired`](toolgraft::context::InputRequired)) parks the task in
//!   `input_required` with its requests; `tasks/update` files the responses (one
//!   at a time if the client likes), and once every request is answered the
//!   call runs again with them, as it would on the client's next `tools/call`;
//! - `tasks/cancel` stops it: its future is dropped (a `pool` job is aborted, a
//!   `remote` job withdrawn), and the task reads `cancelled`.
//!
//! A name that [requires](Tasks::require) a task is refused to a client that did
//! not declare the extension (`-32021`, naming it); any other name runs as an
//! ordinary call for it. A task is the caller's: one with a principal (the HTTP
//! layer's) is found only by the same principal, and reads as unknown to
//! anyone else. Tasks are kept for their time to live from creation
//! ([`Tasks::with_ttl`]), and at most [`Tasks::with_max_tasks`] at once.
//!
//! The table is the process's: a fleet of servers behind a balancer answers for
//! a task on the replica that created it only.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, DetailedTask, InputRequiredResult, InputResponses, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use serde_json::Value;
use tokio::task::AbortHandle;

use toolgraft::context::Principal;

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
/// [module docs](self)).
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
#[derive(Clone, Debug)]
pub struct Tasks {
    ttl: Duration,
    poll_interval: Duration,
    max_tasks: usize,
    support: HashMap<String, TaskSupport>,
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
        }
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

    /// Calls to the published name `name` always become tasks (and are refused
    /// to a client without the extension).
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

/// How a call ended, as MCP answers it.
pub(crate) enum Settled {
    /// A result, or a protocol error.
    Answered(Result<CallToolResult, ErrorData>),
    /// The caller must answer these first.
    Needs(InputRequiredResult),
}

/// A call's future, to its end.
pub(crate) type Running = Pin<Box<dyn Future<Output = Settled> + Send>>;

/// Runs the call again with the responses and the state an input brought.
pub(crate) type Resume = Arc<dyn Fn(InputResponses, Option<String>) -> Running + Send + Sync>;

/// The tasks of one server (every session's), by id.
pub(crate) struct Table {
    settings: Tasks,
    records: Mutex<HashMap<String, Record>>,
}

struct Record {
    created: Instant,
    created_at: String,
    updated_at: String,
    principal: Option<Principal>,
    status: Status,
    running: Option<AbortHandle>,
    resume: Resume,
}

enum Status {
    Working,
    Waiting {
        pending: BTreeMap<String, rmcp::model::InputRequest>,
        answered: InputResponses,
        state: Option<String>,
    },
    Completed(JsonObject),
    Failed(JsonObject),
    Cancelled,
}

impl Status {
    fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed(_) | Self::Failed(_) | Self::Cancelled)
    }
}

/// The task a client did not make, or may not see: the same error either way,
/// so an id reveals nothing.
fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no task `{id}`"), None)
}

fn now_iso() -> String {
    jiff::Timestamp::now().to_string()
}

fn new_id() -> Result<String, ErrorData> {
    let mut bytes = [0_u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| ErrorData::internal_error(format!("no random task id: {error}"), None))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

impl Table {
    pub(crate) fn new(settings: Tasks) -> Self {
        Self {
            settings,
            records: Mutex::default(),
        }
    }

    pub(crate) fn settings(&self) -> &Tasks {
        &self.settings
    }

    fn records(&self) -> std::sync::MutexGuard<'_, HashMap<String, Record>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the task that runs `running` on (a call that must wait), in the
    /// table before its id is returned.
    pub(crate) fn start(
        self: &Arc<Self>,
        principal: Option<Principal>,
        running: Running,
        resume: Resume,
    ) -> Result<Task, ErrorData> {
        let id = new_id()?;
        let created_at = now_iso();
        let mut records = self.records();
        self.expire(&mut records);
        if records.len() >= self.settings.max_tasks {
            return Err(ErrorData::internal_error(
                format!(
                    "the server holds {} tasks, its most: try again once some expire",
                    records.len()
                ),
                None,
            ));
        }
        records.insert(
            id.clone(),
            Record {
                created: Instant::now(),
                created_at: created_at.clone(),
                updated_at: created_at.clone(),
                principal,
                status: Status::Working,
                running: None,
                resume,
            },
        );
        self.run(&mut records, &id, running);
        drop(records);
        Ok(self.seed(&id, &created_at))
    }

    fn seed(&self, id: &str, at: &str) -> Task {
        Task::new(id, TaskStatus::Working, at, at)
            .with_ttl_ms(millis(self.settings.ttl))
            .with_poll_interval_ms(millis(self.settings.poll_interval))
    }

    /// Spawns `running` for the task `id`, whose end settles it.
    fn run(self: &Arc<Self>, records: &mut HashMap<String, Record>, id: &str, running: Running) {
        let table = Arc::downgrade(self);
        let owner = id.to_owned();
        let handle = tokio::spawn(async move {
            let settled = running.await;
            if let Some(table) = table.upgrade() {
                table.settle(&owner, settled);
            }
        });
        if let Some(record) = records.get_mut(id) {
            record.running = Some(handle.abort_handle());
        }
    }

    /// Files how the call of `id` ended; a task cancelled or gone meanwhile
    /// keeps what it is.
    fn settle(&self, id: &str, settled: Settled) {
        let mut records = self.records();
        let Some(record) = records.get_mut(id) else {
            return;
        };
        if !matches!(record.status, Status::Working) {
            return;
        }
        record.running = None;
        record.updated_at = now_iso();
        record.status = match settled {
            Settled::Answered(Ok(result)) => match serde_json::to_value(result) {
                Ok(Value::Object(result)) => Status::Completed(result),
                _ => Status::Failed(error_object(&ErrorData::internal_error(
                    "the result could not be written",
                    None,
                ))),
            },
            Settled::Answered(Err(error)) => Status::Failed(error_object(&error)),
            Settled::Needs(needed) => match needed.input_requests.filter(|asked| !asked.is_empty())
            {
                Some(pending) => Status::Waiting {
                    pending,
                    answered: InputResponses::new(),
                    state: needed.request_state,
                },
                None => Status::Failed(error_object(&ErrorData::internal_error(
                    "the call asked for input but named none",
                    None,
                ))),
            },
        };
    }

    /// Forgets the tasks past their time to live, stopping any still running.
    fn expire(&self, records: &mut HashMap<String, Record>) {
        let ttl = self.settings.ttl;
        records.retain(|_, record| {
            let keep = record.created.elapsed() < ttl;
            if !keep && let Some(running) = record.running.take() {
                running.abort();
            }
            keep
        });
    }

    /// The record `id`, when `principal` may see it.
    fn find<'r>(
        records: &'r mut HashMap<String, Record>,
        id: &str,
        principal: Option<&Principal>,
    ) -> Result<&'r mut Record, ErrorData> {
        match records.get_mut(id) {
            Some(record) if record.principal.as_ref() == principal => Ok(record),
            _ => Err(unknown(id)),
        }
    }

    /// `tasks/get`.
    pub(crate) fn get(
        &self,
        id: &str,
        principal: Option<&Principal>,
    ) -> Result<DetailedTask, ErrorData> {
        let mut records = self.records();
        self.expire(&mut records);
        let record = Self::find(&mut records, id, principal)?;
        let payload = match &record.status {
            Status::Working => TaskPayload::Working,
            Status::Waiting { pending, .. } => TaskPayload::InputRequired {
                input_requests: pending.clone(),
            },
            Status::Completed(result) => TaskPayload::Completed {
                result: result.clone(),
            },
            Status::Failed(error) => TaskPayload::Failed {
                error: error.clone(),
            },
            Status::Cancelled => TaskPayload::Cancelled,
        };
        let task = Task::new(
            id,
            TaskStatus::Working,
            record.created_at.clone(),
            record.updated_at.clone(),
        )
        .with_ttl_ms(millis(self.settings.ttl))
        .with_poll_interval_ms(millis(self.settings.poll_interval));
        Ok(DetailedTask::new(task, payload))
    }

    /// `tasks/update`: files the responses to requests the task is waiting on
    /// (others are ignored), and runs the call again once none is left.
    pub(crate) fn update(
        self: &Arc<Self>,
        id: &str,
        principal: Option<&Principal>,
        responses: InputResponses,
    ) -> Result<(), ErrorData> {
        let mut records = self.records();
        self.expire(&mut records);
        let record = Self::find(&mut records, id, principal)?;
        let Status::Waiting {
            pending,
            answered,
            state,
        } = &mut record.status
        else {
            // Nothing waits for input: an answer late or early changes nothing.
            return Ok(());
        };
        for (key, response) in responses {
            if pending.remove(&key).is_some() {
                answered.insert(key, response);
            }
        }
        record.updated_at = now_iso();
        if !pending.is_empty() {
            return Ok(());
        }
        let (answered, state) = (std::mem::take(answered), state.take());
        record.status = Status::Working;
        let running = (record.resume)(answered, state);
        self.run(&mut records, id, running);
        Ok(())
    }

    /// `tasks/cancel`: stops a task that has not ended; an ended one stays as
    /// it is.
    pub(crate) fn cancel(&self, id: &str, principal: Option<&Principal>) -> Result<(), ErrorData> {
        let mut records = self.records();
        self.expire(&mut records);
        let record = Self::find(&mut records, id, principal)?;
        if record.status.is_terminal() {
            return Ok(());
        }
        if let Some(running) = record.running.take() {
            running.abort();
        }
        record.status = Status::Cancelled;
        record.updated_at = now_iso();
        Ok(())
    }
}

/// A JSON-RPC error as the object a failed task inlines.
fn error_object(error: &ErrorData) -> JsonObject {
    match serde_json::to_value(error) {
        Ok(Value::Object(error)) => error,
        _ => JsonObject::new(),
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
