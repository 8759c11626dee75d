//! What an MCP-server author writes with plain rmcp: the prompts, resources,
//! completions and logging of the `everything` example, as one [`ServerHandler`]
//! named [`Author`]. It serves no tools: the example's tools handler serves those
//! and hands every other request to an `Author`.
//!
//! The prompts and resources are the fixtures the official MCP conformance suite
//! asks for (`test_simple_prompt`, `test://static-text`, the template
//! `test://template/{id}/data`, ...), with the names, arguments and contents its
//! scenarios check. Anything a client asks for that is not among them gets the
//! protocol's error, never a panic.
//!
//! One `Author` serves one session (the HTTP transport makes one per session, and
//! one per request served without a session). What outlives a session, who is
//! subscribed to which resource, is a [`Subscriptions`] shared by all of them.

// MCP logging (`logging/setLevel`, `LoggingLevel`) is deprecated by SEP-2577 in
// favour of the per-request `logLevel` of protocol 2026-07-28. Sessions on
// 2025-11-25 and earlier still set their level with `logging/setLevel`, so the
// handler serves both.
#![allow(deprecated)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::model::{
    CacheScope, CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    Implementation, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, LoggingLevel, PaginatedRequestParams, Prompt, PromptArgument,
    PromptMessage, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Reference, Resource, ResourceContents, ResourceTemplate,
    ResourceUpdatedNotificationParam, Role, ServerCapabilities, ServerConfig,
    SetLevelRequestMethod, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext, SubscriptionSink};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::json;

/// A 1×1 red PNG, base64: the image of `test_prompt_with_image` and the blob of
/// `test://static-binary`.
pub const RED_PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";

const STATIC_TEXT: &str = "test://static-text";
const STATIC_BINARY: &str = "test://static-binary";
/// The resource to subscribe to: whoever changes what it stands for calls
/// [`Subscriptions::notify_updated`] with this URI.
pub const WATCHED: &str = "test://watched-resource";
const TEMPLATE: &str = "test://template/{id}/data";

/// How long a client may keep a list or a fixed resource: they never change
/// while the server runs. The watched resource is never cached (its TTL is 0).
const FIXED_TTL_MS: u64 = 60 * 60 * 1000;

/// The prompts, resources, completions and logging of the `everything` example,
/// for one session.
#[derive(Debug)]
pub struct Author {
    subscriptions: Subscriptions,
    /// This session's key in `subscriptions`.
    session: u64,
    log_level: LogLevel,
}

impl Author {
    /// A handler for one session, sharing `subscriptions` with the server's other
    /// sessions.
    pub fn new_shared(subscriptions: &Subscriptions) -> Self {
        Self {
            subscriptions: subscriptions.clone(),
            session: subscriptions.new_key(),
            log_level: LogLevel::default(),
        }
    }

    /// The least severe level this session wants log messages at, as it last set
    /// with `logging/setLevel` ([`LogLevel::DEFAULT`] until it does).
    pub fn log_level(&self) -> LoggingLevel {
        self.log_level.get()
    }

    /// The session's level as a handle to hand to a tool body: it follows later
    /// `logging/setLevel` requests.
    pub fn log_level_handle(&self) -> LogLevel {
        self.log_level.clone()
    }

    /// The least severe level one request's log messages may go out at, or `None`
    /// for none at all. On protocol 2026-07-28 each request says so itself
    /// (`logLevel` in its `_meta`; without it, no log messages); before, the
    /// session's level applies.
    pub fn log_level_for(&self, context: &RequestContext<RoleServer>) -> Option<LoggingLevel> {
        if self_contained(context) {
            context.meta.log_level()
        } else {
            Some(self.log_level())
        }
    }
}

impl Drop for Author {
    /// A session's subscriptions end with it.
    fn drop(&mut self) {
        self.subscriptions.forget(self.session);
    }
}

