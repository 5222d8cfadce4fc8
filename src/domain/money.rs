//! Money as the books keep it: `Usd` in whole pico-dollars (exact, summed as integers), prices
//! per token derived from "USD per 1M tokens", and what a call cost from its token counts.

use std::fmt;

use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

use super::UnixMs;

/// An amount in US dollars, held as whole pico-dollars (10⁻¹² USD): exact, no float drift.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usd(i64);

/// Why a written amount is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error("`{0}` is not a decimal number (write USD as \"2.50\")")]
    NotANumber(String),
    #[error("`{0}` is negative")]
    Negative(String),
    #[error("`{0}` has more decimal places than a pico-dollar ({1} at most here)")]
    TooPrecise(String, u32),
    #[error("`{0}` is too large")]
    TooLarge(String),
}

impl Usd {
    pub const ZERO: Usd = Usd(0);

    pub const fn from_pico(pico: i64) -> Usd {
        Usd(pico)
    }

    pub const fn pico(self) -> i64 {
        self.0
    }

    /// Reads a dollar amount as written ("0.04", "12"): exact, never negative.
    pub fn parse(text: &str) -> Result<Usd, MoneyError> {
        Ok(Usd(scaled(text, 12)?))
    }

    pub fn saturating_add(self, other: Usd) -> Usd {
        Usd(self.0.saturating_add(other.0))
    }

    /// `self` × `n`, saturating.
    pub fn times(self, n: u64) -> Usd {
        Usd(i64::try_from((self.0 as i128).saturating_mul(n as i128)).unwrap_or(i64::MAX))
    }

    pub fn as_decimal(self) -> Decimal {
        Decimal::new(self.0, 12).normalize()
    }

    /// For gauges and spans only (never summed back into the books).
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1e12
    }
}

impl fmt::Display for Usd {
    /// The shortest exact decimal ("0.000207", "12"): whole dollars, then the pico-dollars
    /// without their trailing zeros. Integer arithmetic: it is written for every answer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const PER_USD: u64 = 1_000_000_000_000;
        let pico = self.0.unsigned_abs();
        if self.0 < 0 {
            f.write_str("-")?;
        }
        write!(f, "{}", pico / PER_USD)?;
        let mut frac = pico % PER_USD;
        if frac == 0 {
            return Ok(());
        }
        // Twelve digits, then the trailing zeros dropped; on the stack.
        let mut digits = [b'0'; 12];
        for d in digits.iter_mut().rev() {
            *d = b'0' + (frac % 10) as u8;
            frac /= 10;
        }
        let end = digits.iter().rposition(|d| *d != b'0').map_or(0, |i| i + 1);
        f.write_str(".")?;
        f.write_str(std::str::from_utf8(&digits[..end]).map_err(|_| fmt::Error)?)
    }
}

impl serde::Serialize for Usd {
    /// As an exact decimal string ("0.00042"): a JSON number would be read back as a float.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Usd {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Usd, D::Error> {
        let text = decimal_text(d)?;
        Usd::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A decimal written as a string or a plain number (YAML and JSON numbers are read as their
/// shortest text, so `0.075` stays 0.075).
fn decimal_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Written {
        Text(String),
        Int(u64),
        Float(f64),
    }
    Ok(match Written::deserialize(d)? {
        Written::Text(t) => t,
        Written::Int(n) => n.to_string(),
        Written::Float(x) => x.to_string(),
    })
}

use serde::Deserialize as _;

/// `text` × 10^`places` as a whole number; refused when it has more decimal places.
fn scaled(text: &str, places: u32) -> Result<i64, MoneyError> {
    let trimmed = text.trim();
    let value: Decimal = trimmed.parse().map_err(|_| MoneyError::NotANumber(text.to_string()))?;
    if value.is_sign_negative() && !value.is_zero() {
        return Err(MoneyError::Negative(text.to_string()));
    }
    let value = value.normalize();
    if value.scale() > places {
        return Err(MoneyError::TooPrecise(text.to_string(), places));
    }
    let factor = Decimal::from(10i64.pow(places.min(18)));
    value.checked_mul(factor).and_then(|v| v.to_i64()).ok_or_else(|| MoneyError::TooLarge(text.to_string()))
}

/// A price per token, written as USD per 1M tokens (at most 6 decimal places: whole
/// pico-dollars per token).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct PerMillion(Usd);

impl PerMillion {
    pub fn parse(text: &str) -> Result<PerMillion, MoneyError> {
        // USD per 1M tokens × 10⁶ = pico-dollars per token.
        Ok(PerMillion(Usd(scaled(text, 6)?)))
    }

