//! Times written with their unit, read the same way by every flag and gate (issue 22:
//! `-D` took `1h` while `--fail-above max=1h` refused it).

/// A number with a unit as ns, rounded: `ns`, `us` or `µs`, `ms`, `s`, `m` or `min`, `h`.
/// A bare number is in units of `bare` ns, or refused when `bare` is `None` (a gate's
/// limit, where a bare number would mean different units in different tools). `None`
/// when `s` is not such a time; negative numbers are not.
pub fn time_ns(s: &str, bare: Option<f64>) -> Option<f64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor = match unit.trim() {
        "" => bare?,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return None,
    };
    let n: f64 = num.parse().ok().filter(|n: &f64| n.is_finite())?;
    Some((n * factor).round())
}

#[cfg(test)]
mod tests {
    use super::time_ns;

    #[test]
    fn issue22_one_time_parser_takes_every_unit() {
        assert_eq!(time_ns("1h", None), Some(3.6e12));
        assert_eq!(time_ns("2m", None), Some(120e9));
        assert_eq!(time_ns("1.5ms", None), Some(1.5e6));
        assert_eq!(time_ns(" 50 µs ", None), Some(50e3));
        assert_eq!(time_ns("800", Some(1e3)), Some(800e3));
        assert_eq!(time_ns("800", None), None);
        assert_eq!(time_ns("-1s", None), None);
        assert_eq!(time_ns("1d", None), None);
        assert_eq!(time_ns("", Some(1.0)), None);
    }
}
