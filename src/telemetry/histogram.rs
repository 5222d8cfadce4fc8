//! A Prometheus histogram updated with atomics only: an observation never takes a lock, so
//! requests sharing a series never wait on each other (the text encoder reads it at scrape).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

#[derive(Clone, Debug)]
pub struct Histogram {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Upper bounds, ascending; a last bucket (+Inf) takes the rest.
    bounds: Box<[f64]>,
    /// Observations per bucket (not cumulative), one more than `bounds`.
    counts: Box<[AtomicU64]>,
    count: AtomicU64,
    /// The sum's `f64` bits.
    sum: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: impl IntoIterator<Item = f64>) -> Histogram {
        let bounds: Box<[f64]> = bounds.into_iter().collect();
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        Histogram { inner: Arc::new(Inner { bounds, counts, count: AtomicU64::new(0), sum: AtomicU64::new(0) }) }
    }

    /// Counts `value` (a NaN, which no bucket holds, is left out).
    pub fn observe(&self, value: f64) {
        if value.is_nan() {
            return;
        }
        let inner = &self.inner;
        // The first bucket whose bound is at least the value.
        let bucket = inner.bounds.partition_point(|b| *b < value);
        inner.counts[bucket].fetch_add(1, Relaxed);
        inner.count.fetch_add(1, Relaxed);
        let _ = inner.sum.fetch_update(Relaxed, Relaxed, |bits| Some((f64::from_bits(bits) + value).to_bits()));
    }
}

impl TypedMetric for Histogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let inner = &self.inner;
        let buckets: Vec<(f64, u64)> =
            inner.bounds.iter().copied().chain([f64::MAX]).zip(inner.counts.iter().map(|c| c.load(Relaxed))).collect();
        // The count is the buckets' total, so a scrape during observations stays consistent.
        let count = buckets.iter().map(|(_, n)| n).sum();
        encoder.encode_histogram::<NoLabelSet>(f64::from_bits(inner.sum.load(Relaxed)), count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_at_or_above_them() {
        let h = Histogram::new([1.0, 2.0, 4.0]);
        for v in [0.5, 1.0, 1.5, 4.0, 9.0, f64::NAN] {
            h.observe(v);
        }
        let counts: Vec<u64> = h.inner.counts.iter().map(|c| c.load(Relaxed)).collect();
        assert_eq!(counts, [2, 1, 1, 1], "NaN is left out");
        assert_eq!(h.inner.count.load(Relaxed), 5);
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        let plain = Histogram::new([1.0, 2.0]);
        plain.observe(0.5);
        plain.observe(3.0);
        registry.register("t", "test", plain);
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("t_sum 3.5"), "{text}");
        assert!(text.contains("t_count 2"), "{text}");
        assert!(text.contains("t_bucket{le=\"1.0\"} 1"), "{text}");
        assert!(text.contains("t_bucket{le=\"+Inf\"} 2"), "{text}");
    }

    #[test]
    fn concurrent_observations_are_all_counted() {
        let h = Histogram::new([0.5]);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| (0..10_000).for_each(|_| h.observe(1.0)));
            }
        });
        assert_eq!(h.inner.count.load(Relaxed), 40_000);
        assert_eq!(f64::from_bits(h.inner.sum.load(Relaxed)), 40_000.0);
    }
}
