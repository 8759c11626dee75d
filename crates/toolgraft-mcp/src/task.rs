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
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, DetailedTask, InputRequiredResult, InputResponses, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use serde_json::Value;
use tokio::task::AbortHandle;
use tokio::time::Instant;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn answered(text: &str) -> Settled {
        Settled::Answered(Ok(CallToolResult::success(vec![
            rmcp::model::ContentBlock::text(text),
        ])))
    }

    fn never() -> Running {
        Box::pin(std::future::pending())
    }

    fn no_resume() -> Resume {
        Arc::new(|_, _| Box::pin(async { answered("again") }))
    }

    fn table(tasks: Tasks) -> Arc<Table> {
        Arc::new(Table::new(tasks))
    }

    async fn settled_status(table: &Table, id: &str, principal: Option<&Principal>) -> TaskStatus {
        for _ in 0..100 {
            let status = table.get(id, principal).unwrap().status();
            if status != TaskStatus::Working {
                return status;
            }
            tokio::task::yield_now().await;
        }
        TaskStatus::Working
    }

    #[tokio::test]
    async fn a_task_is_found_only_by_the_principal_that_made_it() {
        let table = table(Tasks::new());
        let alice = Principal::new("alice");
        let task = table
            .start(Some(alice.clone()), never(), no_resume())
            .unwrap();
        assert!(table.get(&task.task_id, Some(&alice)).is_ok());
        for other in [Some(Principal::new("bob")), None] {
            let error = table.get(&task.task_id, other.as_ref()).unwrap_err();
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert_eq!(error.message, format!("no task `{}`", task.task_id));
            assert!(table.cancel(&task.task_id, other.as_ref()).is_err());
            assert!(
                table
                    .update(&task.task_id, other.as_ref(), InputResponses::new())
                    .is_err()
            );
        }
        assert_eq!(
            table.get(&task.task_id, Some(&alice)).unwrap().status(),
            TaskStatus::Working
        );
    }

    #[tokio::test]
    async fn no_more_tasks_than_the_most_are_kept_and_ids_differ() {
        let table = table(Tasks::new().with_max_tasks(2).unwrap());
        let one = table.start(None, never(), no_resume()).unwrap();
        let two = table.start(None, never(), no_resume()).unwrap();
        assert_ne!(one.task_id, two.task_id);
        assert_eq!(one.task_id.len(), 32, "128 random bits, in hex");
        let refused = table.start(None, never(), no_resume()).unwrap_err();
        assert_eq!(refused.code, rmcp::model::ErrorCode::INTERNAL_ERROR);
        assert!(
            refused.message.contains("holds 2 tasks"),
            "{}",
            refused.message
        );
        // An ended task still counts until it expires: the client may not have read it.
        table.cancel(&one.task_id, None).unwrap();
        assert!(table.start(None, never(), no_resume()).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_is_kept_for_its_time_to_live_and_then_forgotten_and_stopped() {
        struct Dropped(Arc<AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let table = table(Tasks::new().with_ttl(Duration::from_secs(5)).unwrap());
        let stopped = Arc::new(AtomicBool::new(false));
        let guard = Dropped(stopped.clone());
        let running: Running = Box::pin(async move {
            let _guard = guard;
            std::future::pending::<Settled>().await
        });
        let task = table.start(None, running, no_resume()).unwrap();
        assert_eq!(task.ttl_ms, Some(5000));
        tokio::time::sleep(Duration::from_millis(4900)).await;
        assert!(
            table.get(&task.task_id, None).is_ok(),
            "kept for its whole time to live"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            table.get(&task.task_id, None).is_err(),
            "forgotten after it"
        );
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            stopped.load(Ordering::SeqCst),
            "the call still running was stopped"
        );
    }

    #[tokio::test]
    async fn cancel_stops_the_call_and_the_task_stays_cancelled() {
        let table = table(Tasks::new());
        let (sender, receiver) = tokio::sync::oneshot::channel::<()>();
        let running: Running = Box::pin(async move {
            let _sender = sender;
            std::future::pending::<Settled>().await
        });
        let task = table.start(None, running, no_resume()).unwrap();
        table.cancel(&task.task_id, None).unwrap();
        assert!(receiver.await.is_err(), "the call's future was dropped");
        assert_eq!(
            table.get(&task.task_id, None).unwrap().status(),
            TaskStatus::Cancelled
        );
        // Cancelling an ended task is no error and changes nothing.
        table.cancel(&task.task_id, None).unwrap();
        assert_eq!(
            table.get(&task.task_id, None).unwrap().status(),
            TaskStatus::Cancelled
        );
        assert!(table.cancel("nope", None).is_err());
    }

    #[tokio::test]
    async fn a_task_waits_for_every_request_then_runs_again_with_the_answers() {
        let table = table(Tasks::new());
        let requests: rmcp::model::InputRequests = serde_json::from_value(serde_json::json!({
            "a": {"method": "roots/list", "params": {}},
            "b": {"method": "roots/list", "params": {}},
        }))
        .unwrap();
        let first: Running = Box::pin(async move {
            Settled::Needs(InputRequiredResult::new(
                Some(requests),
                Some("s1".to_owned()),
            ))
        });
        let seen = Arc::new(Mutex::new(None));
        let resume: Resume = Arc::new({
            let seen = seen.clone();
            move |responses: InputResponses, state| {
                *seen.lock().unwrap() =
                    Some((responses.keys().cloned().collect::<Vec<_>>(), state));
                Box::pin(async { answered("done") })
            }
        });
        let task = table.start(None, first, resume).unwrap();
        let id = task.task_id;
        assert_eq!(
            settled_status(&table, &id, None).await,
            TaskStatus::InputRequired
        );
        let one = |key: &str| -> InputResponses {
            [(key.to_owned(), serde_json::json!({"roots": []}))]
                .into_iter()
                .collect()
        };
        // An answer to nothing asked is ignored; a partial one leaves the rest.
        table.update(&id, None, one("zzz")).unwrap();
        table.update(&id, None, one("a")).unwrap();
        let TaskPayload::InputRequired { input_requests } = table.get(&id, None).unwrap().payload
        else {
            panic!("still waiting");
        };
        assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["b"]);
        table.update(&id, None, one("b")).unwrap();
        assert_eq!(
            settled_status(&table, &id, None).await,
            TaskStatus::Completed
        );
        assert_eq!(
            seen.lock().unwrap().clone(),
            Some((vec!["a".to_owned(), "b".to_owned()], Some("s1".to_owned()))),
            "run again with every answer and the state, once"
        );
        // An answer after the end changes nothing.
        table.update(&id, None, one("a")).unwrap();
        assert_eq!(
            table.get(&id, None).unwrap().status(),
            TaskStatus::Completed
        );
    }

    #[tokio::test]
    async fn a_protocol_error_fails_the_task_with_it_inlined() {
        let table = table(Tasks::new());
        let running: Running =
            Box::pin(async { Settled::Answered(Err(ErrorData::internal_error("broke", None))) });
        let task = table.start(None, running, no_resume()).unwrap();
        assert_eq!(
            settled_status(&table, &task.task_id, None).await,
            TaskStatus::Failed
        );
        let TaskPayload::Failed { error } = table.get(&task.task_id, None).unwrap().payload else {
            panic!("failed");
        };
        assert_eq!(error["message"], "broke");
        assert_eq!(error["code"], -32603);
    }

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
