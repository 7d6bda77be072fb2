//! Datetimes without a time zone, as in Azure's LLM inference traces, read as 100 ns ticks.
//!
//! Only differences between arrivals matter, so a small exact parser is enough: whole ticks
//! keep the 7 fractional digits those traces print, which epoch seconds in an `f64` would
//! round away.

/// Datetime ticks per second (100 ns ticks, the 7 fractional digits Azure's traces carry).
pub const TICKS_PER_S: i64 = 10_000_000;

/// `YYYY-MM-DD HH:MM:SS[.fffffff]` (or `T` between date and time) as 100 ns ticks since
/// 1970-01-01, no time zone.
pub fn datetime_ticks(s: &str) -> Result<i64, String> {
    let (date, time) = s
        .split_once([' ', 'T'])
        .ok_or("expected YYYY-MM-DD HH:MM:SS[.fffffff]")?;
    let num = |part: &str, what: &str, digits: usize| -> Result<i64, String> {
        if part.len() != digits || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{what} {part:?} is not {digits} digits"));
        }
        part.parse().map_err(|_| format!("{what} {part:?}"))
    };
    let d: Vec<&str> = date.split('-').collect();
    let [y, mo, day] = d[..] else {
        return Err(format!("date {date:?} is not YYYY-MM-DD"));
    };
    let (y, mo, day) = (
        num(y, "year", 4)?,
        num(mo, "month", 2)?,
        num(day, "day", 2)?,
    );
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let t: Vec<&str> = hms.split(':').collect();
    let [h, mi, sec] = t[..] else {
        return Err(format!("time {time:?} is not HH:MM:SS"));
    };
    let (h, mi, sec) = (
        num(h, "hour", 2)?,
        num(mi, "minute", 2)?,
        num(sec, "second", 2)?,
    );
    if !(1..=12).contains(&mo) || day < 1 || day > days_in_month(y, mo) {
        return Err(format!("no such date {date}"));
    }
    if h > 23 || mi > 59 || sec > 59 {
        return Err(format!("no such time {hms}"));
    }
    if frac.len() > 7 || (time.contains('.') && frac.is_empty()) {
        return Err(format!("fraction {frac:?}: expected 1 to 7 digits"));
    }
    let frac_ticks = if frac.is_empty() {
        0
    } else {
        num(frac, "fraction", frac.len())? * 10i64.pow(7 - frac.len() as u32)
    };
    let seconds = days_from_civil(y, mo, day) * 86_400 + h * 3600 + mi * 60 + sec;
    Ok(seconds * TICKS_PER_S + frac_ticks)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (the usual era arithmetic: years counted
/// from March so the leap day falls last).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_count_days_across_months_and_years() {
        assert_eq!(datetime_ticks("1970-01-01 00:00:00"), Ok(0));
        assert_eq!(
            datetime_ticks("2023-11-16 00:00:00"),
            Ok(1_700_092_800 * TICKS_PER_S)
        );
        assert_eq!(
            datetime_ticks("2024-02-29T12:00:00.5"),
            Ok((1_709_164_800 + 43_200) * TICKS_PER_S + 5_000_000)
        );
        let a = datetime_ticks("2023-12-31 23:59:59.9").unwrap();
        let b = datetime_ticks("2024-01-01 00:00:00.1000000").unwrap();
        assert_eq!(b - a, 2_000_000);
        for bad in [
            "2023-11-16",
            "2023-13-01 00:00:00",
            "2023-02-29 00:00:00",
            "2023-11-16 24:00:00",
            "2023-11-16 18:15:46.68059001",
            "2023-11-16 18:15:46.",
            "2023-11-16 18:15:4x",
            "16/11/2023 18:15:46",
            "2023-11-16 18:15:46+01:00",
        ] {
            assert!(datetime_ticks(bad).is_err(), "{bad}");
        }
    }
}
