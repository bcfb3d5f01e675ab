//! What the property tests share: their case counts, scaled for a search outside the suite.

/// `suite` cases, times `REDIAL_PROPTEST_SCALE` when it is set (a whole number): the suite runs
/// the counts written beside each property, and a search runs the same properties at 100x them
/// (`REDIAL_PROPTEST_SCALE=100 cargo test --release -p redial-policy --test NAME`) before a count
/// is lowered or a property lands.
pub fn cases(suite: u32) -> u32 {
    let scale = std::env::var("REDIAL_PROPTEST_SCALE")
        .ok()
        .map(|s| {
            s.trim()
                .parse::<u32>()
                .expect("REDIAL_PROPTEST_SCALE is a whole number of times the suite's cases")
        })
        .unwrap_or(1);
    suite.saturating_mul(scale.max(1))
}
