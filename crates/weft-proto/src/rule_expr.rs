//! The condition language of Lustre's rules, shared by the NRS token bucket filter
//! (`nrs_tbf_rule`, in weft-rpc) and the MDS's I/O zone rules (`lod.*.zone_rule`): terms
//! `field={v1 v2 ...}` joined by `&` (and) in groups joined by `,` (or), fields `nid`,
//! `jobid`, `opcode`, `uid`, `gid`, wildcards in jobids and opcodes, ranges in NIDs
//! (`jobid={dd.* ior.1}&opcode={ost_write},nid={10.0.0.[1-9]@tcp}`). Pure parsing and
//! matching: a leaf module, so that both users share one parser.

use std::fmt;
use std::net::IpAddr;

/// What a request is classified by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    Nid,
    Jobid,
    Opcode,
    Uid,
    Gid,
}

impl Field {
    pub const ALL: [Field; 5] = [Field::Nid, Field::Jobid, Field::Opcode, Field::Uid, Field::Gid];

    pub fn name(self) -> &'static str {
        match self {
            Field::Nid => "nid",
            Field::Jobid => "jobid",
            Field::Opcode => "opcode",
            Field::Uid => "uid",
            Field::Gid => "gid",
        }
    }

    pub fn parse(text: &str) -> Result<Field, String> {
        Field::ALL.into_iter().find(|f| f.name() == text).ok_or_else(|| {
            format!("unknown rule field '{text}': the fields are {}", Field::ALL.map(Field::name).join(", "))
        })
    }
}

/// The policy's classification: which fields make a class (Lustre's `tbf jobid`,
/// `tbf uid+gid`; plain `tbf` uses them all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TbfType {
    fields: [bool; 5],
    generic: bool,
}

impl TbfType {
    /// Every field: what plain `tbf` classifies by.
    pub fn generic() -> TbfType {
        TbfType { fields: [true; 5], generic: true }
    }

    /// `jobid`, `uid+gid`, ... (what follows `tbf ` in `nrs_policies`); empty for generic.
    pub fn parse(text: &str) -> Result<TbfType, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(TbfType::generic());
        }
        let mut fields = [false; 5];
        for part in text.split('+') {
            let f = Field::parse(part.trim())?;
            fields[f as usize] = true;
        }
        Ok(TbfType { fields, generic: false })
    }

    pub fn has(&self, f: Field) -> bool {
        self.fields[f as usize]
    }

    pub fn fields(&self) -> impl Iterator<Item = Field> + '_ {
        Field::ALL.into_iter().filter(|f| self.has(*f))
    }
}

impl fmt::Display for TbfType {
    /// As `nrs_policies` names the policy: `tbf`, `tbf jobid`, `tbf uid+gid`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.generic {
            return f.write_str("tbf");
        }
        let names: Vec<&str> = self.fields().map(Field::name).collect();
        write!(f, "tbf {}", names.join("+"))
    }
}

/// What a class is made of: a request's values of every field.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Facts {
    /// The client's address (Lustre's NID), `IP@tcp`.
    pub nid: String,
    pub jobid: String,
    pub opcode: String,
    pub uid: u32,
    pub gid: u32,
}

impl Facts {
    /// The class key under `ty`: the fields it does not classify by are blanked.
    pub fn key(&self, ty: &TbfType) -> Facts {
        Facts {
            nid: if ty.has(Field::Nid) { self.nid.clone() } else { String::new() },
            jobid: if ty.has(Field::Jobid) { self.jobid.clone() } else { String::new() },
            opcode: if ty.has(Field::Opcode) { self.opcode.clone() } else { String::new() },
            uid: if ty.has(Field::Uid) { self.uid } else { 0 },
            gid: if ty.has(Field::Gid) { self.gid } else { 0 },
        }
    }