/// Whether a request is on protocol 2026-07-28 or later, where each request
/// carries what a session used to (log level, capabilities) and sessions' own
/// methods (`logging/setLevel`, `resources/subscribe`) are gone.
fn self_contained(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The methods this handler serves on every protocol version, and those it serves
/// only in sessions before 2026-07-28.
const METHODS: &[&str] = &[
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
];
const SESSION_METHODS: &[&str] = &[
    "resources/subscribe",
    "resources/unsubscribe",
    "logging/setLevel",
];

impl ServerHandler for Author {
    /// Exactly what this handler serves; the tools handler adds `tools`.
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "toolgraft-everything",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(prompts())
            .with_ttl_ms(FIXED_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name == "test_input_required_result_prompt" {
            return Ok(prompt_asking_context(request.input_responses.as_ref()));
        }
        let arguments = request.arguments.unwrap_or_default();
        let result = match request.name.as_str() {
            "test_simple_prompt" => simple_prompt(),
            "test_prompt_with_arguments" => prompt_with_arguments(&arguments)?,
            "test_prompt_with_embedded_resource" => prompt_with_embedded_resource(&arguments)?,
            "test_prompt_with_image" => prompt_with_image(),
            other => return Err(unknown_prompt(other)),
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(resources())
            .with_ttl_ms(FIXED_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let template = ResourceTemplate::new(TEMPLATE, "template-data")
            .with_description("JSON data for an id: the URI's {id} is substituted into it")
            .with_mime_type("application/json");
        Ok(ListResourceTemplatesResult::with_all_items(vec![template])
            .with_ttl_ms(FIXED_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let contents = read(&request.uri).ok_or_else(|| resource_not_found(&request.uri))?;
        let ttl_ms = if request.uri == WATCHED {
            0
        } else {
            FIXED_TTL_MS
        };
        Ok(ReadResourceResult::new(vec![contents])
            .with_ttl_ms(ttl_ms)
            .with_cache_scope(CacheScope::Public)
            .into())
    }

    /// `resources/subscribe`, protocol 2025-11-25 and before: this session hears
    /// of changes to `uri` until it unsubscribes or ends.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if read(&request.uri).is_none() {
            return Err(resource_not_found(&request.uri));
        }
        self.subscriptions
            .watch_from_session(self.session, &context.peer, request.uri);
        Ok(())
    }

    /// `resources/unsubscribe`: unsubscribing from what was never subscribed to
    /// changes nothing, and is no error.
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions.unwatch(self.session, &request.uri);
        Ok(())
    }

    /// `subscriptions/listen`, protocol 2026-07-28: of what a stream asks for,
    /// this server has updates of its resources to give (its lists never change).
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let known = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| read(uri).is_some())
            .cloned()
            .collect();
        let mut accepted = SubscriptionFilter::new();
        accepted.resource_subscriptions = Some(known);
        Some(accepted)
    }

    /// A `subscriptions/listen` stream hears of changes to its resources until the
    /// client ends the request.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let _watching = self.subscriptions.watch_from_stream(context.sink());
        context.cancelled().await;
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let argument = &request.argument.name;
        let candidates = match &request.r#ref {
            Reference::Prompt(prompt) => prompt_argument_values(&prompt.name, argument)?,
            Reference::Resource(template) => template_argument_values(&template.uri, argument)?,
            _ => return Err(ErrorData::invalid_params("unknown kind of reference", None)),
        };
        let values = starting_with(candidates, &request.argument.value);
        let completion = CompletionInfo::with_all_values(values)
            .map_err(|error| ErrorData::internal_error(error, None))?;
        Ok(CompleteResult::new(completion))
    }

    /// `logging/setLevel`, in sessions before protocol 2026-07-28 (which removed
    /// it: each request says its `logLevel` there).
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if self_contained(&context) {
            return Err(ErrorData::method_not_found::<SetLevelRequestMethod>());
        }
        self.log_level.set(request.level);
        Ok(())
    }

    /// rmcp hands over a request of a known method whose params it could not
    /// read (a prompt without a name, an unknown log level) as a custom request:
    /// for the methods served here, that is a client's bad params (-32602), not
    /// an unknown method.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let method = request.method.as_str();
        let served = METHODS.contains(&method)
            || (SESSION_METHODS.contains(&method) && !self_contained(&context));
        Err(if served {
            ErrorData::invalid_params(
                format!("malformed params for `{method}`"),
                Some(json!({ "method": method })),
            )
        } else {
            ErrorData::new(ErrorCode::METHOD_NOT_FOUND, request.method, None)
        })
    }
}

