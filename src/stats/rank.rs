//! Rank statistics shared by `compare` (is run B's latency another than run A's?),
//! `tune` (did a step help?), the grouping of CPUs and c2c's classes: pure functions on
//! samples.

/// The median absolute deviation times this estimates the standard deviation of a normal
/// distribution.
pub const MAD_TO_SIGMA: f64 = 1.4826;

/// The median of `values` (the mean of the middle two for an even count); `None` for none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Two-sided p of the Mann–Whitney U test, normal approximation with the tie correction
/// and a continuity correction. Hand-written: it is twenty lines, and the statistics
/// crates that have it (statrs and kin) bring far more than this needs.
pub fn mann_whitney_p(a: &[u64], b: &[u64]) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    let mut all: Vec<(u64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    all.sort_unstable_by_key(|x| x.0);
    let n = all.len() as f64;
    let (mut rank_a, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < all.len() {
        let j = i + all[i..].iter().take_while(|x| x.0 == all[i].0).count();
        let t = (j - i) as f64;
        let mid = (i + j + 1) as f64 / 2.0; // the average of ranks i+1 ..= j
        rank_a += mid * all[i..j].iter().filter(|x| x.1).count() as f64;
        ties += t * t * t - t;
        i = j;
    }
    let u = rank_a - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let var = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return 1.0; // every value equal
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    erfc(z / std::f64::consts::SQRT_2)
}

/// erfc for x ≥ 0 (Numerical Recipes' erfcc, relative error below 1.2e-7).
fn erfc(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.5 * x);
    let poly = -x * x - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    (t * poly.exp()).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::erfc;

    #[test]
    fn erfc_is_accurate() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-6);
        assert!((erfc(1.0) - 0.157_299_2).abs() < 1e-6);
        assert!((erfc(2.0) - 0.004_677_735).abs() < 1e-7);
    }
}