    /// What `tokens` cost at this price.
    pub fn of(self, tokens: u64) -> Usd {
        self.0.times(tokens)
    }

    /// As written: USD per 1M tokens.
    pub fn per_million(self) -> Usd {
        self.0.times(1_000_000)
    }
}

impl fmt::Display for PerMillion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.per_million().fmt(f)
    }
}

impl serde::Serialize for PerMillion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for PerMillion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PerMillion, D::Error> {
        let text = decimal_text(d)?;
        PerMillion::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The per-token prices of one model (or of one of its long-context tiers). Cache reads and
/// writes default to the input price when a provider does not price them apart.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rates {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<PerMillion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<PerMillion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<PerMillion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<PerMillion>,
}

impl Rates {
    /// `self` with the fields `over` sets replaced.
    pub fn overlaid(&self, over: &Rates) -> Rates {
        Rates {
            input: over.input.or(self.input),
            cached_input: over.cached_input.or(self.cached_input),
            cache_write: over.cache_write.or(self.cache_write),
            output: over.output.or(self.output),
        }
    }
}

/// Long-context pricing: a request whose prompt is above `above_input_tokens` pays these
/// rates for every token (output included); a rate left out keeps the base one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tier {
    pub above_input_tokens: u64,
    #[serde(flatten)]
    pub rates: Rates,
}

/// A dated list-price change: from `from` on, the rates it sets replace the base ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub from: UnixMs,
    pub rates: Rates,
}

/// Everything that prices one model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Price {
    pub rates: Rates,
    pub tiers: Vec<Tier>,
    pub changes: Vec<Change>,
    /// USD per generated image by variant (`<quality>_<WxH>`, or `default`).
    pub images: Vec<(String, Usd)>,
}

/// What one call used, for its cost: the prompt's tokens in all (cache reads and writes
/// included, as OpenAI counts them), of which read from and written to the cache, the
/// generated tokens, and the images made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub prompt: u64,
    pub cached: u64,
    pub cache_write: u64,
    pub output: u64,
    pub images: u64,
}

/// A call's cost, and whether any part of it is an estimate (estimated tokens, or an image
/// variant the price does not list).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    pub usd: Usd,
    pub estimated: bool,
}

impl Cost {
    pub fn plus(self, other: Cost) -> Cost {
        Cost { usd: self.usd.saturating_add(other.usd), estimated: self.estimated || other.estimated }
    }
}

impl Price {
    /// Flat per-token rates.
    pub fn flat(rates: Rates) -> Price {
        Price { rates, ..Price::default() }
    }

    /// The rates in force at `at` for a prompt of `prompt` tokens: the latest change from
    /// before `at` over the base, then the highest tier the prompt is above.
    pub fn rates_for(&self, at: UnixMs, prompt: u64) -> Rates {
        let mut rates = self.rates.clone();
        if let Some(change) = self.changes.iter().filter(|c| c.from <= at).max_by_key(|c| c.from) {
            rates = rates.overlaid(&change.rates);
        }
        if let Some(tier) =
            self.tiers.iter().filter(|t| prompt > t.above_input_tokens).max_by_key(|t| t.above_input_tokens)
        {
            rates = rates.overlaid(&tier.rates);
        }
        rates
    }

    /// What `counts` cost at `at`; `image_variant` names the size and quality asked for.
    pub fn cost(&self, at: UnixMs, counts: &Counts, image_variant: Option<&str>) -> Cost {
        let rates = self.rates_for(at, counts.prompt);
        let input = rates.input.unwrap_or_default();
        let cached = counts.cached.min(counts.prompt);
        let written = counts.cache_write.min(counts.prompt - cached);
        let uncached = counts.prompt - cached - written;
        let mut usd = input
            .of(uncached)
            .saturating_add(rates.cached_input.unwrap_or(input).of(cached))
            .saturating_add(rates.cache_write.unwrap_or(input).of(written))
            .saturating_add(rates.output.unwrap_or_default().of(counts.output));
        let mut estimated = false;
        if counts.images > 0 && !self.images.is_empty() {
            let (each, exact) = self.image_price(image_variant);
            usd = usd.saturating_add(each.times(counts.images));
            estimated = !exact;
        }
        Cost { usd, estimated }
    }

