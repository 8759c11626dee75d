//! The rmcp [`ServerHandler`] of a [`ToolsetServer`]: requests about the
//! toolset's tools answered here, every other one by the author's handler as it came.

use std::future::Future;
use std::sync::PoisonError;

use futures_util::future::Either;

#[allow(deprecated)] // `SetLevelRequestParams`: logging, which a handler may still serve.
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CancelledNotificationParam,
    ClientCapabilities, CompleteRequestParams, CompleteResult, CustomNotification, CustomRequest,
    CustomResult, GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams, GetSkillResult,
    GetTaskParams, GetTaskResult, InitializeRequestParams, InitializeResult, JsonObject,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use schemars::Schema;
use serde_json::Value;
use toolgraft::schema::ArgNames;
use toolgraft::{Name, ToolError};

use super::answer::settled;
use super::listing::{Lister, Shown};
use super::notify::Notifier;
use super::tasks::or_unknown;
use super::{ToolsetServer, add_tasks, add_tools};
use crate::call;
use crate::outcome::UnknownArguments;
use crate::task::TaskSupport;
use crate::tool::{OutputShape, Rendering};

/// Methods that are not about tools, answered by the handler as they came.
macro_rules! forward {
    ($($(#[$attr:meta])* $method:ident($($arg:ident: $ty:ty),*) -> $out:ty;)+) => {$(
        $(#[$attr])*
        async fn $method(&self, $($arg: $ty),*) -> $out {
            self.handler.$method($($arg),*).await
        }
    )+};
}

impl<H> ToolsetServer<H> {
    /// Whether `name` is the toolset's, bound or published: the handler's tool of
    /// that name is neither listed nor called (an alias the toolset publishes is
    /// the toolset's, whatever the handler's tools are named).
    fn serves(&self, name: &str) -> bool {
        self.toolset.contains(name) || self.toolset.is_published(name)
    }

    /// The error for the first argument of `request` that its tool's listed
    /// input schema does not name, if any ([`UnknownArguments::Refuse`]): the
    /// schema the caller `identity` was listed, which its
    /// [audience](toolgraft::toolset::Edit::audience) decides.
    fn unknown_argument(
        &self,
        request: &CallToolRequestParams,
        identity: Option<&toolgraft::context::Identity>,
    ) -> Option<ToolError> {
        let arguments = request.arguments.as_ref()?;
        let listing = if self.toolset.is_guarded() {
            self.lister().shown(identity, OutputShape::AnyJson).tools
        } else {
            self.listing(OutputShape::AnyJson)
        };
        let at = listing
            .binary_search_by(|tool| tool.name.as_ref().cmp(&request.name))
            .ok()?;
        let schema = Schema::from(JsonObject::clone(&listing[at].input_schema));
        let refused = ArgNames::of(&schema).check(arguments).err()?;
        let called = Name::new(request.name.as_ref()).ok()?;
        Some(refused.for_tool(&called))
    }
}

impl<H: ServerHandler> ServerHandler for ToolsetServer<H> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::clone(&self.info)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        self.handler.supported_protocol_versions()
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        #[cfg(feature = "otel")]
        self.instruments
            .initialized(&context, request.protocol_version.as_str());
        {
            let mut notifier = self.notifier.lock().unwrap_or_else(PoisonError::into_inner);
            if matches!(*notifier, Notifier::Idle) {
                *notifier = Notifier::Armed(self.toolset.changes());
            }
        }
        // What the client would be shown now: a change that changes none of it
        // is not told, even before its first list.
        let identity = call::identity_of(&context);
        let shape = OutputShape::for_protocol(Some(&request.protocol_version));
        let view = self.lister().shown(identity.as_ref(), shape);
        self.remember(Shown {
            identity,
            shape,
            view,
        });
        // The handler negotiates (and does what else it does at initialize);
        // the server says what it is as a whole.
        let mut result = self.handler.initialize(request, context).await?;
        add_tools(&mut result.capabilities);
        if self.tasks.is_some() {
            add_tasks(&mut result.capabilities);
        }
        self.overrides
            .apply(&mut result.server_info, &mut result.instructions);
        Ok(result)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let changes = {
            let mut notifier = self.notifier.lock().unwrap_or_else(PoisonError::into_inner);
            match std::mem::replace(&mut *notifier, Notifier::Running) {
                Notifier::Armed(changes) => Some(changes),
                Notifier::Idle => Some(self.toolset.changes()),
                Notifier::Running => None,
            }
        };
        if let Some(changes) = changes {
            self.spawn_notifier(context.peer.clone(), changes);
        }
        self.handler.on_initialized(context).await;
    }

    fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + Send + '_ {
        #[cfg(feature = "otel")]
        {
            let operation = crate::otel::Operation {
                method: "tools/list",
                tool: None,
            };
            let served = crate::otel::Served::new(operation, &context);
            served.serve(
                &self.instruments,
                crate::otel::failed_request,
                self.list_all(request, context),
            )
        }
        #[cfg(not(feature = "otel"))]
        self.list_all(request, context)
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + Send + '_ {
        #[cfg(feature = "otel")]
        {
            let operation = crate::otel::Operation {
                method: "tools/call",
                tool: Some((request.name.as_ref(), self.serves(&request.name))),
            };
            let served = crate::otel::Served::new(operation, &context);
            // Boxed: the span, the metric's attributes and the clock beside the
            // call would add 900 bytes to the future rmcp copies into every
            // request's task (`import::future_sizes`).
            Box::pin(served.serve(
                &self.instruments,
                crate::otel::failed_call,
                self.dispatch_call(request, context),
            ))
        }
        #[cfg(not(feature = "otel"))]
        self.dispatch_call(request, context)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        // rmcp reads the input schema from this (which no shape changes) for every
        // call of protocol `2026-07-28`: taken from the shared listing, sorted by
        // name, it is not copied per call. It names no caller: the HTTP layer
        // says who asks (no one elsewhere), and a name this caller may not call
        // is found no more than one that does not exist, nor is the handler's
        // tool of that name.
        let listing = if self.toolset.is_guarded() {
            let caller = call::caller();
            self.lister()
                .shown(caller.as_ref(), OutputShape::AnyJson)
                .tools
        } else {
            self.listing(OutputShape::AnyJson)
        };
        let found = listing.binary_search_by(|tool| tool.name.as_ref().cmp(name));
        match found {
            Ok(index) => Some(listing[index].clone()),
            Err(_) if self.handler_tools && !self.serves(name) => self.handler.get_tool(name),
            Err(_) => None,
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let Some(tasks) = &self.tasks else {
            return self.handler.get_task(request, context).await;
        };
        let principal = call::principal_of(&context);
        if let Some(followed) = tasks.followed(&request.task_id) {
            return self
                .get_followed(
                    &request.task_id,
                    followed,
                    principal.as_ref(),
                    call::identity_of(&context).as_ref(),
                )
                .await
                .map(GetTaskResult::new);
        }
        match tasks.get(&request.task_id, principal.as_ref()) {
            Ok(task) => Ok(GetTaskResult::new(task)),
            // Perhaps a task of the handler's own tools.
            Err(unknown) => or_unknown(self.handler.get_task(request, context).await, unknown),
        }
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let Some(tasks) = &self.tasks else {
            return self.handler.update_task(request, context).await;
        };
        let principal = call::principal_of(&context);
        if let Some(followed) = tasks.followed(&request.task_id) {
            // A job asks nothing of its caller: known, nothing to file.
            return self
                .get_followed(
                    &request.task_id,
                    followed,
                    principal.as_ref(),
                    call::identity_of(&context).as_ref(),
                )
                .await
                .map(drop);
        }
        let responses = request.input_responses.clone();
        match tasks.update(&request.task_id, principal.as_ref(), responses) {
            Ok(()) => Ok(()),
            Err(unknown) => or_unknown(self.handler.update_task(request, context).await, unknown),
        }
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let Some(tasks) = &self.tasks else {
            return self.handler.cancel_task(request, context).await;
        };
        let principal = call::principal_of(&context);
        if let Some(followed) = tasks.followed(&request.task_id) {
            let (follow, job) = (followed.follow.clone(), followed.job.clone());
            // Known to this caller first: an id is no way to cancel another's job.
            self.get_followed(
                &request.task_id,
                followed,
                principal.as_ref(),
                call::identity_of(&context).as_ref(),
            )
            .await?;
            return follow.cancel(&job).await.map_err(|error| {
                ErrorData::internal_error(format!("the job cannot be cancelled: {error}"), None)
            });
        }
        match tasks.cancel(&request.task_id, principal.as_ref()) {
            Ok(()) => Ok(()),
            Err(unknown) => or_unknown(self.handler.cancel_task(request, context).await, unknown),
        }
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp narrows this to what the client asked for.
        let mut accepted = self
            .handler
            .accepted_subscription_filter(requested)
            .unwrap_or_default();
        accepted.tools_list_changed = Some(true);
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let tools = (context.accepted().tools_list_changed == Some(true)).then(|| {
            let sink = context.sink().clone();
            let request = context.request_context();
            let ended = request.ct.clone();
            let mut changes = self.toolset.changes();
            // Told of the changes that change what this caller is shown, from
            // what it would be shown as it subscribes.
            let identity = call::identity_of(request);
            let shape = OutputShape::for_protocol(request.protocol_version().as_ref());
            let view = self.lister().shown(identity.as_ref(), shape);
            let mut shown = Shown {
                identity,
                shape,
                view,
            };
            let (toolset, listings) = (self.toolset.clone(), self.listings.clone());
            let unknown_arguments = self.unknown_arguments;
            async move {
                loop {
                    tokio::select! {
                        () = ended.cancelled() => return,
                        changed = changes.changed() => if changed.is_err() { return },
                    }
                    let lister = Lister {
                        toolset: &toolset,
                        listings: &listings,
                        changes: &changes,
                        unknown_arguments,
                    };
                    if !shown.changed(&lister) {
                        continue;
                    }
                    // A send fails only once the stream or the connection is gone.
                    if sink.notify_tool_list_changed().await.is_err() {
                        return;
                    }
                }
            }
        });
        // Boxed, as the call is (see `import::future_sizes`).
        let mut theirs = Box::pin(self.handler.listen(context));
        let Some(tools) = tools else {
            return theirs.await;
        };
        let tools = Box::pin(tools);
        // The subscription lasts as long as the handler's part of it; the
        // toolset's part ending (the stream gone) leaves the handler's running.
        tokio::select! {
            outcome = &mut theirs => return outcome,
            () = tools => {}
        }
        theirs.await
    }

    /// Kept for the toolset's calls on this connection, and passed on: a
    /// handler that serves no logging of its own answers for the toolset.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.set_session_level(call::level_of(request.level));
        match self.handler.set_level(request, context).await {
            Err(error) if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND => Ok(()),
            other => other,
        }
    }

    forward! {
        ping(context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        complete(request: CompleteRequestParams, context: RequestContext<RoleServer>) -> Result<CompleteResult, ErrorData>;
        get_prompt(request: GetPromptRequestParams, context: RequestContext<RoleServer>) -> Result<GetPromptResponse, ErrorData>;
        list_prompts(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListPromptsResult, ErrorData>;
        list_resources(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListResourcesResult, ErrorData>;
        list_resource_templates(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListResourceTemplatesResult, ErrorData>;
        read_resource(request: ReadResourceRequestParams, context: RequestContext<RoleServer>) -> Result<ReadResourceResponse, ErrorData>;
        #[allow(deprecated)]
        subscribe(request: SubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        #[allow(deprecated)]
        unsubscribe(request: UnsubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData>;
        on_custom_request(request: CustomRequest, context: RequestContext<RoleServer>) -> Result<CustomResult, ErrorData>;
        on_cancelled(notification: CancelledNotificationParam, context: NotificationContext<RoleServer>) -> ();
        on_progress(notification: ProgressNotificationParam, context: NotificationContext<RoleServer>) -> ();
        on_roots_list_changed(context: NotificationContext<RoleServer>) -> ();
        on_custom_notification(notification: CustomNotification, context: NotificationContext<RoleServer>) -> ();
        list_skills(request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListSkillsResult, ErrorData>;
        get_skill(request: GetSkillRequestParams, context: RequestContext<RoleServer>) -> Result<GetSkillResult, ErrorData>;
        read_resource_directory(request: ReadResourceDirectoryRequestParams, context: RequestContext<RoleServer>) -> Result<ReadResourceDirectoryResult, ErrorData>;
    }
}

impl<H: ServerHandler> ToolsetServer<H> {
    /// A `tools/list`: the toolset's tools, then the handler's.
    async fn list_all(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let shape = OutputShape::for_protocol(context.protocol_version().as_ref());
        // Exactly the names this caller may call: every published one when the
        // toolset has no policy.
        let identity = call::identity_of(&context);
        let shown = self.lister().shown(identity.as_ref(), shape);
        // Copied outside the listings' lock; the copy shares every schema.
        let ours = Vec::clone(&shown.tools);
        self.remember(Shown {
            identity,
            shape,
            view: shown,
        });
        if !self.handler_tools {
            return Ok(ListToolsResult::with_all_items(ours));
        }
        // The toolset's tools come first, whole, on the first page; the handler's
        // follow, page by page as it pages them, under names the toolset does
        // not bind (published or hidden: a hidden name is still the toolset's,
        // and one a policy keeps from this caller too).
        let first_page = request
            .as_ref()
            .is_none_or(|request| request.cursor.is_none());
        let mut theirs = self.handler.list_tools(request, context).await?;
        theirs.tools.retain(|tool| !self.serves(&tool.name));
        if first_page {
            let mut tools = ours;
            tools.append(&mut theirs.tools);
            theirs.tools = tools;
        }
        Ok(theirs)
    }

    /// A `tools/call`: the handler's tool, or the toolset's.
    fn dispatch_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + Send + '_ {
        // One of three futures, none inside another: each costs its own size,
        // and a toolset's call stays as small as it is without policies (see
        // `import::future_sizes`); a guarded one is boxed.
        type Boxed<'a> = std::pin::Pin<
            Box<dyn Future<Output = Result<CallToolResponse, ErrorData>> + Send + 'a>,
        >;
        if self.handler_tools {
            if !self.serves(&request.name) {
                return Either::Left(Either::Left(self.handler.call_tool(request, context)));
            }
            // A name of the toolset's that this caller is not shown answers
            // as rmcp's tool router answers a name it does not have: the
            // handler's tools are beside the toolset's, and another answer
            // would tell the name exists. (Not the handler's own answer: its
            // tool of that name, when it has one, is what the toolset guards.)
            if !self
                .toolset
                .visible(call::identity_of(&context).as_ref(), &request.name)
            {
                let unknown = ErrorData::invalid_params("tool not found", None);
                return Either::Right(Box::pin(std::future::ready(Err(unknown))) as Boxed<'_>);
            }
        }
        if !self.toolset.is_guarded() {
            return Either::Left(Either::Right(self.call_toolset(request, context)));
        }
        Either::Right(Box::pin(self.call_guarded(request, context)) as Boxed<'_>)
    }
}

impl<H: ServerHandler> ToolsetServer<H> {
    /// A `tools/call` of the toolset's name, in a toolset with access policies.
    async fn call_guarded(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // A name this caller may not call is answered as one that does not
        // exist, before anything else could tell them apart (its schema's
        // checks, its tasks, the handler's tool of that name). The toolset
        // checks again, with the arguments, as the call begins.
        let identity = call::identity_of(&context);
        if !self.toolset.visible(identity.as_ref(), &request.name) {
            let shape = OutputShape::for_protocol(context.protocol_version().as_ref());
            let unknown = ToolError::UnknownTool {
                name: toolgraft::error::shorten(&request.name).into_owned(),
            };
            return settled(
                Err(unknown),
                &request.name,
                Rendering::Text,
                self.bad_arguments,
                shape,
            )
            .into();
        }
        #[cfg(feature = "http")]
        let step_up = call::step_up_of(&context);
        let answer = self.call_toolset(request, context).await;
        // Over HTTP, a refusal for want of scopes becomes `403` with a challenge
        // naming those a new token needs: the ones held, so that it loses none,
        // and the ones missing.
        #[cfg(feature = "http")]
        if let (Some(step_up), Err(refused)) = (step_up, &answer)
            && let Some(missing) = crate::outcome::missing_scopes(refused)
        {
            let mut scopes: Vec<String> = identity
                .iter()
                .flat_map(|identity| identity.scopes())
                .map(str::to_owned)
                .chain(missing)
                .collect();
            scopes.sort_unstable();
            scopes.dedup();
            let _ = step_up.0.set(scopes);
        }
        answer
    }

    /// A `tools/call` of the toolset's name, which the caller may see.
    async fn call_toolset(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let shape = OutputShape::for_protocol(context.protocol_version().as_ref());
        let identity = call::identity_of(&context);
        let renderings = self.renderings(&request.name, identity.as_ref());
        let rendering = renderings.map_or(Rendering::Text, |known| known.for_shape(shape));
        if self.unknown_arguments == UnknownArguments::Refuse
            && let Some(unknown) = self.unknown_argument(&request, identity.as_ref())
        {
            return settled(
                Err(unknown),
                &request.name,
                rendering,
                self.bad_arguments,
                shape,
            )
            .into();
        }
        // A name that is never a task (every name of a server without tasks)
        // reads nothing more: the client's capabilities are a copy to take.
        let support = match renderings {
            Some(known) => known.support,
            None => self.tasks.as_ref().map_or(TaskSupport::Never, |tasks| {
                tasks.settings().support_of(&request.name, false)
            }),
        };
        if let (Some(tasks), false) = (&self.tasks, support == TaskSupport::Never) {
            let relocated = renderings.is_some_and(|known| known.relocated);
            let defers = renderings.is_some_and(|known| known.defers);
            let declared = context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks());
            // Tasks are protocol 2026-07-28's (an older client that declares
            // the extension has its calls answered as they end).
            let declared = declared && shape == OutputShape::AnyJson;
            match (support, declared) {
                (TaskSupport::Required, false) => {
                    return Err(ErrorData::missing_required_client_capability(
                        ClientCapabilities::builder().enable_tasks().build(),
                    ));
                }
                (TaskSupport::Allowed | TaskSupport::Required, true) if defers => {
                    let task = self.call_deferred(tasks.clone(), request, context, rendering);
                    return Box::pin(task).await;
                }
                (TaskSupport::Allowed | TaskSupport::Required, true) => {
                    // Boxed: the call's future stays as small as it is without
                    // tasks (see `import::future_sizes`).
                    let task = self.call_as_task(
                        tasks.clone(),
                        request,
                        context,
                        shape,
                        rendering,
                        relocated,
                    );
                    return Box::pin(task).await;
                }
                _ => {}
            }
        }
        let arguments = request.arguments.map_or(Value::Null, Value::Object);
        let cancelled = context.ct.clone();
        // Kept only where an approval may seal them: an older client's call
        // copies nothing.
        let stateless = shape == OutputShape::AnyJson;
        let brought = call::Brought {
            responses: request.input_responses,
            state: request.request_state,
            stateless,
            arguments: stateless.then(|| arguments.clone()),
            progress: None,
            deferral: None,
            handler: Some(self.handler.clone()),
            // Read from what this call looked up already.
            session: renderings
                .is_some_and(|known| known.per_session)
                .then_some(self.session),
            session_level: self.session_level(),
        };
        // Boxed: the call's state is kilobytes, which rmcp's spawn of each request
        // would copy (see `import::future_sizes`).
        let call = Box::pin(call::serve(
            context,
            brought,
            self.toolset.call_published(&request.name, arguments),
        ));
        // rmcp drops the answer to a cancelled request but lets the handler run on;
        // dropping the call stops the tool (a pool job is aborted with its caller).
        // The call is polled first: a tool that answers at once never registers with
        // the cancellation token (which costs a waiter in its list and its removal),
        // and rmcp drops an answer to a cancelled request anyway.
        tokio::select! {
            biased;
            outcome = call => settled(outcome, &request.name, rendering, self.bad_arguments, shape).into(),
            () = cancelled.cancelled() => Err(ErrorData::internal_error(
                format!("the call to `{}` was cancelled", request.name),
                None,
            )),
        }
    }
}
