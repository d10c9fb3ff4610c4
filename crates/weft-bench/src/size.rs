//! Sizes as people type them: `1048576`, `64K`, `4M`, `1G` (powers of 1024, as lfs).

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

/// `1.5G`-style, as df -h prints.
pub fn human(bytes: u64) -> String {
    let units = ["B", "K", "M", "G", "T", "P"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes}")
    } else if v < 10.0 {
        format!("{v:.1}{}", units[u])
    } else {
        format!("{v:.0}{}", units[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("4m"), Ok(4 << 20));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("4X").unwrap_err().contains("suffix"));
        assert!(parse_size("").is_err());
        assert_eq!(human(1536), "1.5K");
        assert_eq!(human(100 << 20), "100M");
    }
}