    /// The class as listings and metrics name it: the fields `ty` classifies by, `&`-joined
    /// (`jobid=dd.0&uid=0`).
    pub fn label(&self, ty: &TbfType) -> String {
        let parts: Vec<String> = ty
            .fields()
            .map(|field| match field {
                Field::Nid => format!("nid={}", self.nid),
                Field::Jobid => format!("jobid={}", self.jobid),
                Field::Opcode => format!("opcode={}", self.opcode),
                Field::Uid => format!("uid={}", self.uid),
                Field::Gid => format!("gid={}", self.gid),
            })
            .collect();
        parts.join("&")
    }

    /// A client address as a NID: `192.168.1.4@tcp`.
    pub fn nid_of(ip: IpAddr) -> String {
        format!("{ip}@tcp")
    }
}

/// One value of a term: a glob (jobid, opcode, nid) or a number (uid, gid).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Glob(String),
    Number(u32),
    /// A NID pattern: per IPv4 octet a value, a range `[a-b]` or `*`, then `@tcp`.
    Nid(Vec<Octet>),
    /// `*`: anything.
    Any,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Octet {
    Range(u8, u8),
    Any,
}

/// `field={v1 v2 ...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    field: Field,
    values: Vec<Value>,
    text: String,
}

/// A rule's condition: terms joined by `&` (and) in groups joined by `,` (or). `*` alone
/// matches every request (the default rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    any_of: Vec<Vec<Term>>,
}

impl Expr {
    pub fn everything() -> Expr {
        Expr { any_of: Vec::new() }
    }

    /// Parses an expression whose fields `ty` classifies by.
    pub fn parse(text: &str, ty: &TbfType) -> Result<Expr, String> {
        let text = text.trim();
        if text == "*" {
            return Ok(Expr::everything());
        }
        if !text.ends_with('}') {
            return Err(format!("rule expression '{text}' must end in '}}' (field={{value ...}})"));
        }
        let mut any_of = Vec::new();
        for group in crate::glob::split_outside_braces(text, ',') {
            let mut all_of = Vec::new();
            for term in crate::glob::split_outside_braces(group, '&') {
                all_of.push(Term::parse(term.trim(), ty)?);
            }
            any_of.push(all_of);
        }
        Ok(Expr { any_of })
    }

    pub fn matches(&self, facts: &Facts) -> bool {
        self.any_of.is_empty() || self.any_of.iter().any(|all| all.iter().all(|t| t.matches(facts)))
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.any_of.is_empty() {
            return f.write_str("*");
        }
        let groups: Vec<String> =
            self.any_of.iter().map(|all| all.iter().map(|t| t.text.as_str()).collect::<Vec<_>>().join("&")).collect();
        f.write_str(&groups.join(","))
    }
}

impl Term {
    fn parse(text: &str, ty: &TbfType) -> Result<Term, String> {
        let Some((field, rest)) = text.split_once('=') else {
            return Err(format!("rule term '{text}' is not field={{value ...}}"));
        };
        let field = Field::parse(field.trim())?;
        if !ty.has(field) {
            let allowed: Vec<&str> = ty.fields().map(Field::name).collect();
            return Err(format!(
                "'{}' rules need a policy that classifies by it: the policy is '{ty}', which takes {}",
                field.name(),
                allowed.join(", ")
            ));
        }
        let rest = rest.trim();
        let Some(inner) = rest.strip_prefix('{').and_then(|r| r.strip_suffix('}')) else {
            return Err(format!("rule term '{text}': the values go in braces, {}={{a b}}", field.name()));
        };
        let mut values = Vec::new();
        for v in inner.split_whitespace() {
            values.push(Value::parse(field, v)?);
        }
        if values.is_empty() {
            return Err(format!("rule term '{text}' lists no value"));
        }
        let shown: Vec<&str> = inner.split_whitespace().collect();
        Ok(Term { field, values, text: format!("{}={{{}}}", field.name(), shown.join(" ")) })
    }

    fn matches(&self, facts: &Facts) -> bool {
        self.values.iter().any(|v| v.matches(self.field, facts))
    }
}

impl Value {
    fn parse(field: Field, text: &str) -> Result<Value, String> {
        if text == "*" {
            return Ok(Value::Any);
        }
        match field {
            Field::Jobid | Field::Opcode => Ok(Value::Glob(text.to_string())),
            Field::Uid | Field::Gid => {
                text.parse().map(Value::Number).map_err(|_| format!("{} '{text}' is not a number (or *)", field.name()))
            }
            Field::Nid => parse_nid(text),
        }
    }

