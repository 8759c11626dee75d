//! The tasks of one server, by id: a place reserved before a call runs, the task
//! it becomes, its progress, answers, cancellation and expiry, and the ids of
//! followed jobs.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt as _;
use rmcp::ErrorData;
use rmcp::model::{DetailedTask, InputResponses, JsonObject, Task, TaskPayload, TaskStatus};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use toolgraft::context::{Principal, Progress, ProgressSink};
use toolgraft::relocation::{Deferred, Follow};

use super::clock::{millis, now_iso};
use super::record::{Record, Records, Status, failed};
use super::settings::Tasks;
use super::settled::{Resume, Running, Settled, error_object, unknown};

/// How long an ended task (or one stopped at its time to live) is kept past
/// its time to live, for a client still polling to read how it ended.
const KEPT_PAST_TTL: Duration = Duration::from_secs(60);

/// The tasks of one server (every session's), by id.
pub(crate) struct Table {
    settings: Tasks,
    records: Mutex<Records>,
    /// Followers of deferred calls met here but not registered (this process
    /// follows their jobs; others cannot).
    adopted: Mutex<HashMap<String, Arc<dyn Follow>>>,
}

/// The prefix of the id of a task that is a followed job.
const JOB_TASK: &str = "job.";

/// A task that is a followed job: its follower, and the job's handle (what the
/// backend deferred with).
pub(crate) struct FollowedTask {
    pub(crate) follow: Arc<dyn Follow>,
    pub(crate) job: String,
}

