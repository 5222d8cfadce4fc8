//! Config values that hold their invariants: a timeout is finite, within range and (unless it
//! may be zero) positive; a count is within its range; a base URL is http(s). Parsing refuses
//! anything else, saying why.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The longest timeout or window a setting may name (about 115 days): far past any real use,
/// and far from where adding it to a clock's instant would overflow.
pub const MAX_SECONDS: f64 = 10_000_000.0;

/// A positive number of seconds, at most [`MAX_SECONDS`] (a timeout).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Seconds(f64);

/// Zero or a positive number of seconds (a wait that may be none).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct WaitSeconds(f64);

/// A whole number of seconds, at least one (written as an integer, kept as one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct WholeSeconds(u64);

/// How a refused number of seconds is described; `fix_for` in the loader keys on it.
pub const SECONDS_PROBLEM: &str = "must be a positive number of seconds (at most 10000000)";
pub const WAIT_PROBLEM: &str = "must be zero or a positive number of seconds (at most 10000000)";
pub const WHOLE_SECONDS_PROBLEM: &str = "must be at least 1 and at most 10000000";

impl Seconds {
    /// For defaults written in code; panics at compile time when used in a `const`.
    pub const fn from_secs(n: u32) -> Seconds {
        assert!(n > 0 && n as f64 <= MAX_SECONDS, "a timeout in range");
        Seconds(n as f64)
    }

    pub fn get(self) -> f64 {
        self.0
    }

    pub fn duration(self) -> Duration {
        Duration::from_secs_f64(self.0)
    }
}

impl TryFrom<f64> for Seconds {
    type Error = String;

    fn try_from(value: f64) -> Result<Self, String> {
        if value.is_finite() && value > 0.0 && value <= MAX_SECONDS {
            Ok(Seconds(value))
        } else {
            Err(format!("{SECONDS_PROBLEM}, not {value}"))
        }
    }
}

impl From<Seconds> for f64 {
    fn from(s: Seconds) -> f64 {
        s.0
    }
}

impl WaitSeconds {
    pub const fn from_secs(n: u32) -> WaitSeconds {
        assert!(n as f64 <= MAX_SECONDS, "a wait in range");
        WaitSeconds(n as f64)
    }

    pub fn duration(self) -> Duration {
        Duration::from_secs_f64(self.0)
    }
}

impl TryFrom<f64> for WaitSeconds {
    type Error = String;

    fn try_from(value: f64) -> Result<Self, String> {
        if (0.0..=MAX_SECONDS).contains(&value) {
            Ok(WaitSeconds(value))
        } else {
            Err(format!("{WAIT_PROBLEM}, not {value}"))
        }
    }
}

impl From<WaitSeconds> for f64 {
    fn from(s: WaitSeconds) -> f64 {
        s.0
    }
}

impl WholeSeconds {
    pub const fn from_secs(n: u64) -> WholeSeconds {
        assert!(n > 0 && n as f64 <= MAX_SECONDS, "a timeout in range");
        WholeSeconds(n)
    }

    pub fn get(self) -> u64 {
        self.0
    }

    pub fn duration(self) -> Duration {
        Duration::from_secs(self.0)
    }
}

impl TryFrom<u64> for WholeSeconds {
    type Error = String;

    fn try_from(value: u64) -> Result<Self, String> {
        if value > 0 && value as f64 <= MAX_SECONDS {
            Ok(WholeSeconds(value))
        } else {
            Err(format!("{WHOLE_SECONDS_PROBLEM}, not {value}"))
        }
    }
}

