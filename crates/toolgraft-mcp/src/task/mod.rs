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
//!   and becomes a task the moment it must wait, or, forwarded to an
//!   [upstream](crate::upstream) server that makes tasks of its own, the moment
//!   that server makes it one (its synchronous answers are this call's too);
//! - as a task, it is in the table before the client reads its id, and the call
//!   runs on, every layer of the combo included, beside the table;
//! - a layer or body that asks the caller for input later (an
//!   [`InputRequired`](toolgraft::context::InputRequired)) parks the task in
//!   `input_required` with its requests; `tasks/update` files the responses (one
//!   at a time if the client likes), and once every request is answered the
//!   call runs again with them, as it would on the client's next `tools/call`;
//! - `tasks/cancel` stops it: the call's request reads cancelled
//!   ([`McpCall::is_cancelled`](crate::call::McpCall::is_cancelled)) and its
//!   future is dropped (an async `pool` body stops at its next await, a
//!   `remote` job is withdrawn; a body that blocks its thread runs on to its
//!   end, unheard), and the task reads `cancelled`;
//! - what the call reports as progress is the working task's status message
//!   (its `tools/call` was answered: there is no request to send progress to).
//!
//! A name that [requires](Tasks::require) a task is refused to a client that did
//! not declare the extension (`-32021`, naming it); any other name runs as an
//! ordinary call for it, and so does every call of a protocol older than
//! `2026-07-28`. A task made for a principal (the HTTP layer's) is found only by
//! the same principal and reads as unknown to anyone else; one made without is
//! found by its id alone (128 random bits). A task's call runs no longer than
//! its time to live from creation ([`Tasks::with_ttl`]; it fails then), the task
//! is read for a minute more, and at most [`Tasks::with_max_tasks`] are kept at
//! once (ended ones count until they are forgotten). A later round's requests
//! are asked under new keys (`confirm.2`), so an answer meant for an earlier one
//! never answers them; the call reads its own keys.
//!
//! The table is the process's: a fleet of servers behind a balancer answers for
//! such a task on the replica that created it only. A backend that keeps its
//! jobs in a store every replica reads (toolgraft-jobs' `remote`) makes tasks
//! of its own when the server follows it ([`Tasks::with_follower`]): a call to a
//! branch whose outermost relocating layer it is, with only wrappers outside, is
//! enqueued and answered with a task that is its job, which every replica that
//! follows the same backend answers for (`tasks/get` reads the job, `tasks/cancel`
//! cancels it). Such a task is found by its id (which carries a secret of its
//! job's, not its job id alone) and only by the principal it was made for; the
//! table's limits (`max_tasks`, the time to live) are not its: the job's store
//! keeps it for its retention.
//!
//! rmcp has a task table of its own (`rmcp::task_manager::TaskManager`, 3.11),
//! which this crate does not use because it lacks what the calls here need: it
//! finds a task by its id alone, for any caller (no principal scoping); it holds
//! any number of tasks (no `max_tasks`) and, with no time to live given, keeps
//! them for its lifetime; `tasks/cancel` only records the wish (the future runs on
//! unless it polls its `TaskContext`), where a call here sees its request's
//! cancellation and is dropped; it asks for input mid-future
//! (`TaskContext::request_input`, one key once per task), where a toolgraft call
//! asks by ending with an `InputRequired` and is run again with the answers, as
//! a client's next `tools/call` would run it (so a task here keeps how to resume
//! it, and renames a later round's keys); it spawns every call as a task, where
//! one here takes a place first and gives it back when answered without waiting;
//! and it knows no followed job, a task whose state is a backend's job, read
//! from a store every replica shares.

// The files, bottom to top: the settings a server is given; when and how long
// (RFC 3339 times, milliseconds); a call's end as MCP answers it; a task's
// record; the table; when a call becomes a task.
mod settings;
mod clock;
mod settled;
mod record;
mod table;
mod moment;

pub use settings::{MAX_TASKS, MAX_TTL, TaskSettingError, TaskSupport, Tasks};

pub(crate) use clock::{millis, now_iso};
#[cfg(feature = "upstream")]
pub(crate) use moment::Hold;
pub(crate) use moment::TaskMoment;
pub(crate) use settled::{Resume, Running, Settled, error_object, object_of, unknown};
pub(crate) use table::{FollowedTask, Table};
