//! UTC calendar arithmetic for the dashboard (Unix milliseconds ⇄ dates), without a
//! time-zone database: the dashboard shows UTC.

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) → days since 1970-01-01 (`days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD HH:MM` (UTC) of Unix milliseconds.
pub fn format_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000) / 1000;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60
    )
}

/// `MM-DD` of a day number.
pub fn format_day(day: i64) -> String {
    let (_, m, d) = civil_from_days(day);
    format!("{m:02}-{d:02}")
}

/// `YYYY-MM-DD` → Unix milliseconds of that day's start (UTC); `None` if malformed.
pub fn parse_date(s: &str) -> Option<i64> {
    let mut it = s.splitn(3, '-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: u32 = it.next()?.parse().ok()?;
    let d: u32 = it.next()?.parse().ok()?;
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let days = days_from_civil(y, m, d);
    // Reject 2026-02-31 and the like: the round trip must give the same date.
    (civil_from_days(days) == (y, m, d)).then_some(days * 86_400_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip() {
        assert_eq!(format_ms(0), "1970-01-01 00:00");
        assert_eq!(parse_date("2026-11-23"), Some(1_795_392_000_000));
        assert_eq!(format_ms(1_795_392_000_000 + 3_723_000), "2026-11-23 01:02");
        assert_eq!(
            parse_date("2024-02-29").map(format_ms).as_deref(),
            Some("2024-02-29 00:00")
        );
        assert_eq!(parse_date("2026-02-31"), None);
        assert_eq!(parse_date("yesterday"), None);
    }
}
