//! Submit and schedule: a transformer right outside `remote` that enqueues its
//! job and answers with a ticket (see the crate docs, "Submit and schedule",
//! for why it is a transformer and not a backend).

use std::future::Future;
use std::time::Duration;

use super::clock::now_ms;

use schemars::Schema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::job::JobTicket;
use super::remote::Remoted;
use toolgraft::ToolError;
use toolgraft::error::ArgsError;
use toolgraft::extension::{
    Anywhere, Args, ConfigError, Extension, Layer, LayerInput, Stack, Transformer,
};
use toolgraft::kind::ExtensionKind;
use toolgraft::runtime::{DynBranch, DynExtension, DynLayer, DynStack};
use toolgraft::schema::Nest;

/// How far in the past an `at` may be and still mean "now" (clocks differ).
pub const PAST_SLACK: Duration = Duration::from_secs(5);

/// How far ahead a job may be scheduled unless told otherwise: a week.
const DEFAULT_MAX_AHEAD: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The furthest a job can be scheduled at all: ten years (every time within it
/// is an RFC 3339 time, and fits both engines' clocks).
pub const MAX_SCHEDULING_HORIZON: Duration = Duration::from_secs(10 * 366 * 24 * 60 * 60);

/// The params `submit` adds beside its layer input's.
const OWN_PARAMS: &[&str] = &["delay_ms", "at"];

/// An extension that submits its `remote` layer's job and answers at once with a
/// [`JobTicket`]; `delay_ms` or `at` schedules it (see the
/// [crate docs](crate#submit-and-schedule)).
///
/// A transformer that sits right outside a [`Remote`](crate::Remote) (`[.., remote, submit]`).
/// Its branch takes the layer's arguments plus, optionally, `delay_ms` (a whole
/// number of milliseconds) or `at` (an RFC 3339 time with an offset, like
/// `2030-01-01T09:00:00Z`), not both; an `at` more than [`PAST_SLACK`] in the past,
/// or either one further ahead than [`Submit::with_max_ahead`], is refused as invalid
/// arguments naming the field.
///
/// ```no_run
/// use serde_json::json;
/// use toolgraft::prelude::*;
/// use toolgraft_jobs::{JobResult, Remote, Submit};
///
/// #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
/// struct Shout { text: String }
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let remote = Remote::new("redis://127.0.0.1:6379")?.with_queue("shouts")?;
/// let shout = Tool::builder().name("shout").description("Return the text, loud.")
///     .body(|i: Shout| async move { Ok(i.text.to_uppercase()) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((shout.combo().with(remote.clone()).with(Submit::new()),))?;
/// for tool in remote.jobs().tools() {
///     toolset.bind((tool.combo(),))?; // job_status, job_result, job_cancel
/// }
/// let ticket = toolset.call("shout_remote_submit", json!({"text": "hi", "delay_ms": 2000})).await?;
/// let id = ticket["job_id"].as_str().unwrap();
/// // ... two seconds and a worker later:
/// if let JobResult::Finished(answer) = remote.jobs().result(id).await? {
///     assert_eq!(answer, json!("HI"));
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Submit {
    name: String,
    max_ahead: Duration,
}

impl Default for Submit {
    fn default() -> Self {
        Self::new()
    }
}

impl Submit {
    /// `submit`, scheduling up to a week ahead.
    ///
    /// ```
    /// use toolgraft::Extension;
    /// assert_eq!(toolgraft_jobs::Submit::new().name(), "submit");
    /// ```
    pub fn new() -> Self {
        Self {
            name: "submit".to_owned(),
            max_ahead: DEFAULT_MAX_AHEAD,
        }
    }

    /// The same extension under another name (branches end in `_<name>`).
    ///
    /// ```
    /// use toolgraft::Extension;
    /// assert_eq!(toolgraft_jobs::Submit::new().with_name("later").name(), "later");
    /// ```
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How far ahead a job may be scheduled (a week unless told; at most
    /// [`MAX_SCHEDULING_HORIZON`], which a longer one is taken as).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use toolgraft_jobs::{MAX_SCHEDULING_HORIZON, Submit};
    /// let submit = Submit::new().with_max_ahead(Duration::from_secs(3600));
    /// assert_eq!(submit.scheduling_horizon(), Duration::from_secs(3600));
    /// assert_eq!(Submit::new().with_max_ahead(Duration::MAX).scheduling_horizon(), MAX_SCHEDULING_HORIZON);
    /// ```
    pub fn with_max_ahead(mut self, max: Duration) -> Self {
        self.max_ahead = max.min(MAX_SCHEDULING_HORIZON);
        self
    }

    /// How far ahead a job may be scheduled (see [`Submit::with_max_ahead`]).
    pub fn scheduling_horizon(&self) -> Duration {
        self.max_ahead
    }

    /// This extension for a [`Registry`](toolgraft::Registry), so that manifests
    /// can name it: it binds only right outside a `remote` element, and refuses
    /// any other layer input with
    /// [`BindError::ExtensionFailed`](toolgraft::BindError::ExtensionFailed)
    /// naming the tool and the fix.
    ///
    /// ```
    /// let mut registry = toolgraft::Registry::new();
    /// registry
    ///     .register(toolgraft::runtime::Configured::<toolgraft_jobs::Remote>::named("remote"))?
    ///     .register(toolgraft_jobs::Submit::new().dynamic())?;
    /// # Ok::<(), toolgraft::runtime::RegistryError>(())
    /// ```
    pub fn dynamic(&self) -> DynExtension {
        let submit = self.clone();
        DynExtension::builder()
            .name(self.name.clone())
            .kind(ExtensionKind::Transformer)
            .factory(move |layer: DynLayer<'_>| submit.dyn_branch(layer))
            .build()
    }

    fn dyn_branch(&self, layer: DynLayer<'_>) -> Result<DynBranch, ConfigError> {
        let input = &layer.input;
        let Some(remoted) = layer.below.downcast_ref::<Remoted<DynStack>>() else {
            return Err(ConfigError::new(
                "layer input",
                format!(
                    "`{}` is not a `remote` branch; `{name}` sits right outside a remote backend \
                     and enqueues its job: place `remote` right before `{name}`, as in \
                     [.., remote, {name}]",
                    input.name,
                    name = self.name
                ),
            ));
        };
        // Rule `reserved-params`, as the engine applies it to a typed transformer.
        if let Some(names) = toolgraft::schema::property_names(input.input_schema)
            && let Some(taken) = OWN_PARAMS
                .iter()
                .find(|param| names.iter().any(|name| name == *param))
        {
            return Err(ConfigError::new(
                *taken,
                format!(
                    "`{}` already takes `{taken}`, which `{}` adds for scheduling",
                    input.name, self.name
                ),
            ));
        }
        let stack = DynStack::new(
            input.branch.clone(),
            Submitted {
                submit: self.clone(),
                remoted: remoted.clone(),
            },
        );
        Ok(DynBranch::builder()
            .stack(stack)
            .input_schema(with_schedule(input.input_schema))
            .output_schema(toolgraft::schema::of::<JobTicket>())
            .description(describe(input.description))
            .build())
    }

    /// Takes `delay_ms` and `at` out of `args`: when the job becomes runnable
    /// (`None`: now).
    fn take_schedule(&self, args: &mut Args) -> Result<Option<u64>, ArgsError> {
        let delay = args.remove("delay_ms").filter(|value| !value.is_null());
        let at = args.remove("at").filter(|value| !value.is_null());
        let now = now_ms();
        let horizon = u64::try_from(self.max_ahead.as_millis()).unwrap_or(u64::MAX);
        let run_at = match (delay, at) {
            (Some(_), Some(_)) => {
                return Err(ArgsError::field("at", "give `delay_ms` or `at`, not both"));
            }
            (Some(delay), None) => {
                // JSON Schema's `integer` takes `1000.0` too.
                let whole = delay
                    .as_f64()
                    .filter(|ms| ms.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(ms));
                let delay = delay
                    .as_u64()
                    .or(whole.map(|ms| ms as u64))
                    .ok_or_else(|| {
                        ArgsError::field(
                            "delay_ms",
                            format!(
                                "expected a whole number of milliseconds, 0 or more, got {delay}"
                            ),
                        )
                    })?;
                if delay > horizon {
                    return Err(ArgsError::field(
                        "delay_ms",
                        format!(
                            "{delay} ms is further ahead than this branch schedules ({horizon} ms)"
                        ),
                    ));
                }
                now.saturating_add(delay)
            }
            (None, Some(at)) => {
                let text = at.as_str().ok_or_else(|| {
                    ArgsError::field("at", format!("expected an RFC 3339 time, got {at}"))
                })?;
                let time: jiff::Timestamp = text.parse().map_err(|error| {
                    ArgsError::field(
                        "at",
                        format!(
                            "`{}` is not an RFC 3339 time with an offset, like \
                             `2030-01-01T09:00:00Z`: {error}",
                            toolgraft::error::shorten(text)
                        ),
                    )
                })?;
                let at = u64::try_from(time.as_millisecond()).unwrap_or(0);
                let slack = PAST_SLACK.as_millis() as u64;
                if at.saturating_add(slack) < now {
                    return Err(ArgsError::field(
                        "at",
                        format!(
                            "`{text}` is {} s in the past; give a time to come, or no `at` to run now",
                            (now - at) / 1000
                        ),
                    ));
                }
                if at > now.saturating_add(horizon) {
                    return Err(ArgsError::field(
                        "at",
                        format!(
                            "`{text}` is further ahead than this branch schedules ({} s)",
                            horizon / 1000
                        ),
                    ));
                }
                at
            }
            (None, None) => return Ok(None),
        };
        Ok((run_at > now).then_some(run_at))
    }
}

/// The layer's input schema, plus `delay_ms` and `at`.
fn with_schedule(below: &Schema) -> Schema {
    let mut nest = Nest::default();
    let mut own = nest.nested(below);
    if let Some(object) = own.as_object_mut() {
        let properties = object.entry("properties").or_insert_with(|| json!({}));
        if let Some(properties) = properties.as_object_mut() {
            properties.insert(
                "delay_ms".to_owned(),
                json!({"type": ["integer", "null"], "minimum": 0,
                       "description": "Run the job this many milliseconds from now (instead of `at`)."}),
            );
            properties.insert(
                "at".to_owned(),
                json!({"type": ["string", "null"], "format": "date-time",
                       "description": "Run the job at this RFC 3339 time, like `2030-01-01T09:00:00Z` (instead of `delay_ms`)."}),
            );
        }
    }
    nest.root(own)
}

fn describe(running: &str) -> String {
    format!(
        "{running} (Submitted as a job: answers at once with a ticket; `job_status`, \
         `job_result` and `job_cancel` take its `job_id`. `delay_ms` or `at` runs it later.)"
    )
}

impl Extension for Submit {
    type Kind = Transformer;
    type Locality = Anywhere;

    fn name(&self) -> &str {
        &self.name
    }

    fn describe(&self, running: &str) -> Option<String> {
        Some(describe(running))
    }

    fn own_params(&self) -> &[&'static str] {
        OWN_PARAMS
    }

    fn input_schema(&self, below: &LayerInput<'_, Self>) -> Option<Schema> {
        Some(with_schedule(below.input_schema))
    }

    fn output_schema(&self, _: &LayerInput<'_, Self>) -> Option<Schema> {
        Some(toolgraft::schema::of::<JobTicket>())
    }
}

mod sealed {
    pub trait Sealed {}
}

impl<S> sealed::Sealed for Remoted<S> {}

impl<S> RemoteBranch for Remoted<S>
where
    S: Stack,
    S::Input: Serialize,
    S::Output: DeserializeOwned,
{
    async fn submit_job(
        &self,
        input: S::Input,
        run_at: Option<u64>,
    ) -> Result<JobTicket, ToolError> {
        self.submit(input, run_at).await
    }
}

/// A `remote` branch: the only layer [`Submit`] goes over.
///
/// Sealed: implemented for [`Remoted`] only.
#[diagnostic::on_unimplemented(
    message = "`submit` must sit right outside `remote`, but its layer input is `{Self}`",
    label = "not a `remote` branch",
    note = "`submit` enqueues the job its layer input, a `remote` branch, would send, and answers with a ticket at once",
    note = "place `remote` right before `submit`: `.with(remote).with(Submit::new())`"
)]
pub trait RemoteBranch: Stack + sealed::Sealed {
    /// Enqueues the job this branch would send, runnable from `run_at` (ms since
    /// the Unix epoch; `None`: now), and returns its ticket.
    #[doc(hidden)]
    fn submit_job(
        &self,
        input: Self::Input,
        run_at: Option<u64>,
    ) -> impl Future<Output = Result<JobTicket, ToolError>> + Send;
}

/// What a [`Submit`] branch takes: the layer's input, and when to run it.
#[derive(Debug)]
pub struct Submission<I> {
    input: I,
    run_at: Option<u64>,
}

/// The branch [`Submit`] mints over a `remote` branch.
#[derive(Clone, Debug)]
pub struct Submitted<S> {
    submit: Submit,
    remoted: S,
}

impl<S: RemoteBranch> Stack for Submitted<S> {
    type Input = Submission<S::Input>;
    type Output = JobTicket;

    fn call(
        &self,
        input: Submission<S::Input>,
    ) -> impl Future<Output = Result<JobTicket, ToolError>> + Send {
        self.remoted.submit_job(input.input, input.run_at)
    }

    fn decode(&self, mut args: Args) -> Result<Submission<S::Input>, ArgsError> {
        let run_at = self.submit.take_schedule(&mut args)?;
        Ok(Submission {
            input: self.remoted.decode(args)?,
            run_at,
        })
    }
}

// Over `Remoted` only: a combo that puts `submit` over anything else fails to
// compile, the compiler saying that `Submit` layers over `Remoted<S>`.
impl<S> Layer<Remoted<S>> for Submit
where
    Remoted<S>: RemoteBranch,
{
    type Branch = Submitted<Remoted<S>>;

    fn layer(self, inner: Remoted<S>, _: &LayerInput<'_, Self>) -> Submitted<Remoted<S>> {
        Submitted {
            submit: self,
            remoted: inner,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::rfc3339;
    use serde_json::Value;

    fn args(value: Value) -> Args {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_schedule_is_a_delay_or_a_time_never_both() {
        let submit = Submit::new();
        let mut plain = args(json!({"city": "Oslo"}));
        assert_eq!(submit.take_schedule(&mut plain).unwrap(), None);
        assert_eq!(plain, args(json!({"city": "Oslo"})));

        let mut delayed = args(json!({"city": "Oslo", "delay_ms": 2000}));
        let before = now_ms();
        let run_at = submit.take_schedule(&mut delayed).unwrap().unwrap();
        assert!((before + 2000..=now_ms() + 2000).contains(&run_at));
        assert_eq!(delayed, args(json!({"city": "Oslo"})), "taken out");

        let both = submit
            .take_schedule(&mut args(
                json!({"delay_ms": 1, "at": "2030-01-01T00:00:00Z"}),
            ))
            .unwrap_err();
        assert_eq!(both.field.as_deref(), Some("at"));

        let past = submit
            .take_schedule(&mut args(json!({"at": "2001-01-01T00:00:00Z"})))
            .unwrap_err();
        assert!(past.problem.contains("in the past"), "{past}");
        let far = submit
            .take_schedule(&mut args(json!({"at": "2999-01-01T00:00:00+02:00"})))
            .unwrap_err();
        assert!(far.problem.contains("further ahead"), "{far}");
        let far = Submit::new()
            .with_max_ahead(Duration::from_secs(1))
            .take_schedule(&mut args(json!({"delay_ms": 5000})))
            .unwrap_err();
        assert_eq!(far.field.as_deref(), Some("delay_ms"));
        let garbled = submit
            .take_schedule(&mut args(json!({"at": "tomorrow"})))
            .unwrap_err();
        assert!(garbled.problem.contains("RFC 3339"), "{garbled}");
        let negative = submit
            .take_schedule(&mut args(json!({"delay_ms": -5})))
            .unwrap_err();
        assert_eq!(negative.field.as_deref(), Some("delay_ms"));
        // A whole number written with a fraction is one; a fraction is not.
        let before = now_ms();
        let run_at = submit
            .take_schedule(&mut args(json!({"delay_ms": 2000.0})))
            .unwrap()
            .unwrap();
        assert!((before + 2000..=now_ms() + 2000).contains(&run_at));
        for odd in [json!(1.5), json!(-1.0), json!(1e300)] {
            let refused = submit
                .take_schedule(&mut args(json!({"delay_ms": odd})))
                .unwrap_err();
            assert_eq!(refused.field.as_deref(), Some("delay_ms"), "{odd}");
        }
        // Within the slack, a past time means now.
        let just_now = rfc3339(now_ms() - 1000);
        assert_eq!(
            submit
                .take_schedule(&mut args(json!({"at": just_now})))
                .unwrap(),
            None
        );
    }
}
