//! Calls that become MCP tasks: a task of the server's table from the start or
//! the moment it must wait, and a call a followed backend defers, whose task is
//! its job (read and cancelled through the backend's store).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CreateTaskResult, DetailedTask, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use toolgraft::context::{self, Identity, Principal};
use toolgraft::relocation::{Deferral, Deferred, Phase};

use super::ToolsetServer;
use super::answer::settled;
use super::rendering::deferring_backend;
use crate::call;
use crate::outcome::to_mcp;
use crate::task::{self, FollowedTask, Resume, Running, Table, TaskMoment};
use crate::tool::{OutputShape, Rendering};

impl<H: Send + Sync + 'static> ToolsetServer<H> {
    /// A call that may become a task: a relocated one is a task from the start
    /// (its body leaves the caller's process, or thread, and whether it is done
    /// by the time it is first asked is a race); any other is answered at once
    /// when it has its answer (or a request for input) without waiting, and is a
    /// task the moment it must wait, or, where it is forwarded to a server that
    /// makes tasks, the moment that server makes one ([`TaskMoment`]).
    pub(super) async fn call_as_task(
        &self,
        tasks: Arc<Table>,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        shape: OutputShape,
        rendering: Rendering,
        relocated: bool,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let arguments = arguments_of(&request.arguments);
        // The place is taken before the call runs: a call that must wait is a
        // task, never a call begun and then refused for want of room.
        let reserved = tasks.reserve(call::principal_of(&context))?;
        let mut context = context;
        // The request's own, heeded while the call is held from becoming a
        // task (see below).
        let request_cancelled = context.ct.clone();
        // The task's own: the request is answered when the call becomes a task.
        context.ct = reserved.cancel.clone();
        let (toolset, bad_arguments) = (self.toolset.clone(), self.bad_arguments);
        let run = Arc::new(
            move |context: RequestContext<RoleServer>, brought: call::Brought| -> Running {
                let (toolset, name, arguments) = (toolset.clone(), name.clone(), arguments.clone());
                Box::pin(async move {
                    let call = toolset.call_published(&name, arguments);
                    let outcome = call::serve(context, brought, call).await;
                    settled(outcome, &name, rendering, bad_arguments, shape)
                })
            },
        );
        // Every run is the stateless protocol's (tasks are 2026-07-28's): an
        // approval seals the arguments as sent, and asks by a request for input.
        let brought = {
            let arguments = arguments_of(&request.arguments);
            let progress = reserved.progress.clone();
            let handler: call::SessionHandler = self.handler.clone();
            let session = self.session_of(&request.name, call::identity_of(&context).as_ref());
            move |responses, state| call::Brought {
                responses,
                state,
                stateless: true,
                arguments: Some(arguments.clone()),
                progress: Some(progress.clone()),
                deferral: None,
                handler: Some(handler.clone()),
                session,
                session_level: None,
            }
        };
        // The first run only: a run again with answers is a task's already.
        let moment = TaskMoment::new();
        let mut running: Running = Box::pin(context::with(
            moment.clone(),
            run(
                context.clone(),
                brought(request.input_responses, request.request_state),
            ),
        ));
        if !relocated {
            // Held, the request waits (up to `HOLD_AT_MOST`) before it is
            // answered: a cancelled one ends the call there, or it would go on
            // as a task whose id nobody was given.
            let settled = tokio::select! {
                biased;
                settled = moment.settled(&mut running) => Some(settled),
                () = request_cancelled.cancelled() => None,
            };
            match settled {
                Some(None) => {}
                Some(Some(settled)) => {
                    tasks.release(&reserved.id);
                    return settled.into();
                }
                None => {
                    tasks.release(&reserved.id);
                    return Err(ErrorData::internal_error(
                        format!("the call to `{}` was cancelled", request.name),
                        None,
                    ));
                }
            }
        }
        // Again with what a request for input brought, as the client's next call
        // would bring it.
        let resume: Resume =
            Arc::new(move |responses, state| run(context.clone(), brought(Some(responses), state)));
        let task = tasks.begin(&reserved.id, running, resume);
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }
}

