//! Sizes and times as people type them in commands and rules: `64K`, `4M`, `1G` (powers of
//! 1024, as lfs), `90`, `90s`, `10m`, `1h`, `2d`.

pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("'{text}' has an unknown suffix '{c}': use K, M, G or T")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: u64 =
        digits.parse().map_err(|_| format!("'{text}' is not a size: use a number with an optional K, M, G or T"))?;
    n.checked_mul(mult).ok_or_else(|| format!("'{text}' is too large"))
}

/// `10m` as seconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let bad = || format!("'{text}': a time such as 90, 90s, 10m, 1h or 2d");
    let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(scale).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times() {
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("1X").unwrap_err().contains("unknown suffix"));
        assert!(parse_size("").is_err());
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("10m"), Ok(600));
        assert_eq!(parse_duration("1h"), Ok(3600));
        assert_eq!(parse_duration("2d"), Ok(172_800));
        assert!(parse_duration("1w").unwrap_err().contains("10m, 1h"));
        assert!(parse_duration("").is_err());
    }
}