// ---------------------------------------------------------------------------
// Prompts

fn prompts() -> Vec<Prompt> {
    let required = |name: &str, description: &str| {
        PromptArgument::new(name)
            .with_description(description)
            .with_required(true)
    };
    vec![
        Prompt::new(
            "test_simple_prompt",
            Some("A prompt without arguments: one user message"),
            None,
        ),
        Prompt::new(
            "test_prompt_with_arguments",
            Some("A prompt whose message quotes its two arguments"),
            Some(vec![
                required("arg1", "First test argument"),
                required("arg2", "Second test argument"),
            ]),
        ),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            Some("A prompt that embeds a resource, then asks to process it"),
            Some(vec![required(
                "resourceUri",
                "URI of the resource to embed",
            )]),
        ),
        Prompt::new(
            "test_prompt_with_image",
            Some("A prompt with an image, then a question about it"),
            None,
        ),
        Prompt::new(
            "test_input_required_result_prompt",
            Some("A prompt that asks the client's user for its context first"),
            None,
        ),
    ]
}

/// The prompt of the user's context, which it asks for first (an
/// input-required result, protocol 2026-07-28): an rmcp handler's own, which
/// toolgraft forwards as it came.
fn prompt_asking_context(responses: Option<&rmcp::model::InputResponses>) -> GetPromptResponse {
    let context = responses
        .and_then(|responses| responses.get("user_context"))
        .filter(|answer| answer["action"] == "accept")
        .and_then(|answer| answer["content"]["context"].as_str());
    if let Some(context) = context {
        return GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            format!("Answer with this context in mind: {context}"),
        )])
        .into();
    }
    let question = serde_json::json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "What context should the prompt use?",
            "requestedSchema": {
                "type": "object",
                "properties": {"context": {"type": "string"}},
                "required": ["context"],
            },
        },
    });
    let requests = [(
        "user_context".to_owned(),
        serde_json::from_value(question).expect("an elicitation"),
    )];
    rmcp::model::InputRequiredResult::from_input_requests(requests.into_iter().collect()).into()
}

fn simple_prompt() -> GetPromptResult {
    GetPromptResult::new(vec![PromptMessage::new_text(
        Role::User,
        "This is a simple prompt for testing.",
    )])
}

fn prompt_with_arguments(arguments: &JsonObject) -> Result<GetPromptResult, ErrorData> {
    let arg1 = required_argument(arguments, "arg1")?;
    let arg2 = required_argument(arguments, "arg2")?;
    Ok(GetPromptResult::new(vec![PromptMessage::new_text(
        Role::User,
        format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"),
    )]))
}

fn prompt_with_embedded_resource(arguments: &JsonObject) -> Result<GetPromptResult, ErrorData> {
    let uri = required_argument(arguments, "resourceUri")?;
    let resource = ResourceContents::text("Embedded resource content for testing.", uri);
    Ok(GetPromptResult::new(vec![
        PromptMessage::new(Role::User, ContentBlock::resource(resource)),
        PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
    ]))
}

fn prompt_with_image() -> GetPromptResult {
    GetPromptResult::new(vec![
        PromptMessage::new(Role::User, ContentBlock::image(RED_PIXEL_PNG, "image/png")),
        PromptMessage::new_text(Role::User, "Please analyze the image above."),
    ])
}

