//! A task's times as MCP writes them (RFC 3339, UTC) and its durations as
//! milliseconds.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now, as `createdAt` and `lastUpdatedAt` take it.
pub(crate) fn now_iso() -> String {
    rfc3339(SystemTime::now())
}

/// `at` in UTC to the millisecond, `2026-12-04T18:11:12.345Z`; a clock set
/// before 1970 reads as the epoch.
fn rfc3339(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let seconds = since.as_secs();
    let (days, of_day) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil(days);
    let mut text = String::with_capacity(24);
    // Writing to a String cannot fail.
    let _ = write!(
        text,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3_600,
        of_day % 3_600 / 60,
        of_day % 60,
        since.subsec_millis(),
    );
    text
}

/// The Gregorian date `days` after 1970-01-01: Howard Hinnant's
/// `civil_from_days`, on eras of 400 years (146 097 days) that start on 1 March,
/// so a leap day is the last of its year.
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let of_era = z % 146_097;
    let year_of_era = (of_era - of_era / 1_460 + of_era / 36_524 - of_era / 146_096) / 365;
    let of_year = of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * of_year + 2) / 153;
    let day = of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// `duration` in whole milliseconds, as `ttlMs` and `pollIntervalMs` take it.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64, millis: u64) -> String {
        rfc3339(UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_millis(millis))
    }

    #[test]
    fn known_instants_are_written_as_rfc_3339_utc() {
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 0), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(951_868_799, 999), "2000-02-29T23:59:59.999Z");
        assert_eq!(at(951_868_800, 0), "2000-03-01T00:00:00.000Z");
        assert_eq!(at(1_078_012_800, 0), "2004-02-29T00:00:00.000Z");
        // 2100 is no leap year: 28 February is followed by 1 March.
        assert_eq!(at(4_107_542_399, 0), "2100-02-28T23:59:59.000Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000Z");
        assert_eq!(at(1_709_164_800, 5), "2024-02-29T00:00:00.005Z");
        assert_eq!(at(1_735_689_599, 0), "2024-12-31T23:59:59.000Z");
        assert_eq!(at(1_234_567_890, 123), "2009-02-13T23:31:30.123Z");
        assert_eq!(at(253_402_300_799, 0), "9999-12-31T23:59:59.000Z");
    }

    #[test]
    fn before_the_epoch_reads_as_the_epoch() {
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(rfc3339(before), "1970-01-01T00:00:00.000Z");
    }
}
