//! What an answer costs, for its books: the price of the candidate that served, what the
//! request asked for (images, their variant), and the accounts (budgets) it is charged to.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderName, HeaderValue};

use super::error::ApiError;
use crate::config::ModelKind;
use crate::domain::{Cost, Counts, PerMillion, Price, UnixMs, Usd};
use crate::provider::Tally;

/// The most output tokens an image of a model priced by its tokens is taken at.
const MAX_OUTPUT_TOKENS_PER_IMAGE: u64 = 8_192;

/// What a request asks for that its price depends on, read once from its body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    /// Generated tokens it may use at most (its `max_tokens` × `n`, or the default reserve).
    pub completion: u64,
    /// Images it asks for (`n`), for an image model.
    pub images: u64,
    /// `<quality>_<size>` of the images asked for, as the price table keys them.
    pub image_variant: Option<String>,
}

impl Asked {
    /// What request `text` for a `kind` model asks for.
    pub fn of(text: &str, kind: ModelKind) -> Asked {
        let completion = super::admission::completion_reserve(text);
        if kind != ModelKind::Image {
            return Asked { completion, ..Asked::default() };
        }
        #[derive(serde::Deserialize)]
        struct ImageAsk {
            n: Option<u64>,
            size: Option<String>,
            quality: Option<String>,
        }
        let ask: Option<ImageAsk> = serde_json::from_str(text).ok();
        let images = ask.as_ref().and_then(|a| a.n).unwrap_or(1).clamp(1, 128);
        // A model priced by its image tokens: a large, high-quality image is about 6,000.
        let completion = images.saturating_mul(MAX_OUTPUT_TOKENS_PER_IMAGE);
        // Bounded: it is matched against the table's variant names, never stored.
        let variant = ask.and_then(|a| Some(format!("{}_{}", a.quality?, a.size?))).filter(|v| v.len() <= 64);
        Asked { completion, images, image_variant: variant }
    }

    /// The most the call can cost on the dearest of `prices` (nothing for unpriced ones: what
    /// has no price cannot be set aside, and is logged `cost_unknown`).
    pub fn worst_case<'p>(&self, prices: impl Iterator<Item = &'p Price>, prompt: u64, at: UnixMs) -> Usd {
        prices.map(|p| p.worst_case(at, prompt, self.completion, self.images)).max().unwrap_or_default()
    }
}

/// What one client request has cost, summed over every call made for it (fusion's candidates
/// and judge, vision's describe calls): the `x-switchyard-cost` header of a whole answer.
#[derive(Debug, Default)]
pub struct RequestCost(std::sync::Mutex<Option<Billed>>);

/// A sum of costs: exact, partly estimated, or unknown (a call had no price: never $0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Billed {
    Priced(Cost),
    Unknown,
}

/// Says how much a whole answer cost, in USD.
pub const COST_HEADER: HeaderName = HeaderName::from_static("x-switchyard-cost");
/// `estimated` or `unknown` when the cost is not exact.
pub const COST_STATUS_HEADER: HeaderName = HeaderName::from_static("x-switchyard-cost-status");

impl RequestCost {
    /// Adds one call's cost (`None`: it had no price).
    pub fn add(&self, cost: Option<Cost>) {
        let mut sum = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *sum = Some(match (*sum, cost) {
            (Some(Billed::Unknown), _) | (_, None) => Billed::Unknown,
            (None, Some(c)) => Billed::Priced(c),
            (Some(Billed::Priced(a)), Some(c)) => Billed::Priced(a.plus(c)),
        });
    }

    /// What the request cost so far in pico-dollars, when every call had a price (`None`
    /// before any call was billed, or once one had none).
    pub fn pico(&self) -> Option<i64> {
        match *self.0.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(Billed::Priced(cost)) => Some(cost.usd.pico()),
            _ => None,
        }
    }

    /// The cost headers; none before any call was billed.
    pub fn headers(&self, into: &mut HeaderMap) {
        let sum = *self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (value, status) = match sum {
            None => return,
            Some(Billed::Unknown) => ("unknown".to_string(), Some("unknown")),
            Some(Billed::Priced(c)) => (c.usd.to_string(), c.estimated.then_some("estimated")),
        };
        if let Ok(v) = HeaderValue::from_str(&value) {
            into.insert(COST_HEADER, v);
        }
        if let Some(status) = status {
            into.insert(COST_STATUS_HEADER, HeaderValue::from_static(status));
        }
    }
}

/// Says the most a client will pay, in USD per 1M tokens: `input=3, output=15` (either alone).
pub const MAX_PRICE_HEADER: &str = "x-switchyard-max-price";

/// A client's price limit: candidates dearer than this (or without a price) are not tried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaxPrice {
    pub input: Option<PerMillion>,
    pub output: Option<PerMillion>,
}

