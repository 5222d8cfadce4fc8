//! Quota and budget periods: which window a moment falls in (hour, day, week, month, every n
//! hours, all in UTC) and how much (tokens, or pico-dollars) was used in the current window.

use chrono::{DateTime, Datelike, Months, NaiveDate, TimeZone, Utc};
use serde::Deserialize;

use super::clock::UnixMs;

const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;

/// When a quota starts over (written as its config name: `hour`, `nhour:5`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Period {
    /// Never: the quota is a lifetime total.
    Never,
    /// At the top of every UTC hour.
    Hour,
    /// Every day at 00:00 UTC.
    Day,
    /// Every Monday 00:00 UTC.
    Week,
    /// The 1st of every month, 00:00 UTC.
    Month,
    /// Every n hours, counted from the Unix epoch (so windows are the same after a restart).
    Hours(u32),
}

/// A slot's `token_quota` in its `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub tokens: u64,
    pub period: Period,
}

/// A period as the config writes it: `hour | week | month | nhour` (+ `hours`), empty = never.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PeriodName {
    #[default]
    #[serde(rename = "")]
    Never,
    Hour,
    Day,
    Week,
    Month,
    Nhour,
}

impl Period {
    /// `None` when `nhour` comes without a positive `hours`.
    pub fn from_config(name: PeriodName, hours: Option<u32>) -> Option<Period> {
        Some(match name {
            PeriodName::Never => Period::Never,
            PeriodName::Hour => Period::Hour,
            PeriodName::Day => Period::Day,
            PeriodName::Week => Period::Week,
            PeriodName::Month => Period::Month,
            PeriodName::Nhour => Period::Hours(hours.filter(|h| *h > 0)?),
        })
    }

    /// The window `now` falls in: its start and (unless `Never`) its end.
    pub fn window(self, now: UnixMs) -> (UnixMs, Option<UnixMs>) {
        let floor = |step: u64| UnixMs(now.0 - now.0 % step);
        match self {
            Period::Never => (UnixMs(0), None),
            Period::Hour => {
                let start = floor(HOUR_MS);
                (start, Some(UnixMs(start.0 + HOUR_MS)))
            }
            Period::Day => {
                let start = floor(DAY_MS);
                (start, Some(UnixMs(start.0 + DAY_MS)))
            }
            Period::Hours(n) => {
                let step = HOUR_MS * n as u64;
                let start = floor(step);
                (start, Some(UnixMs(start.0 + step)))
            }
            Period::Week => {
                // 1970-01-01 was a Thursday: shift so that Monday is day 0 of the week.
                let days = now.0 / DAY_MS;
                let start = UnixMs((days - (days + 3) % 7) * DAY_MS);
                (start, Some(UnixMs(start.0 + 7 * DAY_MS)))
            }
            Period::Month => {
                let date = DateTime::<Utc>::from_timestamp_millis(now.0 as i64).unwrap_or_default().date_naive();
                let first = NaiveDate::from_ymd_opt(date.year(), date.month(), 1).expect("the 1st exists");
                let next = first + Months::new(1);
                (midnight_ms(first), Some(midnight_ms(next)))
            }
        }
    }
}

impl std::fmt::Display for Period {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Period::Never => f.write_str("never"),
            Period::Hour => f.write_str("hour"),
            Period::Day => f.write_str("day"),
            Period::Week => f.write_str("week"),
            Period::Month => f.write_str("month"),
            Period::Hours(n) => write!(f, "nhour:{n}"),
        }
    }
}

impl From<Period> for String {
    fn from(period: Period) -> String {
        period.to_string()
    }
}

impl TryFrom<String> for Period {
    type Error = String;

    fn try_from(s: String) -> Result<Period, String> {
        s.parse()
    }
}

impl std::str::FromStr for Period {
    type Err = String;

    fn from_str(s: &str) -> Result<Period, String> {
        Ok(match s {
            "never" => Period::Never,
            "hour" => Period::Hour,
            "day" => Period::Day,
            "week" => Period::Week,
            "month" => Period::Month,
            _ => match s.strip_prefix("nhour:").and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => Period::Hours(n),
                _ => return Err(format!("`{s}` is not a quota period")),
            },
        })
    }
}