/// A prompt argument the client must give, as a string (prompt arguments are
/// strings in MCP).
fn required_argument<'a>(arguments: &'a JsonObject, name: &str) -> Result<&'a str, ErrorData> {
    match arguments.get(name) {
        Some(serde_json::Value::String(value)) => Ok(value),
        Some(_) => Err(ErrorData::invalid_params(
            format!("the argument `{name}` must be a string"),
            Some(json!({ "argument": name })),
        )),
        None => Err(ErrorData::invalid_params(
            format!("the argument `{name}` is required"),
            Some(json!({ "argument": name })),
        )),
    }
}

fn unknown_prompt(name: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("no prompt named `{name}`"),
        Some(json!({ "name": name })),
    )
}

// ---------------------------------------------------------------------------
// Resources

fn resources() -> Vec<Resource> {
    vec![
        Resource::new(STATIC_TEXT, "static-text")
            .with_description("A fixed text resource")
            .with_mime_type("text/plain"),
        Resource::new(STATIC_BINARY, "static-binary")
            .with_description("A fixed binary resource: a 1x1 PNG")
            .with_mime_type("image/png"),
        Resource::new(WATCHED, "watched-resource")
            .with_description("A text resource to subscribe to: subscribers hear when it changes")
            .with_mime_type("text/plain"),
    ]
}

/// The contents at `uri`: one of the listed resources, or one the template makes.
fn read(uri: &str) -> Option<ResourceContents> {
    let contents = match uri {
        STATIC_TEXT => {
            ResourceContents::text("This is the content of the static text resource.", uri)
        }
        STATIC_BINARY => ResourceContents::blob(RED_PIXEL_PNG, uri).with_mime_type("image/png"),
        WATCHED => ResourceContents::text("This resource is watched: subscribe to it.", uri),
        _ => {
            let id = template_id(uri)?;
            let data =
                json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") });
            ResourceContents::text(data.to_string(), uri).with_mime_type("application/json")
        }
    };
    Some(contents)
}

/// The `{id}` of a URI made by the template `test://template/{id}/data`: one
/// non-empty path segment.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix("test://template/")?
        .strip_suffix("/data")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// The protocol's error for a URI that names no resource, with the URI in its
/// data (rmcp sends it as -32002 before protocol 2026-07-28, -32602 from then on,
/// as SEP-2164 asks).
fn resource_not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("no resource at `{uri}`"),
        Some(json!({ "uri": uri })),
    )
}

// ---------------------------------------------------------------------------
// Completions

/// The values offered for an argument of a prompt.
fn prompt_argument_values(
    prompt: &str,
    argument: &str,
) -> Result<&'static [&'static str], ErrorData> {
    let values: &[&str] = match (prompt, argument) {
        ("test_prompt_with_arguments", "arg1") => &["hello", "testValue1"],
        ("test_prompt_with_arguments", "arg2") => &["world", "testValue2"],
        ("test_prompt_with_embedded_resource", "resourceUri") => {
            &[STATIC_TEXT, STATIC_BINARY, WATCHED]
        }
        _ if !prompts().iter().any(|known| known.name == prompt) => {
            return Err(unknown_prompt(prompt));
        }
        _ => return Err(no_such_argument(argument)),
    };
    Ok(values)
}

/// The values offered for a variable of a resource template.
fn template_argument_values(
    template: &str,
    argument: &str,
) -> Result<&'static [&'static str], ErrorData> {
    match (template, argument) {
        (TEMPLATE, "id") => Ok(&["1", "2", "3", "123"]),
        (TEMPLATE, _) => Err(no_such_argument(argument)),
        _ => Err(ErrorData::invalid_params(
            format!("no resource template `{template}`"),
            Some(json!({ "uri": template })),
        )),
    }
}

fn no_such_argument(argument: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("nothing to complete for `{argument}`"),
        Some(json!({ "argument": argument })),
    )
}

