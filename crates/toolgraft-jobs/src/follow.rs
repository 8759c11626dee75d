//! A `remote` backend's jobs followed by id, from any process of the fleet
//! ([`Follow`]): what a server in front follows a deferred call by
//! (toolgraft-mcp's MCP tasks).

use std::time::Duration;

use toolgraft::Extension;
use toolgraft::context::Principal;
use toolgraft::relocation::{Follow, Followed, Phase};
use toolgraft::store::{StoreError, StoreFuture};

use super::job::{JobError, JobResult, JobState};
use super::remote::Remote;

impl Follow for Remote {
    /// `<backend name>:<queue>`: the same in every process that binds the same
    /// backend.
    fn follower(&self) -> String {
        self.follow_key()
    }

    fn backend(&self) -> String {
        self.name().to_owned()
    }

    fn kept_for(&self) -> Duration {
        self.engine().retention
    }

    fn status(&self, job: &str) -> StoreFuture<'static, Option<Followed>> {
        let (jobs, job) = (self.jobs(), job.to_owned());
        Box::pin(async move {
            // `<job id>.<token>`: what a deferred call answered with.
            let Some((id, token)) = job.split_once('.') else {
                return Ok(None);
            };
            let (result, principal, since, called) = match jobs.followed(id, token).await {
                Ok(found) => found,
                Err(JobError::Unknown { .. }) => return Ok(None),
                Err(error) => return Err(StoreError::new(&error).with_source(error)),
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
                called,
            }))
        })
    }

    fn cancel(&self, job: &str) -> StoreFuture<'static, ()> {
        let (jobs, job) = (self.jobs(), job.to_owned());
        Box::pin(async move {
            let Some((id, token)) = job.split_once('.') else {
                return Err(StoreError::new("no such job"));
            };
            // Only a job this handle follows.
            if let Err(error) = jobs.followed(id, token).await {
                return Err(StoreError::new(&error).with_source(error));
            }
            match jobs.cancel(id).await {
                // Ended before the cancel: it stays as it ended.
                Ok(_) | Err(JobError::NotCancellable { .. }) => Ok(()),
                Err(error) => Err(StoreError::new(&error).with_source(error)),
            }
        })
    }
}