    /// The price of one image of `variant`: its own, else `default`, else the dearest listed
    /// (an estimate that never undercounts).
    fn image_price(&self, variant: Option<&str>) -> (Usd, bool) {
        let find = |name: &str| self.images.iter().find(|(v, _)| v == name).map(|(_, p)| *p);
        if let Some(p) = variant.and_then(find) {
            return (p, true);
        }
        if let Some(p) = find("default") {
            return (p, variant.is_none());
        }
        (self.images.iter().map(|(_, p)| *p).max().unwrap_or_default(), false)
    }

    /// The most a call with a prompt of `prompt` tokens and up to `output` generated tokens
    /// can cost at `at` (what a budget sets aside before the call): nothing read from cache.
    pub fn worst_case(&self, at: UnixMs, prompt: u64, output: u64, images: u64) -> Usd {
        let rates = self.rates_for(at, prompt);
        let input = [rates.input, rates.cache_write].into_iter().flatten().max().unwrap_or_default();
        let image = self.images.iter().map(|(_, p)| *p).max().unwrap_or_default();
        input.of(prompt).saturating_add(rates.output.unwrap_or_default().of(output)).saturating_add(image.times(images))
    }

    /// The price of 1M input plus 1M output tokens, what "cheapest" orders by.
    pub fn blended(&self, at: UnixMs) -> Usd {
        let rates = self.rates_for(at, 0);
        let image = self.images.iter().map(|(_, p)| *p).max().unwrap_or_default();
        rates
            .input
            .unwrap_or_default()
            .per_million()
            .saturating_add(rates.output.unwrap_or_default().per_million())
            .saturating_add(image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pm(text: &str) -> Option<PerMillion> {
        Some(PerMillion::parse(text).unwrap())
    }

    #[test]
    fn amounts_are_exact_and_print_back_as_written() {
        assert_eq!(Usd::parse("0.04").unwrap().pico(), 40_000_000_000);
        assert_eq!(Usd::parse("12").unwrap().to_string(), "12");
        for text in ["0", "0.5", "1.000000000001", "0.000207", "9223372.036854775807", "100"] {
            let usd = Usd::parse(text).unwrap();
            assert_eq!(usd.to_string(), text, "printed as written");
            assert_eq!(usd.to_string(), usd.as_decimal().to_string(), "as the decimal prints it");
        }
        assert_eq!(Usd::from_pico(-1_500_000_000_000).to_string(), "-1.5");
        assert_eq!(Usd::parse(" 0.000000000001 ").unwrap().pico(), 1);
        assert!(matches!(Usd::parse("0.0000000000001"), Err(MoneyError::TooPrecise(..))));
        assert!(matches!(Usd::parse("-1"), Err(MoneyError::Negative(_))));
        assert!(matches!(Usd::parse("abc"), Err(MoneyError::NotANumber(_))));
        assert!(matches!(Usd::parse("99999999999"), Err(MoneyError::TooLarge(_))));
        // 0.1 + 0.2 is 0.3 here, not 0.30000000000000004.
        let sum = Usd::parse("0.1").unwrap().saturating_add(Usd::parse("0.2").unwrap());
        assert_eq!(sum.to_string(), "0.3");
        assert_eq!(serde_json::to_string(&sum).unwrap(), "\"0.3\"");
        let read: Usd = serde_json::from_str("0.075").unwrap();
        assert_eq!(read.to_string(), "0.075", "a JSON number is read by its text");
    }

    #[test]
    fn a_price_per_million_is_whole_pico_dollars_per_token() {
        let p = PerMillion::parse("0.075").unwrap();
        assert_eq!(p.of(1).pico(), 75_000);
        assert_eq!(p.of(1234).to_string(), "0.00009255");
        assert_eq!(p.to_string(), "0.075");
        assert!(PerMillion::parse("0.0000001").is_err(), "below a pico-dollar per token");
        assert_eq!(PerMillion::parse("0.0028").unwrap().of(1_000_000).to_string(), "0.0028");
    }

    #[test]
    fn cached_and_written_prompt_tokens_pay_their_own_rates() {
        let price =
            Price::flat(Rates { input: pm("3"), cached_input: pm("0.30"), cache_write: pm("3.75"), output: pm("15") });
        let counts = Counts { prompt: 10_000, cached: 6_000, cache_write: 2_000, output: 500, images: 0 };
        // 2000 × 3 + 6000 × 0.30 + 2000 × 3.75 + 500 × 15, per 1M.
        let cost = price.cost(UnixMs(0), &counts, None);
        assert_eq!(cost.usd.to_string(), "0.0228");
        assert!(!cost.estimated);
        let hostile = Counts { prompt: 5, cached: u64::MAX, cache_write: u64::MAX, output: 0, images: 0 };
        assert_eq!(
            price.cost(UnixMs(0), &hostile, None).usd,
            Usd::parse("0.0000015").unwrap(),
            "reads capped by the prompt"
        );
        let no_cache_rates = Price::flat(Rates { input: pm("2"), output: pm("8"), ..Rates::default() });
        assert_eq!(no_cache_rates.cost(UnixMs(0), &counts, None).usd.to_string(), "0.024", "cache at the input rate");
    }

    #[test]
    fn a_long_prompt_moves_every_token_to_the_tier() {
        let price = Price {
            rates: Rates { input: pm("3"), output: pm("15"), ..Rates::default() },
            tiers: vec![Tier {
                above_input_tokens: 200_000,
                rates: Rates { input: pm("6"), output: pm("22.50"), ..Rates::default() },
            }],
            ..Price::default()
        };
        let at = |prompt| price.cost(UnixMs(0), &Counts { prompt, output: 1_000, ..Counts::default() }, None).usd;
        assert_eq!(at(200_000).to_string(), "0.615", "at the threshold: base");
        assert_eq!(at(200_001).to_string(), "1.222506", "above: all of it at the tier");
    }

    #[test]
    fn dated_changes_apply_from_their_day() {
        let price = Price {
            rates: Rates { input: pm("1"), output: pm("2"), ..Rates::default() },
            changes: vec![Change { from: UnixMs(1000), rates: Rates { input: pm("4"), ..Rates::default() } }],
            ..Price::default()
        };
        let counts = Counts { prompt: 1_000_000, ..Counts::default() };
        assert_eq!(price.cost(UnixMs(999), &counts, None).usd.to_string(), "1");
        assert_eq!(price.cost(UnixMs(1000), &counts, None).usd.to_string(), "4");
    }

    #[test]
    fn images_are_priced_by_variant_and_an_unlisted_one_is_an_overestimate() {
        let price = Price {
            images: vec![
                ("low_1024x1024".into(), Usd::parse("0.011").unwrap()),
                ("high_1024x1024".into(), Usd::parse("0.167").unwrap()),
            ],
            ..Price::default()
        };
        let two = Counts { images: 2, ..Counts::default() };
        assert_eq!(
            price.cost(UnixMs(0), &two, Some("low_1024x1024")),
            Cost { usd: Usd::parse("0.022").unwrap(), estimated: false }
        );
        assert_eq!(
            price.cost(UnixMs(0), &two, Some("odd")),
            Cost { usd: Usd::parse("0.334").unwrap(), estimated: true }
        );
    }

    #[test]
    fn the_worst_case_covers_any_real_cost_of_the_same_call() {
        let price =
            Price::flat(Rates { input: pm("3"), cached_input: pm("0.3"), cache_write: pm("3.75"), output: pm("15") });
        let worst = price.worst_case(UnixMs(0), 1000, 100, 0);
        for (cached, written) in [(0, 0), (1000, 0), (0, 1000), (500, 500)] {
            let real = price.cost(
                UnixMs(0),
                &Counts { prompt: 1000, cached, cache_write: written, output: 100, images: 0 },
                None,
            );
            assert!(real.usd <= worst, "{real:?} > {worst}");
        }
    }
}