/// The candidates that start with what the client has typed so far, ignoring case.
fn starting_with(candidates: &[&str], typed: &str) -> Vec<String> {
    let typed = typed.to_lowercase();
    candidates
        .iter()
        .filter(|candidate| candidate.to_lowercase().starts_with(&typed))
        .map(|candidate| (*candidate).to_owned())
        .collect()
}

// ---------------------------------------------------------------------------
// Logging

/// The least severe level a session wants log messages at, shared between its
/// handler and the tool bodies that log: `logging/setLevel` changes it for all.
#[derive(Clone, Debug)]
pub struct LogLevel(Arc<Mutex<LoggingLevel>>);

impl LogLevel {
    /// A session's level until it sets one: informational messages and worse.
    pub const DEFAULT: LoggingLevel = LoggingLevel::Info;

    /// The level now.
    pub fn get(&self) -> LoggingLevel {
        *lock(&self.0)
    }

    fn set(&self, level: LoggingLevel) {
        *lock(&self.0) = level;
    }

    /// Whether a message at `level` is one the session wants.
    pub fn allows(&self, level: LoggingLevel) -> bool {
        // The variants are declared from least to most severe.
        level as u8 >= self.get() as u8
    }
}

impl Default for LogLevel {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(Self::DEFAULT)))
    }
}

// ---------------------------------------------------------------------------
// Subscriptions

/// Who is subscribed to which resource, across every session of the server:
/// sessions that sent `resources/subscribe` (protocol 2025-11-25 and before) and
/// `subscriptions/listen` streams (2026-07-28). Clones share the one registry.
#[derive(Clone, Debug, Default)]
pub struct Subscriptions(Arc<Mutex<Registry>>);

#[derive(Debug, Default)]
struct Registry {
    next_key: u64,
    watchers: HashMap<u64, Watcher>,
}

/// One session or stream, and the resources it watches.
#[derive(Debug)]
struct Watcher {
    uris: HashSet<String>,
    to: Listener,
}

#[derive(Clone, Debug)]
enum Listener {
    Session(Peer<RoleServer>),
    Stream(SubscriptionSink),
}

impl Subscriptions {
    /// Tells every session and stream subscribed to `uri` that it changed
    /// (`notifications/resources/updated`). One that is gone by then is skipped:
    /// its subscriptions end with it.
    pub async fn notify_updated(&self, uri: &str) {
        let listeners: Vec<Listener> = lock(&self.0)
            .watchers
            .values()
            .filter(|watcher| watcher.uris.contains(uri))
            .map(|watcher| watcher.to.clone())
            .collect();
        for listener in listeners {
            match listener {
                Listener::Session(peer) => {
                    let _ = peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                        .await;
                }
                Listener::Stream(sink) => {
                    let _ = sink.notify_resource_updated(uri).await;
                }
            }
        }
    }

    fn new_key(&self) -> u64 {
        let mut registry = lock(&self.0);
        registry.next_key += 1;
        registry.next_key
    }

    fn watch_from_session(&self, session: u64, peer: &Peer<RoleServer>, uri: String) {
        lock(&self.0)
            .watchers
            .entry(session)
            .or_insert_with(|| Watcher {
                uris: HashSet::new(),
                to: Listener::Session(peer.clone()),
            })
            .uris
            .insert(uri);
    }

    fn unwatch(&self, session: u64, uri: &str) {
        let mut registry = lock(&self.0);
        if let Some(watcher) = registry.watchers.get_mut(&session) {
            watcher.uris.remove(uri);
            if watcher.uris.is_empty() {
                registry.watchers.remove(&session);
            }
        }
    }

    /// Registers a `subscriptions/listen` stream for the resources its filter
    /// accepted, until the returned guard is dropped (when the stream ends, however
    /// it ends).
    fn watch_from_stream(&self, sink: &SubscriptionSink) -> Watching {
        let uris = sink
            .accepted()
            .resource_subscriptions
            .iter()
            .flatten()
            .cloned()
            .collect();
        let key = self.new_key();
        lock(&self.0).watchers.insert(
            key,
            Watcher {
                uris,
                to: Listener::Stream(sink.clone()),
            },
        );
        Watching {
            subscriptions: self.clone(),
            key,
        }
    }

