//! This node's part of limits that hold for a whole cluster.
//!
//! With several nodes on one store, every configured limit is the cluster's: each node keeps its
//! part, and the parts add up to the whole. Node `index` of `of` takes `total / of`, plus one of
//! the remainder when `index < total % of`, so the parts add up exactly and differ by at most
//! one. The engine gives each endpoint its own `index` (the node's rank, turned by a hash of the
//! endpoint's name that every node computes alike), so that the remainders of different
//! endpoints fall on different nodes.

use serde::{Deserialize, Serialize};

/// Node `index` of `of`; alone, `0` of `1` (the default: every limit whole).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub index: u32,
    pub of: u32,
}

impl Default for Share {
    fn default() -> Self {
        Share { index: 0, of: 1 }
    }
}

impl Share {
    /// Node `index` of `of` (at least one node; the index taken modulo `of`).
    pub fn new(index: u32, of: u32) -> Share {
        let of = of.max(1);
        Share {
            index: index % of,
            of,
        }
    }

    pub fn is_whole(self) -> bool {
        self.of <= 1
    }

    /// This node's part of `total`.
    pub fn part(self, total: u64) -> u64 {
        let of = u64::from(self.of.max(1));
        total / of + u64::from(u64::from(self.index) < total % of)
    }

    /// This node's part of `total`, for the 32-bit limits of the configuration.
    pub fn part32(self, total: u32) -> u32 {
        u32::try_from(self.part(u64::from(total))).unwrap_or(total)
    }

    /// This node's part of a limit given as a real number (a rate of retries).
    pub fn part_f64(self, total: f64) -> f64 {
        total / f64::from(self.of.max(1))
    }

    /// The share of node `rank` of `of` for the endpoint named `endpoint`: the rank turned by a
    /// hash of the name (FNV-1a, the same on every node and every build).
    pub fn for_endpoint(rank: u32, of: u32, endpoint: &str) -> Share {
        let of = of.max(1);
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in endpoint.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let turn = (h % u64::from(of)) as u32;
        Share::new((rank % of + turn) % of, of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_add_up_to_the_whole_and_differ_by_at_most_one() {
        for of in 1..=7u32 {
            for total in 0..=40u64 {
                let parts: Vec<u64> = (0..of).map(|i| Share::new(i, of).part(total)).collect();
                assert_eq!(parts.iter().sum::<u64>(), total, "{total} over {of}");
                let (lo, hi) = (
                    parts.iter().min().expect("parts"),
                    parts.iter().max().expect("parts"),
                );
                assert!(hi - lo <= 1, "{parts:?}");
            }
        }
    }

    #[test]
    fn every_endpoint_gives_each_rank_a_different_index() {
        for name in ["https://api.example.com", "a", "", "http://127.0.0.1:9"] {
            for of in 1..=5u32 {
                let mut seen: Vec<u32> = (0..of)
                    .map(|r| Share::for_endpoint(r, of, name).index)
                    .collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..of).collect::<Vec<_>>(), "{name} over {of}");
            }
        }
    }

    #[test]
    fn a_part_never_shrinks_as_the_total_grows() {
        for of in 1..=5u32 {
            for i in 0..of {
                let s = Share::new(i, of);
                for total in 0..30u64 {
                    assert!(s.part(total) <= s.part(total + 1));
                }
            }
        }
    }
}
