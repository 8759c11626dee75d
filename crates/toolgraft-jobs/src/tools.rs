//! The job tools: `job_status`, `job_result` and `job_cancel` over a queue's
//! [`Jobs`], for an agent to follow the jobs a `submit` branch enqueued.

use std::future::Future;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::job::{JobResult, JobState};
use super::store::{Jobs, Reader};
use toolgraft::error::InvalidName;
use toolgraft::runtime::DynTool;
#[cfg(doc)]
use {super::job::JobTicket, toolgraft::ToolError};

/// The one argument of the job tools.
#[derive(Deserialize, JsonSchema)]
struct JobId {
    /// The `job_id` of a ticket that a submit branch returned.
    job_id: String,
}

/// What `job_result` answers when the job has not failed.
#[derive(Serialize, JsonSchema)]
struct ResultView {
    /// The job.
    job_id: String,
    /// Where it is: `finished` (then `result` is there), or not yet.
    state: JobState,
    /// The tool's result, once finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
}

impl Jobs {
    /// The job tools of this backend's queue, to bind as base tools so that an
    /// agent can follow its submitted jobs: `job_status`, `job_result` and
    /// `job_cancel`, each taking `{"job_id": ..}`.
    ///
    /// `job_status` answers with the [`JobTicket`]; `job_result` with `{job_id,
    /// state, result}` (`result` once finished), or fails with the job's own
    /// error (the source of its [`ToolError::Body`] is that [`ToolError`]);
    /// `job_cancel` with the ticket of the cancelled job (one running is
    /// withdrawn, its body stopped), or fails (source: a
    /// [`JobError`](crate::JobError)) when it ended. An id it does
    /// not know fails with [`JobError::Unknown`](crate::JobError::Unknown) as the
    /// source, and so does the id of a job submitted for another principal
    /// ([`Principal`](toolgraft::context::Principal)): a caller follows the jobs
    /// submitted for it, and those submitted without a principal.
    ///
    /// ```
    /// let jobs = toolgraft_jobs::Remote::new("sqlite://jobs.db")?.jobs();
    /// let toolset = toolgraft::Toolset::new();
    /// for tool in jobs.tools() {
    ///     toolset.bind((tool.combo(),))?;
    /// }
    /// assert_eq!(toolset.names(), ["job_cancel", "job_result", "job_status"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tools(&self) -> Vec<DynTool> {
        self.tools_named("job")
            .expect("the job tools' names are valid")
    }

    /// The same job tools as [`Jobs::tools`], named `<prefix>_status`,
    /// `<prefix>_result` and `<prefix>_cancel`: a toolset that follows the jobs of
    /// several queues needs one set per queue, under names of its own. A prefix
    /// that makes an invalid tool name is refused.
    ///
    /// ```
    /// use toolgraft::tool::BaseTool;
    /// let jobs = toolgraft_jobs::Remote::new("sqlite://jobs.db")?.with_queue("weather")?.jobs();
    /// let tools = jobs.tools_named("weather_job")?;
    /// let names: Vec<_> = tools.iter().map(|tool| tool.spec().name.as_str()).collect();
    /// assert_eq!(names, ["weather_job_status", "weather_job_result", "weather_job_cancel"]);
    /// assert!(jobs.tools_named("weather job").is_err());
    /// assert!(jobs.tools_named("").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tools_named(&self, prefix: &str) -> Result<Vec<DynTool>, InvalidName> {
        // A name itself (an empty one would leave `_status`).
        toolgraft::Name::new(prefix)?;
        let queue = self.queue();
        Ok(vec![
            self.job_tool(
                format!("{prefix}_status"),
                format!(
                    "Where a job submitted on queue `{queue}` is: scheduled, queued, running, finished, failed or cancelled."
                ),
                |jobs, job_id, reader| async move { Ok(jobs.status_as(&job_id, &reader).await?) },
            )?,
            self.job_tool(
                format!("{prefix}_result"),
                format!(
                    "The result of a job submitted on queue `{queue}` once it finished (its error if it failed), or where it is until then."
                ),
                |jobs, job_id, reader| async move {
                    Ok(match jobs.result_as(&job_id, &reader).await? {
                        JobResult::Finished(result) => ResultView {
                            job_id,
                            state: JobState::Finished,
                            result: Some(result),
                        },
                        JobResult::Failed(error) => return Err(error.into()),
                        JobResult::NotFinished(ticket) => ResultView {
                            job_id,
                            state: ticket.state,
                            result: None,
                        },
                    })
                },
            )?,
            self.job_tool(
                format!("{prefix}_cancel"),
                format!(
                    "Cancel a job submitted on queue `{queue}`: one scheduled or queued never runs, one running is stopped (no result). An ended job stays as it ended."
                ),
                |jobs, job_id, reader| async move { Ok(jobs.cancel_as(&job_id, &reader).await?) },
            )?,
        ])
    }

    /// A job tool: takes `{job_id}`, answers what `answer` makes of it on this
    /// queue; bad arguments are refused as arguments.
    fn job_tool<O, F, Fut>(
        &self,
        name: String,
        description: String,
        answer: F,
    ) -> Result<DynTool, InvalidName>
    where
        O: Serialize + JsonSchema,
        F: Fn(Jobs, String, Reader) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, toolgraft::error::BoxError>> + Send + 'static,
    {
        let jobs = self.clone();
        let answer = std::sync::Arc::new(answer);
        DynTool::builder()
            .name(name)
            .description(description)
            .input_schema(toolgraft::schema::of::<JobId>())
            .output_schema(toolgraft::schema::of::<O>())
            .body(move |args| {
                let (jobs, answer) = (jobs.clone(), answer.clone());
                async move {
                    let JobId { job_id } = toolgraft::extension::decode_args(args)?;
                    // A caller follows its own jobs only (and those submitted
                    // without a principal).
                    let reader = Reader::Caller(toolgraft::context::get());
                    Ok(serde_json::to_value(answer(jobs, job_id, reader).await?)?)
                }
            })
            .build()
    }
}