fn new_id() -> Result<String, ErrorData> {
    let mut bytes = [0_u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| ErrorData::internal_error(format!("no random task id: {error}"), None))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// A place in the table, taken before the call first runs: a call that then
/// must wait becomes the task ([`Table::begin`]), one answered at once gives it
/// back ([`Table::release`]).
pub(crate) struct Reserved {
    pub(crate) id: String,
    /// The cancellation the task's calls see.
    pub(crate) cancel: CancellationToken,
    /// Where the calls report progress: the task's status message.
    pub(crate) progress: ProgressSink,
}

impl Table {
    pub(crate) fn new(settings: Tasks) -> Self {
        Self {
            settings,
            records: Mutex::default(),
            adopted: Mutex::default(),
        }
    }

    /// The id of the task that is `deferred`'s job: `job.` and the hex of
    /// `[follower, handle]`, which any server that follows the same backend
    /// reads back (the handle carries the job's secret).
    pub(crate) fn follow(&self, deferred: &Deferred) -> String {
        let follower = deferred.follower.follower();
        if !self.settings.followers.contains_key(&follower) {
            self.adopted
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(follower.clone())
                .or_insert_with(|| deferred.follower.clone());
        }
        let parts = serde_json::json!([follower, deferred.job]).to_string();
        let hex: String = parts.bytes().map(|byte| format!("{byte:02x}")).collect();
        format!("{JOB_TASK}{hex}")
    }

    /// The followed job an id names, when it names one this server follows.
    pub(crate) fn followed(&self, id: &str) -> Option<FollowedTask> {
        let hex = id.strip_prefix(JOB_TASK)?;
        if hex.len() % 2 != 0 || hex.len() > 4096 {
            return None;
        }
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok())
            .collect();
        let (follower, job): (String, String) = serde_json::from_slice(&bytes?).ok()?;
        let follow = match self.settings.followers.get(&follower) {
            Some(follow) => follow.clone(),
            None => self
                .adopted
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&follower)?
                .clone(),
        };
        Some(FollowedTask { follow, job })
    }

    pub(crate) fn settings(&self) -> &Tasks {
        &self.settings
    }

    fn records(&self) -> std::sync::MutexGuard<'_, Records> {
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        self.expire(&mut records);
        records
    }

    /// Takes a place for a call of `principal` that may become a task; refused
    /// when the table is full.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        principal: Option<Principal>,
    ) -> Result<Reserved, ErrorData> {
        let id = new_id()?;
        let mut records = self.records();
        if records.by_id.len() >= self.settings.max_tasks {
            return Err(ErrorData::internal_error(
                "the server holds as many tasks as it keeps: try again once some expire",
                None,
            ));
        }
        let created_at = now_iso();
        let cancel = CancellationToken::new();
        records.by_id.insert(
            id.clone(),
            Record {
                created: Instant::now(),
                created_at: created_at.clone(),
                updated_at: created_at,
                principal,
                status: Status::Working,
                cancel: cancel.clone(),
                running: None,
                begun: false,
                resume: None,
                rounds: 0,
                message: None,
            },
        );
        let progress = ProgressSink::new({
            let (table, id) = (Arc::downgrade(self), id.clone());
            move |progress: Progress| {
                if let Some(table) = table.upgrade() {
                    table.report(&id, &progress);
                }
            }
        });
        Ok(Reserved {
            id,
            cancel,
            progress,
        })
    }

    /// Gives back a place the call did not need.
    pub(crate) fn release(&self, id: &str) {
        self.records().by_id.remove(id);
    }

    /// The reserved `id` becomes the task that runs `running` on: in the table
    /// before its id is returned.
    pub(crate) fn begin(self: &Arc<Self>, id: &str, running: Running, resume: Resume) -> Task {
        let mut records = self.records();
        let created = records.by_id.get(id).map(|record| record.created);
        if let Some(created) = created {
            records.by_age.push_back((created, id.to_owned()));
        }
        let at = match records.by_id.get_mut(id) {
            Some(record) => {
                record.begun = true;
                record.resume = Some(resume);
                record.created_at.clone()
            }
            None => now_iso(),
        };
        self.run(&mut records, id, running);
        drop(records);
        Task::new(id, TaskStatus::Working, at.clone(), at)
            .with_ttl_ms(millis(self.settings.ttl))
            .with_poll_interval_ms(millis(self.settings.poll_interval))
    }

    /// Spawns `running` for the task `id`, whose end settles it; a call still
    /// running at the task's time to live is stopped there, and one that panics
    /// outside its body fails the task.
    fn run(self: &Arc<Self>, records: &mut Records, id: &str, running: Running) {
        let Some(record) = records.by_id.get_mut(id) else {
            return;
        };
        let deadline = record.created + self.settings.ttl;
        let table = Arc::downgrade(self);
        let owner = id.to_owned();
        // The task's call goes on in the span it was begun in (the request's
        // server span, with `otel`): its layers' and a worker's spans stay in
        // the client's trace, after the request that made the task has ended.
        let span = tracing::Span::current();
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        let handle = tokio::spawn(tracing::instrument::WithSubscriber::with_subscriber(
            tracing::Instrument::instrument(
                async move {
                    let bounded =
                        tokio::time::timeout_at(deadline, AssertUnwindSafe(running).catch_unwind());
                    let settled = match bounded.await {
                        Ok(Ok(settled)) => settled,
                        Ok(Err(_)) => Settled::Answered(Err(ErrorData::internal_error(
                            "the task's call panicked",
                            None,
                        ))),
                        Err(_) => Settled::Answered(Err(ErrorData::internal_error(
                            "the task ran to its time to live and was stopped",
                            None,
                        ))),
                    };
                    if let Some(table) = table.upgrade() {
                        table.settle(&owner, settled);
                    }
                },
                span,
            ),
            dispatch,
        ));
        record.running = Some(handle.abort_handle());
    }

    /// Files the progress the call of `id` reported, as its status message.
    fn report(&self, id: &str, progress: &Progress) {
        let mut records = self.records();
        let Some(record) = records.by_id.get_mut(id) else {
            return;
        };
        let done = match progress.total {
            Some(total) => format!("{}/{total}", progress.progress),
            None => progress.progress.to_string(),
        };
        record.message = Some(match &progress.message {
            Some(message) => format!("{done}: {message}"),
            None => done,
        });
        record.updated_at = now_iso();
    }

    /// Files how the call of `id` ended; a task cancelled or gone meanwhile
    /// keeps what it is.
    fn settle(&self, id: &str, settled: Settled) {
        let mut records = self.records();
        let Some(record) = records.by_id.get_mut(id) else {
            return;
        };
        if !matches!(record.status, Status::Working) {
            return;
        }
        record.running = None;
        record.updated_at = now_iso();
        record.status = match settled {
            Settled::Answered(Ok(result)) => match serde_json::to_value(result) {
                Ok(Value::Object(result)) => Status::Completed(Arc::new(result)),
                _ => failed("the result could not be written"),
            },
            Settled::Answered(Err(error)) => Status::Failed(Arc::new(error_object(&error))),
            Settled::Needs(needed) => match needed.input_requests.filter(|asked| !asked.is_empty())
            {
                Some(asked) => {
                    record.rounds += 1;
                    let round = record.rounds;
                    let pending = asked
                        .into_iter()
                        .map(|(key, request)| {
                            let answered_as = match round {
                                1 => key.clone(),
                                later => format!("{key}.{later}"),
                            };
                            (answered_as, (key, request))
                        })
                        .collect();
                    Status::Waiting {
                        pending,
                        answered: InputResponses::new(),
                        state: needed.request_state,
                    }
                }
                None => failed("the call asked for input but named none"),
            },
        };
        if record.status.is_terminal() {
            record.resume = None;
        }
    }

    /// Forgets the tasks past their time to live (and the grace after it),
    /// stopping any still running.
    fn expire(&self, records: &mut Records) {
        let kept = self.settings.ttl + KEPT_PAST_TTL;
        while let Some((created, _)) = records.by_age.front()
            && created.elapsed() >= kept
        {
            let Some((_, id)) = records.by_age.pop_front() else {
                break;
            };
            if let Some(record) = records.by_id.remove(&id) {
                record.cancel.cancel();
                if let Some(running) = record.running {
                    running.abort();
                }
            }
        }
    }

    /// The record `id`, when `principal` may see it: a place reserved for a
    /// call that is not a task (yet) is none.
    fn find<'r>(
        records: &'r mut Records,
        id: &str,
        principal: Option<&Principal>,
    ) -> Result<&'r mut Record, ErrorData> {
        match records.by_id.get_mut(id) {
            Some(record) if record.begun && record.principal.as_ref() == principal => Ok(record),
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
        let record = Self::find(&mut records, id, principal)?;
        let payload = match &record.status {
            Status::Working => TaskPayload::Working,
            Status::Waiting { pending, .. } => TaskPayload::InputRequired {
                input_requests: pending
                    .iter()
                    .map(|(answered_as, (_, request))| (answered_as.clone(), request.clone()))
                    .collect(),
            },
            Status::Completed(result) => TaskPayload::Completed {
                result: JsonObject::clone(result),
            },
            Status::Failed(error) => TaskPayload::Failed {
                error: JsonObject::clone(error),
            },
            Status::Cancelled => TaskPayload::Cancelled,
        };
        let mut task = Task::new(
            id,
            TaskStatus::Working,
            record.created_at.clone(),
            record.updated_at.clone(),
        )
        .with_ttl_ms(millis(self.settings.ttl))
        .with_poll_interval_ms(millis(self.settings.poll_interval));
        if let (Some(message), TaskPayload::Working) = (&record.message, &payload) {
            task = task.with_status_message(message.clone());
        }
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
        let mut filed = false;
        for (answered_as, response) in responses {
            if let Some((key, _)) = pending.remove(&answered_as) {
                answered.insert(key, response);
                filed = true;
            }
        }
        if !filed {
            return Ok(());
        }
        record.updated_at = now_iso();
        if !pending.is_empty() {
            return Ok(());
        }
        let (answered, state) = (std::mem::take(answered), state.take());
        record.status = Status::Working;
        let Some(resume) = record.resume.clone() else {
            return Ok(());
        };
        let running = resume(answered, state);
        self.run(&mut records, id, running);
        Ok(())
    }

    /// `tasks/cancel`: stops a task that has not ended; an ended one stays as
    /// it is.
    pub(crate) fn cancel(&self, id: &str, principal: Option<&Principal>) -> Result<(), ErrorData> {
        let mut records = self.records();
        let record = Self::find(&mut records, id, principal)?;
        if record.status.is_terminal() {
            return Ok(());
        }
        record.cancel.cancel();
        if let Some(running) = record.running.take() {
            running.abort();
        }
        record.status = Status::Cancelled;
        record.resume = None;
        record.updated_at = now_iso();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResult, InputRequiredResult};
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

    /// A call that must wait, as the server makes it a task.
    fn start(
        table: &Arc<Table>,
        principal: Option<Principal>,
        running: Running,
        resume: Resume,
    ) -> Result<Task, ErrorData> {
        let reserved = table.reserve(principal)?;
        Ok(table.begin(&reserved.id, running, resume))
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
        let task = start(&table, Some(alice.clone()), never(), no_resume()).unwrap();
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
        let one = start(&table, None, never(), no_resume()).unwrap();
        let two = start(&table, None, never(), no_resume()).unwrap();
        assert_ne!(one.task_id, two.task_id);
        assert_eq!(one.task_id.len(), 32, "128 random bits, in hex");
        let refused = start(&table, None, never(), no_resume()).unwrap_err();
        assert_eq!(refused.code, rmcp::model::ErrorCode::INTERNAL_ERROR);
        assert_eq!(
            refused.message,
            "the server holds as many tasks as it keeps: try again once some expire",
            "and not how many that is"
        );
        // An ended task still counts until it expires: the client may not have read it.
        table.cancel(&one.task_id, None).unwrap();
        assert!(start(&table, None, never(), no_resume()).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_runs_no_longer_than_its_time_to_live_and_is_read_a_while_after() {
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
        let task = start(&table, None, running, no_resume()).unwrap();
        assert_eq!(task.ttl_ms, Some(5000));
        tokio::time::sleep(Duration::from_millis(4900)).await;
        assert_eq!(
            table.get(&task.task_id, None).unwrap().status(),
            TaskStatus::Working
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            stopped.load(Ordering::SeqCst),
            "stopped at its time to live"
        );
        let stopped_task = table.get(&task.task_id, None).unwrap();
        let TaskPayload::Failed { error } = stopped_task.payload else {
            panic!("failed, not {:?}", stopped_task.task.status);
        };
        assert_eq!(
            error["message"],
            "the task ran to its time to live and was stopped"
        );
        tokio::time::sleep(KEPT_PAST_TTL).await;
        assert!(
            table.get(&task.task_id, None).is_err(),
            "forgotten a while after"
        );
    }

    #[tokio::test]
    async fn a_place_reserved_is_no_task_until_it_begins_and_can_be_given_back() {
        let table = table(Tasks::new().with_max_tasks(1).unwrap());
        let reserved = table.reserve(None).unwrap();
        assert!(table.get(&reserved.id, None).is_err(), "not a task yet");
        assert!(table.reserve(None).is_err(), "but it holds its place");
        table.release(&reserved.id);
        let again = table.reserve(None).unwrap();
        table.begin(&again.id, never(), no_resume());
        assert!(table.get(&again.id, None).is_ok());
    }

    #[tokio::test]
    async fn progress_is_the_working_task_s_status_message() {
        let table = table(Tasks::new());
        let reserved = table.reserve(None).unwrap();
        reserved
            .progress
            .send(Progress::new(2.0).with_total(4.0).with_message("half"));
        table.begin(&reserved.id, never(), no_resume());
        let task = table.get(&reserved.id, None).unwrap();
        assert_eq!(task.task.status_message.as_deref(), Some("2/4: half"));
    }

    #[tokio::test]
    async fn cancel_cancels_the_token_the_call_sees() {
        let table = table(Tasks::new());
        let reserved = table.reserve(None).unwrap();
        table.begin(&reserved.id, never(), no_resume());
        assert!(!reserved.cancel.is_cancelled());
        table.cancel(&reserved.id, None).unwrap();
        assert!(reserved.cancel.is_cancelled());
    }

    #[tokio::test]
    async fn cancel_stops_the_call_and_the_task_stays_cancelled() {
        let table = table(Tasks::new());
        let (sender, receiver) = tokio::sync::oneshot::channel::<()>();
        let running: Running = Box::pin(async move {
            let _sender = sender;
            std::future::pending::<Settled>().await
        });
        let task = start(&table, None, running, no_resume()).unwrap();
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
        let task = start(&table, None, first, resume).unwrap();
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
    async fn a_later_round_asks_under_new_keys_so_an_old_answer_answers_nothing() {
        let table = table(Tasks::new());
        let asking = || -> Running {
            let requests: rmcp::model::InputRequests = serde_json::from_value(serde_json::json!({
                "confirm": {"method": "roots/list", "params": {}},
            }))
            .unwrap();
            Box::pin(async move { Settled::Needs(InputRequiredResult::new(Some(requests), None)) })
        };
        let seen = Arc::new(Mutex::new(Vec::new()));
        let resume: Resume = Arc::new({
            let seen = seen.clone();
            move |responses: InputResponses, _| {
                seen.lock()
                    .unwrap()
                    .push(responses.keys().cloned().collect::<Vec<_>>());
                asking()
            }
        });
        let id = start(&table, None, asking(), resume).unwrap().task_id;
        assert_eq!(
            settled_status(&table, &id, None).await,
            TaskStatus::InputRequired
        );
        let answer = |key: &str| -> InputResponses {
            [(key.to_owned(), serde_json::json!({}))]
                .into_iter()
                .collect()
        };
        table.update(&id, None, answer("confirm")).unwrap();
        assert_eq!(
            settled_status(&table, &id, None).await,
            TaskStatus::InputRequired
        );
        let TaskPayload::InputRequired { input_requests } = table.get(&id, None).unwrap().payload
        else {
            panic!("asked again");
        };
        assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["confirm.2"]);
        // A late copy of the first answer answers nothing now.
        table.update(&id, None, answer("confirm")).unwrap();
        assert_eq!(
            table.get(&id, None).unwrap().status(),
            TaskStatus::InputRequired
        );
        table.update(&id, None, answer("confirm.2")).unwrap();
        settled_status(&table, &id, None).await;
        // The call reads its own key, whatever the round.
        assert_eq!(
            *seen.lock().unwrap(),
            [vec!["confirm".to_owned()], vec!["confirm".to_owned()]]
        );
    }

    #[tokio::test]
    async fn a_protocol_error_fails_the_task_with_it_inlined() {
        let table = table(Tasks::new());
        let running: Running =
            Box::pin(async { Settled::Answered(Err(ErrorData::internal_error("broke", None))) });
        let task = start(&table, None, running, no_resume()).unwrap();
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
}
