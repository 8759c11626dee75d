//! The one clock of jobs, tickets, retention and fleet reports: milliseconds
//! since the Unix epoch, as every process of a fleet reads them (microseconds
//! for a job's queue wait, which is often shorter than one).

/// Milliseconds since the Unix epoch (0 before the epoch).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// Microseconds since the Unix epoch (0 before the epoch).
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}
