//! Shell-style wildcards as Lustre's names and rules use them: `*` matches any run of
//! bytes, `?` one byte, everything else itself (TBF jobid patterns, parameter names, PCC
//! file names); and the splitting of Lustre's rule expressions (`a={x y}&b={z},c={w}`).

/// Splits at `sep` where it is not inside `{...}`.
pub fn split_outside_braces(text: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            c if c == sep && depth == 0 => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Whether `pattern` matches all of `text`.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    // Where the last `*` was, and the text position it is tried from: on a mismatch the
    // star takes one byte more (linear backtracking, no recursion).
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == b'*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn wildcards() {
        assert!(matches(b"*", b""));
        assert!(matches(b"a*b*c", b"aXXbYc"));
        assert!(!matches(b"a*b*c", b"aXXbY"));
        assert!(matches(b"d?.0", b"dd.0"));
        assert!(!matches(b"dd", b"dd.0"));
        assert!(matches(b"*.500", b"cp.500"));
        assert!(!matches(b"io*.10*", b"ior.20"));
    }
}