fn midnight_ms(date: NaiveDate) -> UnixMs {
    let at = Utc.from_utc_datetime(&date.and_hms_opt(0, 0, 0).expect("midnight exists"));
    UnixMs(at.timestamp_millis().max(0) as u64)
}

/// Tokens used in one window; a new window starts from zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    pub window_start: UnixMs,
    pub tokens: u64,
}

impl Usage {
    /// Tokens used in the window that holds `now`.
    pub fn used(&self, period: Period, now: UnixMs) -> u64 {
        if period.window(now).0 == self.window_start { self.tokens } else { 0 }
    }

    /// Adds `tokens` at `now`, starting over when a new window has begun.
    pub fn add(&mut self, period: Period, now: UnixMs, tokens: u64) {
        let start = period.window(now).0;
        if start != self.window_start {
            *self = Usage { window_start: start, tokens: 0 };
        }
        self.tokens = self.tokens.saturating_add(tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> UnixMs {
        UnixMs(DateTime::parse_from_rfc3339(text).unwrap().timestamp_millis() as u64)
    }

    #[test]
    fn windows_align_to_utc_hours_weeks_months_and_n_hours() {
        let now = at("2026-12-03T07:41:09Z"); // a Thursday
        assert_eq!(Period::Hour.window(now), (at("2026-12-03T07:00:00Z"), Some(at("2026-12-03T08:00:00Z"))));
        assert_eq!(Period::Day.window(now), (at("2026-12-03T00:00:00Z"), Some(at("2026-12-04T00:00:00Z"))));
        assert_eq!(Period::Week.window(now), (at("2026-11-30T00:00:00Z"), Some(at("2026-12-07T00:00:00Z"))));
        assert_eq!(Period::Month.window(now), (at("2026-12-01T00:00:00Z"), Some(at("2027-01-01T00:00:00Z"))));
        assert_eq!(Period::Hours(6).window(now), (at("2026-12-03T06:00:00Z"), Some(at("2026-12-03T12:00:00Z"))));
        assert_eq!(Period::Never.window(now), (UnixMs(0), None));
        let monday = at("2026-11-30T00:00:00Z");
        assert_eq!(Period::Week.window(monday).0, monday, "a window starts on its first millisecond");
        let feb = at("2028-02-29T23:59:59Z");
        assert_eq!(Period::Month.window(feb).1, Some(at("2028-03-01T00:00:00Z")), "leap February");
    }

    #[test]
    fn usage_rolls_over_when_the_window_changes() {
        let mut usage = Usage::default();
        let t = at("2026-12-03T07:10:00Z");
        usage.add(Period::Hour, t, 700);
        usage.add(Period::Hour, at("2026-12-03T07:59:59Z"), 300);
        assert_eq!(usage.used(Period::Hour, at("2026-12-03T07:59:59Z")), 1000);
        assert_eq!(usage.used(Period::Hour, at("2026-12-03T08:00:00Z")), 0, "the next hour starts from zero");
        usage.add(Period::Hour, at("2026-12-03T08:00:01Z"), 5);
        assert_eq!(usage, Usage { window_start: at("2026-12-03T08:00:00Z"), tokens: 5 });

        let mut lifetime = Usage::default();
        lifetime.add(Period::Never, t, 10);
        lifetime.add(Period::Never, at("2030-01-01T00:00:00Z"), 10);
        assert_eq!(lifetime.used(Period::Never, at("2031-01-01T00:00:00Z")), 20, "never resets");
    }

    #[test]
    fn periods_print_and_parse_back() {
        for p in [Period::Never, Period::Hour, Period::Day, Period::Week, Period::Month, Period::Hours(5)] {
            assert_eq!(p.to_string().parse::<Period>(), Ok(p));
        }
        assert!("nhour:0".parse::<Period>().is_err());
        assert!("daily".parse::<Period>().is_err());
    }

    #[test]
    fn nhour_needs_hours() {
        assert_eq!(Period::from_config(PeriodName::Nhour, Some(4)), Some(Period::Hours(4)));
        assert_eq!(Period::from_config(PeriodName::Nhour, None), None);
        assert_eq!(Period::from_config(PeriodName::Nhour, Some(0)), None);
        assert_eq!(Period::from_config(PeriodName::Month, None), Some(Period::Month));
    }
}