impl From<WholeSeconds> for u64 {
    fn from(s: WholeSeconds) -> u64 {
        s.0
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for WholeSeconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A whole number within `LO..=HI` (a count, or a period in the unit its field's name says).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct InRange<const LO: u64, const HI: u64>(u64);

/// How a refused whole number is described; `fix_for` in the loader keys on it.
pub const RANGE_PROBLEM: &str = "must be a whole number from";

impl<const LO: u64, const HI: u64> InRange<LO, HI> {
    /// For defaults written in code; panics at compile time when used in a `const`.
    pub const fn new(n: u64) -> Self {
        assert!(LO <= n && n <= HI, "a value in range");
        InRange(n)
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl<const LO: u64, const HI: u64> TryFrom<u64> for InRange<LO, HI> {
    type Error = String;

    fn try_from(value: u64) -> Result<Self, String> {
        if (LO..=HI).contains(&value) {
            Ok(InRange(value))
        } else {
            Err(format!("{RANGE_PROBLEM} {LO} to {HI}, not {value}"))
        }
    }
}

impl<const LO: u64, const HI: u64> From<InRange<LO, HI>> for u64 {
    fn from(n: InRange<LO, HI>) -> u64 {
        n.0
    }
}

/// A share from 0 to 1 (a sampling ratio, a chance).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Ratio(f64);

/// How a refused share is described; `fix_for` in the loader keys on it.
pub const RATIO_PROBLEM: &str = "must be a number from 0 to 1";

impl Ratio {
    pub const ONE: Ratio = Ratio(1.0);

    pub fn get(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for Ratio {
    type Error = String;

    fn try_from(value: f64) -> Result<Self, String> {
        if (0.0..=1.0).contains(&value) { Ok(Ratio(value)) } else { Err(format!("{RATIO_PROBLEM}, not {value}")) }
    }
}

impl From<Ratio> for f64 {
    fn from(r: Ratio) -> f64 {
        r.0
    }
}

/// A source's API base: an absolute `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BaseUrl(String);

/// How a refused base URL is described; `fix_for` in the loader keys on it.
pub const BASE_URL_PROBLEM: &str = "is not an http(s) URL";

impl BaseUrl {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The base without trailing slashes, as adapters join paths to it.
    pub fn trimmed(&self) -> &str {
        self.0.trim_end_matches('/')
    }

    pub fn url(&self) -> reqwest::Url {
        reqwest::Url::parse(&self.0).expect("checked when parsed")
    }
}

impl TryFrom<String> for BaseUrl {
    type Error = String;

    fn try_from(value: String) -> Result<Self, String> {
        match reqwest::Url::parse(&value) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(BaseUrl(value)),
            _ => Err(format!("`{value}` {BASE_URL_PROBLEM}")),
        }
    }
}

impl From<BaseUrl> for String {
    fn from(url: BaseUrl) -> String {
        url.0
    }
}

impl fmt::Display for BaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_values_cannot_be_made() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, MAX_SECONDS * 2.0] {
            assert!(Seconds::try_from(bad).is_err(), "{bad}");
        }
        assert_eq!(Seconds::try_from(0.5).unwrap().duration(), Duration::from_millis(500));
        assert!(WaitSeconds::try_from(0.0).is_ok() && WaitSeconds::try_from(-0.1).is_err());
        assert!(WholeSeconds::try_from(0).is_err() && WholeSeconds::try_from(10_000_001).is_err());
        assert!(BaseUrl::try_from("ftp://x".to_string()).is_err());
        assert_eq!(InRange::<20, 1000>::try_from(5).unwrap_err(), format!("{RANGE_PROBLEM} 20 to 1000, not 5"));
        assert_eq!(InRange::<20, 1000>::try_from(1000).unwrap().get(), 1000);
        assert!(Ratio::try_from(1.5).is_err() && Ratio::try_from(f64::NAN).is_err() && Ratio::try_from(0.0).is_ok());
        assert!(BaseUrl::try_from("not-a-url".to_string()).unwrap_err().contains(BASE_URL_PROBLEM));
        assert_eq!(BaseUrl::try_from("http://h/v1/".to_string()).unwrap().trimmed(), "http://h/v1");
    }

    #[test]
    fn they_read_and_write_as_the_numbers_and_strings_they_are() {
        let s: WholeSeconds = serde_json::from_str("120").unwrap();
        assert_eq!(serde_json::to_string(&s).unwrap(), "120");
        let e = serde_json::from_str::<Seconds>("0").unwrap_err().to_string();
        assert!(e.starts_with(SECONDS_PROBLEM), "{e}");
    }
}
