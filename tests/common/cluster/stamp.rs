//! Times as the Kubernetes API writes them (`creationTimestamp`, a condition's
//! `lastTransitionTime`): RFC 3339 in UTC, from the wall clock, since readers such as `serve`'s
//! learned cold start compare them with their own wall clock.

use std::time::SystemTime;

/// `t` in RFC 3339, UTC: whole seconds as the API writes a `Time`, or with milliseconds.
pub fn rfc3339(t: SystemTime, millis: bool) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rest / 3600, rest % 3600 / 60, rest % 60);
    let fraction = if millis {
        format!(".{:03}", d.subsec_millis())
    } else {
        String::new()
    };
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}{fraction}Z")
}