    fn matches(&self, field: Field, facts: &Facts) -> bool {
        match (self, field) {
            (Value::Any, _) => true,
            (Value::Glob(g), Field::Jobid) => crate::glob::matches(g.as_bytes(), facts.jobid.as_bytes()),
            (Value::Glob(g), Field::Opcode) => crate::glob::matches(g.as_bytes(), facts.opcode.as_bytes()),
            (Value::Number(n), Field::Uid) => *n == facts.uid,
            (Value::Number(n), Field::Gid) => *n == facts.gid,
            (Value::Nid(octets), Field::Nid) => nid_matches(octets, &facts.nid),
            _ => false,
        }
    }
}

/// `192.168.1.[2-128]@tcp`, `10.0.*.*@tcp`, `0@lo` (this host: in-process requests), or an
/// address without `@tcp`.
fn parse_nid(text: &str) -> Result<Value, String> {
    let bad = || format!("nid '{text}' is not an IPv4 pattern such as 192.168.1.[2-128]@tcp, 10.0.*.*@tcp or 0@lo");
    if text == "0@lo" {
        return Ok(Value::Nid(vec![Octet::Range(127, 127), Octet::Any, Octet::Any, Octet::Any]));
    }
    let addr = text.strip_suffix("@tcp").unwrap_or(text);
    let mut octets = Vec::new();
    for part in addr.split('.') {
        let octet = if part == "*" {
            Octet::Any
        } else if let Some(range) = part.strip_prefix('[').and_then(|p| p.strip_suffix(']')) {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            let (a, b): (u8, u8) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if a > b {
                return Err(bad());
            }
            Octet::Range(a, b)
        } else {
            let v: u8 = part.parse().map_err(|_| bad())?;
            Octet::Range(v, v)
        };
        octets.push(octet);
    }
    if octets.len() != 4 {
        return Err(bad());
    }
    Ok(Value::Nid(octets))
}

fn nid_matches(octets: &[Octet], nid: &str) -> bool {
    let addr = nid.strip_suffix("@tcp").unwrap_or(nid);
    let parts: Vec<&str> = addr.split('.').collect();
    parts.len() == 4
        && parts.iter().zip(octets).all(|(p, o)| match (p.parse::<u8>(), o) {
            (_, Octet::Any) => true,
            (Ok(v), Octet::Range(a, b)) => (*a..=*b).contains(&v),
            (Err(_), _) => false,
        })
}

impl Expr {
    /// The fields its terms name (none for `*`), each once, in the order of [`Field::ALL`].
    pub fn fields(&self) -> Vec<Field> {
        Field::ALL.into_iter().filter(|f| self.any_of.iter().flatten().any(|t| t.field == *f)).collect()
    }
}

/// The expression's words (the leading ones, where `field={a b}` may span several) and the
/// `key=value` options after them: a word outside braces whose value is not in braces.
pub fn split_options<'a>(words: &[&'a str]) -> (Vec<&'a str>, Vec<(&'a str, &'a str)>) {
    let mut depth = 0i32;
    let mut at = words.len();
    for (i, w) in words.iter().enumerate() {
        if depth == 0 && w.split_once('=').is_some_and(|(_, v)| !v.starts_with('{')) {
            at = i;
            break;
        }
        depth += w.matches('{').count() as i32 - w.matches('}').count() as i32;
    }
    let mut opts = Vec::new();
    let mut expr = words[..at].to_vec();
    for w in &words[at..] {
        match w.split_once('=') {
            Some((k, v)) => opts.push((k, v)),
            // Not an option: kept with the expression so that the error names it.
            None => expr.push(w),
        }
    }
    (expr, opts)
}

