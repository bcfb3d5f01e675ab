//! Where randomness comes from: a trait the caller implements or seeds, never a hidden generator.
//!
//! Owns the [`Jitter`] trait and two sources: [`SplitMix64`], a small seeded generator for
//! production and simulation, and [`FixedJitter`], a constant for tests. Seeding from the
//! operating system is the caller's business, which keeps every decision reproducible.

/// A source of uniform numbers in `[0, 1)`.
pub trait Jitter {
    /// The next number, in `[0, 1)`.
    fn unit(&mut self) -> f64;
}

/// Reads `jitter` and forces the value into `[0, 1)`, so that a faulty source (NaN, negative,
/// one or more) can never push a delay past its cap or before a server's instant.
pub(crate) fn unit(jitter: &mut dyn Jitter) -> f64 {
    let u = jitter.unit();
    if u.is_nan() {
        0.0
    } else {
        u.clamp(0.0, 1.0 - f64::EPSILON)
    }
}

/// SplitMix64 (Steele, Lea and Flood): tiny, fast, and good enough to spread retries.
/// Not for cryptography.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl Jitter for SplitMix64 {
    fn unit(&mut self) -> f64 {
        // The top 53 bits fill an f64 mantissa exactly, so the result is uniform and below 1.
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Always the same number, clamped into `[0, 1)`: for tests that want an exact delay.
#[derive(Clone, Copy, Debug)]
pub struct FixedJitter(pub f64);

impl Jitter for FixedJitter {
    fn unit(&mut self) -> f64 {
        if self.0.is_nan() {
            0.0
        } else {
            self.0.clamp(0.0, 1.0 - f64::EPSILON)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_in_range_and_reproducible() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..10_000 {
            let x = a.unit();
            assert!((0.0..1.0).contains(&x));
            assert_eq!(x, b.unit());
        }
    }

    #[test]
    fn fixed_is_clamped() {
        assert_eq!(FixedJitter(-1.0).unit(), 0.0);
        assert!(FixedJitter(1.0).unit() < 1.0);
        assert_eq!(FixedJitter(f64::NAN).unit(), 0.0);
    }
}
