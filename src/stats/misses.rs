//! How many misses a claimed miss rate allows. A check that matches n known events (holds
//! of a thread, delays it made) and claims "at most `rate` of them are missed" must not
//! fail a tool that keeps its claim: with a fixed share as the bound, one that misses at
//! exactly the rate fails half its runs, and one stray miss in 41 breaks a 1 % bound. The
//! bound here is the binomial one: the most misses that `rate` makes likely, failing a
//! tool that keeps its claim in at most `1 − confidence` of its runs.
//!
//! Written here rather than taken from a statistics crate: one tail sum of the binomial
//! distribution is all that is needed, a dozen lines.

/// The confidence the checks state: a tool that keeps its claimed rate fails one run in
/// a thousand.
pub const CONFIDENCE: f64 = 0.999;

/// The largest number of misses among `n` that is consistent with a miss rate of `rate`
/// at `confidence`: the least k with P(X > k) ≤ 1 − `confidence` for X ~ Binomial(n,
/// rate).
pub fn allowed(n: usize, rate: f64, confidence: f64) -> usize {
    if n == 0 || rate <= 0.0 {
        return 0;
    }
    if rate >= 1.0 {
        return n;
    }
    let log_odds = (rate / (1.0 - rate)).ln();
    // Each term P(X = k) in logs: (1 − rate)^n underflows for large n, and the terms far
    // below the mean add nothing.
    let mut log_term = n as f64 * (1.0 - rate).ln();
    let mut below = log_term.exp();
    let mut k = 0;
    while 1.0 - below > 1.0 - confidence && k < n {
        log_term += ((n - k) as f64 / (k + 1) as f64).ln() + log_odds;
        below += log_term.exp();
        k += 1;
    }
    k
}

/// "3 of 41 missed; a 1 % miss rate allows up to 3 at 99.9 % confidence": the sample
/// count and the bound, for a check's figures.
pub fn words(missed: usize, n: usize, rate: f64, bound: usize) -> String {
    format!(
        "{missed} of {n} missed; a {} % miss rate allows up to {bound} at {} % confidence",
        rate * 100.0,
        CONFIDENCE * 100.0
    )
}

/// Whether `missed` of `n` is within what a miss rate of `rate` allows at
/// [`CONFIDENCE`], and the words saying so (`words`).
pub fn judge(missed: usize, n: usize, rate: f64) -> (bool, String) {
    let bound = allowed(n, rate, CONFIDENCE);
    (missed <= bound, words(missed, n, rate, bound))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand for n = 41, rate 1 %: P(X ≥ 3) = 0.0080, P(X ≥ 4) = 0.00072.
    #[test]
    fn the_bound_is_the_binomial_tail() {
        assert_eq!(allowed(41, 0.01, 0.999), 3);
        assert_eq!(allowed(41, 0.01, 0.99), 2);
        assert_eq!((allowed(0, 0.01, 0.999), allowed(50, 0.0, 0.999)), (0, 0));
        assert_eq!(allowed(50, 1.0, 0.999), 50);
        // More samples, more misses allowed, but a smaller share of them.
        let (small, large) = (allowed(200, 0.01, 0.999), allowed(20_000, 0.01, 0.999));
        assert!(
            small < large && large * 200 < small * 20_000,
            "{small} {large}"
        );
        // Large n does not underflow: about the mean plus 3.1 sigma.
        let big = allowed(1_000_000, 0.01, 0.999) as f64;
        assert!((big - 10_000.0 - 3.09 * 99.5).abs() < 20.0, "{big}");
    }
}