/// Checks a rule's name as Lustre's TBF does (`check_rule_name()`): 1 to `bytes_max`
/// characters of `[A-Za-z0-9_]`; `what` names the kind of rule in the error.
pub fn check_rule_name(what: &str, name: &str, bytes_max: usize) -> Result<(), String> {
    if name.is_empty() || name.len() > bytes_max || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("{what} name '{name}': 1 to {bytes_max} characters of A-Z, a-z, 0-9 and _"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(jobid: &str, opcode: &str, uid: u32, nid: &str) -> Facts {
        Facts { nid: nid.into(), jobid: jobid.into(), opcode: opcode.into(), uid, gid: uid }
    }

    #[test]
    fn types_parse_and_print_as_lustre_names_them() {
        assert_eq!(TbfType::parse("").unwrap().to_string(), "tbf");
        assert_eq!(TbfType::parse("jobid").unwrap().to_string(), "tbf jobid");
        assert_eq!(TbfType::parse("gid+uid").unwrap().to_string(), "tbf uid+gid");
        let e = TbfType::parse("projid").unwrap_err();
        assert!(e.contains("nid, jobid, opcode, uid, gid"), "{e}");
    }

    #[test]
    fn expressions_match_with_and_or_globs_and_ranges() {
        let ty = TbfType::generic();
        let e = Expr::parse("opcode={ost_write}&jobid={dd.0},nid={192.168.1.[1-128]@tcp 0@lo}", &ty).unwrap();
        assert!(e.matches(&facts("dd.0", "ost_write", 0, "10.0.0.1@tcp")));
        assert!(!e.matches(&facts("dd.0", "ost_read", 0, "10.0.0.1@tcp")), "and: both terms");
        assert!(e.matches(&facts("x", "ost_read", 0, "192.168.1.77@tcp")), "or: the nid group");
        assert!(!e.matches(&facts("x", "ost_read", 0, "192.168.1.200@tcp")), "outside the range");
        assert!(e.matches(&facts("x", "ost_read", 0, "127.0.0.1@tcp")), "0@lo is this host");
        assert_eq!(e.to_string(), "opcode={ost_write}&jobid={dd.0},nid={192.168.1.[1-128]@tcp 0@lo}");

        let j = Expr::parse("jobid={dd.* *.500 io*.10*}", &ty).unwrap();
        for yes in ["dd.0", "cp.500", "ior.107"] {
            assert!(j.matches(&facts(yes, "", 0, "")), "{yes}");
        }
        for no in ["cp.0", "ior.20", "d.0"] {
            assert!(!j.matches(&facts(no, "", 0, "")), "{no}");
        }
        let u = Expr::parse("uid={500 502}&gid={500}", &ty).unwrap();
        assert!(u.matches(&facts("", "", 500, "")));
        assert!(!u.matches(&facts("", "", 501, "")));
        assert!(Expr::parse("*", &ty).unwrap().matches(&Facts::default()));
    }

    #[test]
    fn bad_expressions_say_what_is_expected() {
        let ty = TbfType::parse("jobid").unwrap();
        let e = Expr::parse("uid={500}", &ty).unwrap_err();
        assert!(e.contains("'tbf jobid'") && e.contains("takes jobid"), "{e}");
        assert!(Expr::parse("jobid=dd.0", &ty).unwrap_err().contains("end in '}'"));
        assert!(Expr::parse("jobid={}", &ty).unwrap_err().contains("no value"));
        let g = TbfType::generic();
        assert!(Expr::parse("uid={abc}", &g).unwrap_err().contains("not a number"));
        assert!(Expr::parse("nid={1.2.3@tcp}", &g).unwrap_err().contains("IPv4 pattern"));
        assert!(Expr::parse("nid={1.2.3.[9-2]@tcp}", &g).is_err());
        assert!(Expr::parse("color={red}", &g).unwrap_err().contains("the fields are"));
    }

    #[test]
    fn class_keys_keep_only_the_type_fields() {
        let f = facts("dd.0", "ost_write", 5, "10.0.0.1@tcp");
        let k = f.key(&TbfType::parse("jobid").unwrap());
        assert_eq!(k, Facts { jobid: "dd.0".into(), ..Facts::default() });
        assert_eq!(f.key(&TbfType::generic()), f);
    }
}