impl MaxPrice {
    /// The request's `x-switchyard-max-price`, if it has one; a malformed one is refused (a
    /// limit read wrong would spend what the client refused to).
    pub fn from_headers(headers: &axum::http::HeaderMap) -> Result<Option<MaxPrice>, ApiError> {
        let Some(value) = headers.get(MAX_PRICE_HEADER) else { return Ok(None) };
        let bad = |why: String| {
            ApiError::invalid_request(format!(
                "{MAX_PRICE_HEADER}: {why} (write USD per 1M tokens, e.g. `input=3, output=15`)"
            ))
            .param(MAX_PRICE_HEADER)
            .code("invalid_max_price")
        };
        let text = value.to_str().map_err(|_| bad("not text".into()))?;
        let mut limit = MaxPrice::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, amount) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("`{}` is not name=amount", part.chars().take(40).collect::<String>())))?;
            let amount = PerMillion::parse(amount).map_err(|e| bad(e.to_string()))?;
            match name.trim() {
                "input" | "prompt" => limit.input = Some(amount),
                "output" | "completion" => limit.output = Some(amount),
                other => {
                    return Err(bad(format!(
                        "`{}` is neither input nor output",
                        other.chars().take(40).collect::<String>()
                    )));
                }
            }
        }
        if limit == MaxPrice::default() {
            return Err(bad("it names no limit".into()));
        }
        Ok(Some(limit))
    }

    /// Why `price` (for a prompt of `prompt` tokens, at `at`) is over this limit; `None`
    /// when it is within it.
    pub fn refuses(&self, price: Option<&Price>, prompt: u64, at: UnixMs) -> Option<String> {
        let Some(price) = price else { return Some("it has no price".into()) };
        let rates = price.rates_for(at, prompt);
        let over = |limit: Option<PerMillion>, rate: Option<PerMillion>, what: &str| {
            let (limit, rate) = (limit?, rate.unwrap_or_default());
            (rate > limit).then(|| format!("its {what} price ${rate} per 1M tokens is over ${limit}"))
        };
        over(self.input, rates.input, "input").or_else(|| over(self.output, rates.output, "output"))
    }
}

/// How one served answer is billed when its books close.
pub struct Bill {
    /// The serving candidate's price; `None`: unpriced.
    pub price: Option<Arc<Price>>,
    pub image_variant: Option<String>,
    /// The client request's running total.
    pub request: Arc<RequestCost>,
}

impl Bill {
    /// What `tally` cost at `at` (`None`: no price); its estimate follows the tally's.
    pub fn cost(&self, tally: &Tally, at: UnixMs) -> Option<Cost> {
        let price = self.price.as_ref()?;
        let counts = Counts {
            prompt: tally.prompt_tokens,
            cached: tally.cached_tokens.unwrap_or(0),
            cache_write: tally.cache_write_tokens.unwrap_or(0),
            output: tally.completion_tokens,
            images: tally.images,
        };
        let cost = price.cost(at, &counts, self.image_variant.as_deref());
        Some(Cost { estimated: cost.estimated || tally.estimated, ..cost })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{PerMillion, Rates};

    #[test]
    fn a_max_price_reads_both_limits_and_refuses_what_is_over_or_unpriced() {
        let headers = |v: &str| {
            let mut h = axum::http::HeaderMap::new();
            h.insert(MAX_PRICE_HEADER, v.parse().unwrap());
            h
        };
        let limit = MaxPrice::from_headers(&headers("input=3, output=15")).unwrap().unwrap();
        assert_eq!(limit.input.unwrap().to_string(), "3");
        for bad in ["input=abc", "cost=3", "3", "", "input=-1"] {
            assert!(MaxPrice::from_headers(&headers(bad)).is_err(), "{bad}");
        }
        assert_eq!(MaxPrice::from_headers(&axum::http::HeaderMap::new()).unwrap(), None);
        let pm = |t: &str| Some(PerMillion::parse(t).unwrap());
        let sonnet = Price::flat(Rates { input: pm("3"), output: pm("15"), ..Rates::default() });
        let opus = Price::flat(Rates { input: pm("15"), output: pm("75"), ..Rates::default() });
        assert_eq!(limit.refuses(Some(&sonnet), 10, UnixMs(0)), None, "at the limit is within it");
        assert!(limit.refuses(Some(&opus), 10, UnixMs(0)).unwrap().contains("input price $15"));
        assert!(limit.refuses(None, 10, UnixMs(0)).unwrap().contains("no price"));
    }

    #[test]
    fn the_worst_case_is_the_dearest_candidates() {
        let pm = |t: &str| Some(PerMillion::parse(t).unwrap());
        let cheap = Price::flat(Rates { input: pm("1"), output: pm("2"), ..Rates::default() });
        let dear = Price::flat(Rates { input: pm("3"), output: pm("15"), ..Rates::default() });
        let asked = Asked { completion: 1000, ..Asked::default() };
        let worst = asked.worst_case([&cheap, &dear].into_iter(), 1000, UnixMs(0));
        assert_eq!(worst.to_string(), "0.018");
        assert_eq!(asked.worst_case(std::iter::empty(), 1000, UnixMs(0)), Usd::ZERO);
    }
}
