//! What an answer costs, for its books: the price of the candidate that served, what the
//! request asked for (images, their variant), and the accounts (budgets) it is charged to.

use std::sync::Arc;

use super::call::{Call, RequestCost};
use crate::config::ModelKind;
use crate::domain::{Account, Cost, Counts, Period, Price, UnixMs, Usd};
use crate::provider::Tally;

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
    pub fn of(call: &Call<'_>) -> Asked {
        let text = call.body.text();
        let completion = super::admission::completion_reserve(text);
        if call.kind != ModelKind::Image {
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
        // Bounded: it is matched against the table's variant names, never stored.
        let variant = ask.and_then(|a| Some(format!("{}_{}", a.quality?, a.size?))).filter(|v| v.len() <= 64);
        Asked { completion: 0, images, image_variant: variant }
    }

    /// The most the call can cost on the dearest of `prices` (nothing for unpriced ones: what
    /// has no price cannot be set aside, and is logged `cost_unknown`).
    pub fn worst_case<'p>(&self, prices: impl Iterator<Item = &'p Price>, prompt: u64, at: UnixMs) -> Usd {
        prices.map(|p| p.worst_case(at, prompt, self.completion, self.images)).max().unwrap_or_default()
    }
}

/// How one served answer is billed when its books close.
pub struct Bill {
    /// The serving candidate's price; `None`: unpriced.
    pub price: Option<Arc<Price>>,
    pub image_variant: Option<String>,
    /// The key's and its group's budgets, charged what it cost.
    pub accounts: Vec<(Account, Period)>,
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
