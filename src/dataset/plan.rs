//! Planning a generation run: train/valid/test splits by module hash, shards across
//! machines, per-item seeds that do not depend on thread count, and measurement noise.

use serde::{Deserialize, Serialize};

use super::kernel_module::fnv1a;
use crate::rng::SplitMix64;

/// A TpuGraphs split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Split {
    Train,
    Valid,
    Test,
}

impl Split {
    pub fn dir(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Valid => "valid",
            Split::Test => "test",
        }
    }
}

/// Split ratios, e.g. `80/10/10`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SplitRatios {
    pub train: u32,
    pub valid: u32,
    pub test: u32,
}

impl Default for SplitRatios {
    fn default() -> Self {
        SplitRatios {
            train: 80,
            valid: 10,
            test: 10,
        }
    }
}

/// A `--split` or `--shard` value that is not one (the message names the option).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OptionValueError(pub String);

impl std::str::FromStr for SplitRatios {
    type Err = OptionValueError;
    fn from_str(s: &str) -> Result<Self, OptionValueError> {
        let parts: Vec<&str> = s.split('/').collect();
        let bad = || {
            OptionValueError(format!(
                "--split '{s}': expected three whole numbers like 80/10/10"
            ))
        };
        if parts.len() != 3 {
            return Err(bad());
        }
        let v: Vec<u32> = parts
            .iter()
            .map(|p| p.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        if v.iter().sum::<u32>() == 0 {
            return Err(OptionValueError(format!(
                "--split '{s}': the parts must not all be 0"
            )));
        }
        Ok(SplitRatios {
            train: v[0],
            valid: v[1],
            test: v[2],
        })
    }
}

impl SplitRatios {
    /// The split of a module, by a hash of its name: the same module always lands in
    /// the same split, so train, valid and test never share a module.
    pub fn assign(&self, module_name: &str) -> Split {
        let total = (self.train + self.valid + self.test) as u64;
        let x = fnv1a(module_name.as_bytes()) % total;
        if x < self.train as u64 {
            Split::Train
        } else if x < (self.train + self.valid) as u64 {
            Split::Valid
        } else {
            Split::Test
        }
    }
}

/// `--shard i/n`: this machine takes items whose index is `i` modulo `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Default for Shard {
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl std::str::FromStr for Shard {
    type Err = OptionValueError;
    fn from_str(s: &str) -> Result<Self, OptionValueError> {
        let (a, b) = s
            .split_once('/')
            .ok_or_else(|| OptionValueError(format!("--shard '{s}': expected i/n, e.g. 0/4")))?;
        let index: usize = a
            .trim()
            .parse()
            .map_err(|_| OptionValueError(format!("--shard '{s}': i is not a whole number")))?;
        let count: usize = b
            .trim()
            .parse()
            .map_err(|_| OptionValueError(format!("--shard '{s}': n is not a whole number")))?;
        if count == 0 || index >= count {
            return Err(OptionValueError(format!("--shard '{s}': need 0 <= i < n")));
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    pub fn takes(&self, item_index: usize) -> bool {
        item_index % self.count == self.index
    }
}

/// Seed for one item (a module, a kernel) from the run seed and the item's identity,
/// so results do not depend on thread count or processing order.
pub fn item_seed(run_seed: u64, item: &str) -> u64 {
    let mut r = SplitMix64::new(run_seed ^ fnv1a(item.as_bytes()));
    r.next_u64()
}

/// Longest runtime a sample may record: 2^53 ns (104 days), the largest integer every
/// reader holding runtimes as floats keeps exactly. A longer modelled runtime is an error,
/// never a saturated or rounded number.
pub const MAX_RUNTIME_NS: f64 = 9_007_199_254_740_992.0;

/// A modelled runtime that no sample can record: not finite, or past [`MAX_RUNTIME_NS`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("modelled runtime {ns:e} ns is past the 2^53 ns (104 days) a sample may record")]
pub struct RuntimeOutOfRange {
    pub ns: f64,
}

/// Multiplicative measurement noise: runtime × exp(σ·z), z ~ N(0,1), seeded.
#[derive(Debug, Clone, Copy)]
pub struct Noise {
    pub sigma: f64,
}

impl Noise {
    /// Apply noise to `ns` for the `k`-th measurement of an item with seed `seed`;
    /// σ = 0 returns `ns` unchanged. Result is at least 1 ns; an error past
    /// [`MAX_RUNTIME_NS`] (or not finite).
    pub fn apply(&self, ns: f64, seed: u64, k: u64) -> Result<i64, RuntimeOutOfRange> {
        let v = if self.sigma > 0.0 {
            let mut r = SplitMix64::new(seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            // Box-Muller from two uniforms in (0, 1].
            let u1 = ((r.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
            let u2 = ((r.next_u64() >> 11) as f64) / (1u64 << 53) as f64;
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            ns * (self.sigma * z).exp()
        } else {
            ns
        };
        // (checked before `max`, which would turn NaN into 1)
        if v.is_finite() && v.round() <= MAX_RUNTIME_NS {
            Ok(v.round().max(1.0) as i64)
        } else {
            Err(RuntimeOutOfRange { ns: v })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_are_stable_and_proportional() {
        let r: SplitRatios = "80/10/10".parse().unwrap();
        let mut counts = [0usize; 3];
        for i in 0..10_000 {
            let s = r.assign(&format!("module_{i}"));
            assert_eq!(s, r.assign(&format!("module_{i}")));
            counts[s as usize] += 1;
        }
        assert!((7600..8400).contains(&counts[0]), "{counts:?}");
        assert!((800..1200).contains(&counts[1]), "{counts:?}");
        assert!("80/20".parse::<SplitRatios>().is_err());
        assert!("0/0/0".parse::<SplitRatios>().is_err());
    }

    #[test]
    fn shards_partition_items() {
        let s: Shard = "1/3".parse().unwrap();
        assert!(s.takes(1) && s.takes(4) && !s.takes(2));
        assert!("3/3".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
    }

    #[test]
    fn noise_is_seeded_and_centred() {
        let n = Noise { sigma: 0.05 };
        assert_eq!(n.apply(1000.0, 7, 3), n.apply(1000.0, 7, 3));
        let mean: f64 = (0..20_000)
            .map(|k| n.apply(1e6, 42, k).unwrap() as f64)
            .sum::<f64>()
            / 20_000.0;
        assert!((mean / 1e6 - 1.0).abs() < 0.01, "{mean}");
        assert_eq!(Noise { sigma: 0.0 }.apply(1234.4, 1, 1), Ok(1234));
    }

    #[test]
    fn runtimes_past_the_limit_are_errors_not_saturated() {
        let n = Noise { sigma: 0.0 };
        assert_eq!(n.apply(MAX_RUNTIME_NS, 1, 1), Ok(1 << 53));
        for ns in [1e19, 1e300, f64::INFINITY, f64::NAN] {
            assert!(n.apply(ns, 1, 1).is_err(), "{ns}");
        }
    }
}
