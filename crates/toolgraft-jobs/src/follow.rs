//! A `remote` backend's jobs followed by id, from any process of the fleet
//! ([`Follow`]): what a server in front follows a deferred call by
//! (toolgraft-mcp's MCP tasks).

use std::time::Duration;

use std::future::Future;
use std::pin::Pin;
use toolgraft::Extension;
use toolgraft::context::Principal;
use toolgraft::relocation::{Follow, Followed, Phase};

use super::job::{JobError, JobResult, JobState};
use super::remote::Remote;

impl Follow for Remote {
    /// `<backend name>:<queue>`: the same in every process that binds the same
    /// backend.
    fn follower(&self) -> String {
        format!("{}:{}", self.name(), self.queue_name())
    }

    fn backend(&self) -> String {
        self.name().to_owned()
    }

    fn kept_for(&self) -> Duration {
        self.engine().keep_finished()
    }

    fn status(
        &self,
        job: &str,
    ) -> Pin<Box<dyn Future<Output = Result<Option<Followed>, String>> + Send>> {
        let (remote, job) = (self.clone(), job.to_owned());
        Box::pin(async move {
            let (result, principal, since) = match remote.followed(&job).await {
                Ok(found) => found,
                Err(JobError::Unknown { .. }) => return Ok(None),
                Err(error) => return Err(error.to_string()),
            };
            let phase = match result {
                JobResult::Finished(value) => Phase::Ended(Ok(value)),
                JobResult::Failed(error) => Phase::Ended(Err(error)),
                JobResult::NotFinished(ticket) if ticket.state == JobState::Cancelled => {
                    Phase::Cancelled
                }
                JobResult::NotFinished(_) => Phase::Waiting,
            };
            Ok(Some(Followed {
                phase,
                principal: principal.map(Principal::new),
                since,
            }))
        })
    }

    fn cancel(&self, job: &str) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> {
        let (remote, job) = (self.clone(), job.to_owned());
        Box::pin(async move {
            match remote.cancel(&job).await {
                // Ended before the cancel: it stays as it ended.
                Ok(_) | Err(JobError::NotCancellable { .. }) => Ok(()),
                Err(error) => Err(error.to_string()),
            }
        })
    }
}