    fn forget(&self, key: u64) {
        lock(&self.0).watchers.remove(&key);
    }
}

/// A stream's registration in [`Subscriptions`], removed on drop.
struct Watching {
    subscriptions: Subscriptions,
    key: u64,
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.subscriptions.forget(self.key);
    }
}

/// Locks `mutex`; a panic elsewhere while it was held leaves plain data (a level,
/// a table of subscriptions) that is still good to use.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_takes_one_segment() {
        assert_eq!(template_id("test://template/123/data"), Some("123"));
        assert_eq!(template_id("test://template//data"), None);
        assert_eq!(template_id("test://template/1/2/data"), None);
        assert_eq!(template_id("test://template/123"), None);
    }

    #[test]
    fn template_data_is_json_with_the_id() {
        let Some(ResourceContents::TextResourceContents {
            text, mime_type, ..
        }) = read("test://template/a\"b/data")
        else {
            panic!("the template makes text");
        };
        assert_eq!(mime_type.as_deref(), Some("application/json"));
        let data: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(data["id"], "a\"b");
    }

    #[test]
    fn completions_follow_the_typed_prefix() {
        assert_eq!(
            starting_with(&["hello", "testValue1"], "TEST"),
            ["testValue1"]
        );
        assert_eq!(
            starting_with(&["hello", "testValue1"], ""),
            ["hello", "testValue1"]
        );
        assert!(prompt_argument_values("test_prompt_with_arguments", "arg3").is_err());
        assert!(prompt_argument_values("no_such_prompt", "arg1").is_err());
    }

    /// A client that passes on the URIs it hears are updated.
    struct Watcher(tokio::sync::mpsc::UnboundedSender<String>);

    impl rmcp::ClientHandler for Watcher {
        async fn on_resource_updated(
            &self,
            params: ResourceUpdatedNotificationParam,
            _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
        ) {
            let _ = self.0.send(params.uri);
        }
    }

    #[tokio::test]
    async fn subscribers_hear_of_updates_until_they_unsubscribe() {
        use rmcp::ServiceExt;
        use std::time::Duration;

        let subscriptions = Subscriptions::default();
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let author = Author::new_shared(&subscriptions);
        tokio::spawn(async move {
            if let Ok(running) = author.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        let (updates, mut heard) = tokio::sync::mpsc::unbounded_channel();
        let client = Watcher(updates).serve(client_io).await.expect("connects");

        let unknown = client
            .subscribe(SubscribeRequestParams::new("test://nope"))
            .await;
        assert!(unknown.is_err(), "no subscribing to what does not exist");

        client
            .subscribe(SubscribeRequestParams::new(WATCHED))
            .await
            .expect("subscribes");
        subscriptions.notify_updated(STATIC_TEXT).await;
        subscriptions.notify_updated(WATCHED).await;
        let uri = tokio::time::timeout(Duration::from_secs(10), heard.recv()).await;
        assert_eq!(uri.ok().flatten().as_deref(), Some(WATCHED));

        client
            .unsubscribe(UnsubscribeRequestParams::new(WATCHED))
            .await
            .expect("unsubscribes");
        subscriptions.notify_updated(WATCHED).await;
        let silence = tokio::time::timeout(Duration::from_millis(200), heard.recv()).await;
        assert!(silence.is_err(), "nothing after unsubscribing");
    }

    #[test]
    fn a_level_lets_through_what_is_as_severe_or_more() {
        let level = LogLevel::default();
        assert!(level.allows(LoggingLevel::Warning));
        assert!(!level.allows(LoggingLevel::Debug));
        level.set(LoggingLevel::Debug);
        assert!(level.allows(LoggingLevel::Debug));
    }
}
