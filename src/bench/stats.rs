//! Summary statistics shared by the benchmarks.

use std::time::Duration;

/// Median, p90, min and max of a sample, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub p90: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    pub fn of_durations(samples: &[Duration]) -> Summary {
        let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        Summary::of(&ms)
    }

    /// Nearest-rank percentiles; an empty sample gives zeros.
    pub fn of(values: &[f64]) -> Summary {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        if v.is_empty() {
            return Summary {
                n: 0,
                median: 0.0,
                p90: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        let median = if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        };
        Summary {
            n: v.len(),
            median,
            p90: rank(0.9),
            min: v[0],
            max: v[v.len() - 1],
        }
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "n={} median={:.2} p90={:.2} min={:.2} max={:.2}",
            self.n, self.median, self.p90, self.min, self.max
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Summary;

    #[test]
    fn median_and_percentiles() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!((s.median, s.min, s.max, s.p90), (3.0, 1.0, 5.0, 5.0));
        assert_eq!(Summary::of(&[1.0, 2.0]).median, 1.5);
        assert_eq!(Summary::of(&[]).n, 0);
    }
}