/// What the handler answered for a task the table does not hold: a handler
/// without tasks of its own leaves the table's "no task" standing.
pub(super) fn or_unknown<T>(
    theirs: Result<T, ErrorData>,
    unknown: ErrorData,
) -> Result<T, ErrorData> {
    match theirs {
        Err(error) if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND => Err(unknown),
        answered => answered,
    }
}

/// The arguments of a call as the client sent them.
fn arguments_of(arguments: &Option<JsonObject>) -> Value {
    arguments.clone().map_or(Value::Null, Value::Object)
}

impl<H: Send + Sync + 'static> ToolsetServer<H> {
    /// A call a backend may defer: enqueued and answered with the task that is
    /// its job (which any server following the backend answers for), or
    /// answered as it ends when it did not defer (a layer outside asked first,
    /// or failed).
    pub(super) async fn call_deferred(
        &self,
        tasks: Arc<Table>,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        rendering: Rendering,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let arguments = arguments_of(&request.arguments);
        let brought = call::Brought {
            responses: request.input_responses,
            state: request.request_state,
            stateless: true,
            arguments: Some(arguments.clone()),
            progress: None,
            deferral: Some(Deferral::offer(tasks.settings().follower_keys())),
            handler: Some(self.handler.clone()),
            session: self.session_of(&name, call::identity_of(&context).as_ref()),
            session_level: self.session_level(),
        };
        let call = self.toolset.call_published(&name, arguments);
        let outcome = call::serve(context, brought, call).await;
        if let Err(error) = &outcome
            && let Some(deferred) = error.downcast_ref::<Deferred>()
        {
            let id = tasks.follow(deferred);
            let now = task::now_iso();
            let task = Task::new(id, TaskStatus::Working, now.clone(), now)
                .with_ttl_ms(task::millis(deferred.follower.kept_for()))
                .with_poll_interval_ms(task::millis(tasks.settings().poll_interval()));
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        settled(
            outcome,
            &name,
            rendering,
            self.bad_arguments,
            OutputShape::AnyJson,
        )
        .into()
    }

    /// `tasks/get` of a followed job: its phase, read from its backend's store.
    pub(super) async fn get_followed(
        &self,
        id: &str,
        followed: FollowedTask,
        principal: Option<&Principal>,
        identity: Option<&Identity>,
    ) -> Result<DetailedTask, ErrorData> {
        let found = followed
            .follow
            .status(&followed.job)
            .await
            .map_err(|error| {
                ErrorData::internal_error(
                    format!("task `{id}`: its job cannot be read: {error}"),
                    None,
                )
            })?;
        // The job's own principal, and a name this server serves through that
        // backend: or the id is none.
        let serves = |called: &str| {
            self.toolset
                .resolve_for(identity, called)
                .is_some_and(|info| {
                    deferring_backend(&info)
                        .is_some_and(|backend| backend.as_str() == followed.follow.backend())
                })
        };
        let Some(found) =
            found.filter(|found| found.principal.as_ref() == principal && serves(&found.called))
        else {
            return Err(task::unknown(id));
        };
        let payload = match found.phase {
            Phase::Waiting => TaskPayload::Working,
            Phase::Cancelled => TaskPayload::Cancelled,
            Phase::Ended(outcome) => {
                let rendering = self.rendering(&found.called, identity, OutputShape::AnyJson);
                match to_mcp(outcome, &found.called, rendering, self.bad_arguments) {
                    Ok(result) => TaskPayload::Completed {
                        result: task::object_of(&result),
                    },
                    Err(error) => TaskPayload::Failed {
                        error: task::error_object(&error),
                    },
                }
            }
            // Phases newer than this crate.
            _ => TaskPayload::Working,
        };
        let task = Task::new(id, TaskStatus::Working, found.since, task::now_iso())
            .with_ttl_ms(task::millis(followed.follow.kept_for()))
            .with_poll_interval_ms(task::millis(
                self.tasks
                    .as_ref()
                    .map_or(Duration::from_millis(500), |tasks| {
                        tasks.settings().poll_interval()
                    }),
            ));
        Ok(DetailedTask::new(task, payload))
    }
}
