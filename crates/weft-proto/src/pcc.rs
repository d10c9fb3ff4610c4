//! A persistent client cache's settings as Lustre's `lctl pcc add MNT DIR -p PARAM` takes
//! them: the first token of PARAM is the auto-cache rule, the rest `key=value` pairs.
//!
//! The rule: terms `field=|<|>{values}` joined by `&` (and) in groups joined by `,` (or);
//! fields `uid`, `gid`, `projid`, `fname` (alias `filename`; `=` only, wildcards), `size`
//! (K, M, G, T suffixes) and `mtime` (an age: s, m, h, d); values inside the braces are
//! separated by spaces (`uid={500 1000}`), as Lustre's parser splits terms at commas first.
//! The keys: `rwid`, `roid`, `pccrw`/`rwpcc`, `pccro`/`ropcc`, `auto_attach`,
//! `open_attach`, `io_attach`, `stat_attach` (Lustre's), and Weft's `quota` (the most the
//! cache may hold, a size), `evict` (`lru` or `size`: what goes first when it is full) and
//! `prefetch` (1: files the rule matches are copied as they are created or written
//! anywhere, by following the MDT's changelog).
//! This module parses, matches and prints them; the mount keeps the caches.

use crate::glob::{self, split_outside_braces};
use crate::units::{parse_duration, parse_size};
use serde::{Deserialize, Serialize};

/// A rule's field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Field {
    Uid,
    Gid,
    Projid,
    Fname,
    Size,
    Mtime,
}

impl Field {
    fn parse(text: &str) -> Result<Field, String> {
        Ok(match text {
            "uid" => Field::Uid,
            "gid" => Field::Gid,
            "projid" => Field::Projid,
            "fname" | "filename" => Field::Fname,
            "size" => Field::Size,
            "mtime" => Field::Mtime,
            f => return Err(format!("PCC rule field '{f}': uid, gid, projid, fname, size or mtime")),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Field::Uid => "uid",
            Field::Gid => "gid",
            Field::Projid => "projid",
            Field::Fname => "fname",
            Field::Size => "size",
            Field::Mtime => "mtime",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    Eq,
    Less,
    Greater,
}

impl Op {
    fn symbol(self) -> char {
        match self {
            Op::Eq => '=',
            Op::Less => '<',
            Op::Greater => '>',
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Value {
    Number(u64),
    Glob(String),
}

/// `field op {values}`: true when any value compares true.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Term {
    pub field: Field,
    pub op: Op,
    pub values: Vec<Value>,
}

/// What a rule looks at of a file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileFacts {
    pub uid: u32,
    pub gid: u32,
    pub projid: u32,
    /// The file's name (the last component).
    pub name: Vec<u8>,
    pub size: u64,
    /// Seconds since it was last modified.
    pub age_s: u64,
}

impl Term {
    fn parse(text: &str) -> Result<Term, String> {
        let at = text
            .find(['=', '<', '>'])
            .ok_or_else(|| format!("PCC rule term '{text}' is not field=|<|>{{value ...}}"))?;
        let field = Field::parse(text[..at].trim())?;
        let op = match &text[at..at + 1] {
            "=" => Op::Eq,
            "<" => Op::Less,
            _ => Op::Greater,
        };
        if field == Field::Fname && op != Op::Eq {
            return Err(format!("PCC rule term '{text}': fname takes = only"));
        }
        let rest = text[at + 1..].trim();
        let inner = rest
            .strip_prefix('{')
            .and_then(|r| r.strip_suffix('}'))
            .ok_or_else(|| format!("PCC rule term '{text}': the values go in braces, {}={{a b}}", field.name()))?;
        let mut values = Vec::new();
        for v in inner.split_whitespace() {
            values.push(match field {
                Field::Fname => Value::Glob(v.to_string()),
                Field::Size => Value::Number(parse_size(v).map_err(|e| format!("PCC rule term '{text}': {e}"))?),
                Field::Mtime => Value::Number(parse_duration(v).map_err(|e| format!("PCC rule term '{text}': {e}"))?),
                _ => Value::Number(v.parse().map_err(|_| format!("PCC rule term '{text}': '{v}' is not a number"))?),
            });
        }
        if values.is_empty() {
            return Err(format!("PCC rule term '{text}' lists no value"));
        }
        Ok(Term { field, op, values })
    }

    fn matches(&self, f: &FileFacts) -> bool {
        let number = match self.field {
            Field::Uid => u64::from(f.uid),
            Field::Gid => u64::from(f.gid),
            Field::Projid => u64::from(f.projid),
            Field::Size => f.size,
            Field::Mtime => f.age_s,
            Field::Fname => {
                return self.values.iter().any(|v| matches!(v, Value::Glob(g) if glob::matches(g.as_bytes(), &f.name)))
            }
        };
        self.values.iter().any(|v| match (v, self.op) {
            (Value::Number(n), Op::Eq) => number == *n,
            (Value::Number(n), Op::Less) => number < *n,
            (Value::Number(n), Op::Greater) => number > *n,
            (Value::Glob(_), _) => false,
        })
    }

    fn text(&self) -> String {
        let values: Vec<String> = self
            .values
            .iter()
            .map(|v| match v {
                Value::Number(n) => n.to_string(),
                Value::Glob(g) => g.clone(),
            })
            .collect();
        format!("{}{}{{{}}}", self.field.name(), self.op.symbol(), values.join(" "))
    }
}

/// The auto-cache rule: groups of terms, any group whose terms all hold.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Rule {
    pub any_of: Vec<Vec<Term>>,
}

impl Rule {
    pub fn parse(text: &str) -> Result<Rule, String> {
        let mut any_of = Vec::new();
        for group in split_outside_braces(text.trim(), ',') {
            let mut all_of = Vec::new();
            for term in split_outside_braces(group, '&') {
                all_of.push(Term::parse(term.trim())?);
            }
            any_of.push(all_of);
        }
        Ok(Rule { any_of })
    }

    pub fn matches(&self, f: &FileFacts) -> bool {
        self.any_of.iter().any(|all| all.iter().all(|t| t.matches(f)))
    }

    /// Whether a term looks at the file's name (finding it may cost a request).
    pub fn uses_name(&self) -> bool {
        self.any_of.iter().flatten().any(|t| t.field == Field::Fname)
    }

    /// As Lustre lists it (`autocache:`): `projid={500}&fname={*.h5},uid={1001}`.
    pub fn text(&self) -> String {
        let groups: Vec<String> =
            self.any_of.iter().map(|all| all.iter().map(Term::text).collect::<Vec<_>>().join("&")).collect();
        groups.join(",")
    }
}

/// What goes first when a cache is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Evict {
    /// The least recently used.
    Lru,
    /// The largest.
    Size,
}

/// One cache of a mount (`lctl pcc add`'s PARAM, parsed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backend {
    pub rule: Rule,
    /// The HSM archive id read-write attaches go through (0: none).
    pub rwid: u32,
    /// The id read-only attaches name (0: none).
    pub roid: u32,
    pub rw: bool,
    pub ro: bool,
    pub open_attach: bool,
    pub io_attach: bool,
    pub stat_attach: bool,
    /// The most the cache may hold (0: its file system's free space).
    pub quota_bytes: u64,
    pub evict: Evict,
    /// Read-only copies of what the rule matches, made as the changelog tells of creates
    /// and writers' closes (Weft's).
    #[serde(default)]
    pub prefetch: bool,
}

/// Why an attach of the kind naming `id` (0: any) has nowhere to go.
pub fn no_cache_for(readwrite: bool, id: u32) -> String {
    let word = if readwrite { "read-write" } else { "read-only" };
    let which = if id == 0 { String::new() } else { format!(" with id {id}") };
    format!("no {word} cache{which} on this mount (weft pcc list MNT shows its caches)")
}

/// Lustre's flag bits for `pcc list` (`pcc.h`).
pub const FL_OPEN_ATTACH: u32 = 0x02;
pub const FL_IO_ATTACH: u32 = 0x04;
pub const FL_STAT_ATTACH: u32 = 0x08;
pub const FL_PCCRW: u32 = 0x10;
pub const FL_PCCRO: u32 = 0x20;

fn flag(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(format!("PCC {key}={value}: 0 or 1")),
    }
}

impl Backend {
    /// Parses `lctl pcc add`'s PARAM: the rule, then `key=value` pairs.
    pub fn parse(param: &str) -> Result<Backend, String> {
        let mut tokens = param.split_whitespace().peekable();
        // The rule may hold spaces inside its braces: its first token runs to the end of the
        // last brace group.
        let mut rule_text = String::new();
        while let Some(tok) = tokens.peek() {
            let open = rule_text.matches('{').count();
            let close = rule_text.matches('}').count();
            if !rule_text.is_empty() && open == close {
                break;
            }
            if !rule_text.is_empty() {
                rule_text.push(' ');
            }
            rule_text.push_str(tok);
            tokens.next();
        }
        if rule_text.is_empty() || !rule_text.contains('{') {
            return Err(format!(
                "PCC parameter '{param}': first a rule such as fname={{*.h5}}, then keys such as rwid=1"
            ));
        }
        let rule = Rule::parse(&rule_text)?;
        let mut b = Backend {
            rule,
            rwid: 0,
            roid: 0,
            rw: false,
            ro: false,
            open_attach: true,
            io_attach: true,
            stat_attach: true,
            quota_bytes: 0,
            evict: Evict::Lru,
            prefetch: false,
        };
        let (mut rw_given, mut ro_given) = (None, None);
        for tok in tokens {
            let (key, value) = tok.split_once('=').ok_or_else(|| format!("PCC parameter '{tok}' is not key=value"))?;
            match key {
                "rwid" | "roid" => {
                    let id: u32 = value
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| format!("PCC {key}={value}: a positive archive id"))?;
                    if key == "rwid" {
                        b.rwid = id;
                    } else {
                        b.roid = id;
                    }
                }
                "pccrw" | "rwpcc" => rw_given = Some(flag(key, value)?),
                "pccro" | "ropcc" => ro_given = Some(flag(key, value)?),
                "auto_attach" => {
                    let on = flag(key, value)?;
                    (b.open_attach, b.io_attach, b.stat_attach) = (on, on, on);
                }
                "open_attach" => b.open_attach = flag(key, value)?,
                "io_attach" => b.io_attach = flag(key, value)?,
                "stat_attach" => b.stat_attach = flag(key, value)?,
                "prefetch" => b.prefetch = flag(key, value)?,
                "quota" => b.quota_bytes = parse_size(value).map_err(|e| format!("PCC quota: {e}"))?,
                "evict" => {
                    b.evict = match value {
                        "lru" => Evict::Lru,
                        "size" => Evict::Size,
                        v => return Err(format!("PCC evict={v}: lru or size")),
                    }
                }
                k => {
                    return Err(format!(
                        "PCC parameter key '{k}': rwid, roid, pccrw, pccro, auto_attach, open_attach, io_attach, \
                         stat_attach, quota, evict or prefetch"
                    ))
                }
            }
        }
        if b.rwid == 0 && b.roid == 0 {
            return Err("a PCC cache needs rwid=N or roid=N (or both)".into());
        }
        // As Lustre: one id given serves for both; with neither mode named, read-only.
        if b.rwid == 0 {
            b.rwid = b.roid;
        }
        if b.roid == 0 {
            b.roid = b.rwid;
        }
        b.rw = rw_given.unwrap_or(false);
        b.ro = ro_given.unwrap_or(rw_given.is_none());
        if !b.rw && !b.ro {
            return Err("a PCC cache serves read-write (pccrw=1), read-only (pccro=1) or both".into());
        }
        if b.prefetch && !b.ro {
            return Err("PCC prefetch=1 makes read-only copies: the cache must serve pccro=1".into());
        }
        Ok(b)
    }

    /// Whether an attach of the kind (`readwrite` or read-only) naming `id` (0: any) goes
    /// to this cache.
    pub fn serves(&self, readwrite: bool, id: u32) -> bool {
        match readwrite {
            true => self.rw && (id == 0 || self.rwid == id),
            false => self.ro && (id == 0 || self.roid == id),
        }
    }

    /// The flags `pcc list` prints (Lustre's bits).
    pub fn flags(&self) -> u32 {
        [
            (self.open_attach, FL_OPEN_ATTACH),
            (self.io_attach, FL_IO_ATTACH),
            (self.stat_attach, FL_STAT_ATTACH),
            (self.rw, FL_PCCRW),
            (self.ro, FL_PCCRO),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |f, (_, bit)| f | bit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(uid: u32, projid: u32, name: &str, size: u64, age_s: u64) -> FileFacts {
        FileFacts { uid, gid: uid, projid, name: name.as_bytes().to_vec(), size, age_s }
    }

    #[test]
    fn rules_parse_match_and_print_as_lustre_writes_them() {
        let r = Rule::parse("projid={500 1000}&fname={*.h5},uid={1001}").unwrap();
        assert!(r.matches(&file(0, 1000, "a.h5", 0, 0)));
        assert!(!r.matches(&file(0, 1000, "a.txt", 0, 0)));
        assert!(r.matches(&file(1001, 0, "a.txt", 0, 0)));
        assert_eq!(r.text(), "projid={500 1000}&fname={*.h5},uid={1001}");
        assert!(r.uses_name());
        assert!(!Rule::parse("uid={1}").unwrap().uses_name());
        let r = Rule::parse("size>{1M}&size<{500G}&mtime>{1h}").unwrap();
        assert!(r.matches(&file(0, 0, "x", 2 << 20, 7200)));
        assert!(!r.matches(&file(0, 0, "x", 2 << 20, 60)), "too new");
        assert!(!r.matches(&file(0, 0, "x", 1 << 20, 7200)), "not over 1M");
        assert!(Rule::parse("fname>{a}").unwrap_err().contains("= only"));
        assert!(Rule::parse("color={red}").unwrap_err().contains("uid, gid, projid"));
        assert!(Rule::parse("uid=1000").unwrap_err().contains("braces"));
        assert!(Rule::parse("uid={x}").unwrap_err().contains("not a number"));
    }

    #[test]
    fn params_take_lustre_keys_and_defaults() {
        let b = Backend::parse("projid={500}&fname={*.h5} rwid=2").unwrap();
        // Only an id given: read-only, the id for both modes, every attach on.
        assert_eq!((b.rwid, b.roid, b.rw, b.ro), (2, 2, false, true));
        assert_eq!(b.flags(), FL_OPEN_ATTACH | FL_IO_ATTACH | FL_STAT_ATTACH | FL_PCCRO);
        let b = Backend::parse("projid={100} rwid=1 open_attach=0 stat_attach=0 pccrw=1").unwrap();
        assert_eq!((b.rw, b.ro, b.open_attach, b.stat_attach, b.io_attach), (true, false, false, false, true));
        let b = Backend::parse("uid={500 1000} roid=5 pccro=1 quota=10G evict=size").unwrap();
        assert_eq!(b.rule.text(), "uid={500 1000}");
        assert_eq!((b.quota_bytes, b.evict), (10 << 30, Evict::Size));
        assert!(Backend::parse("fname={*.h5}").unwrap_err().contains("rwid=N or roid=N"));
        assert!(Backend::parse("rwid=1").unwrap_err().contains("first a rule"));
        assert!(Backend::parse("uid={1} rwid=1 pccrw=0 pccro=0").unwrap_err().contains("serves"));
        assert!(Backend::parse("uid={1} rwid=1 colour=red").unwrap_err().contains("'colour'"));
        assert!(Backend::parse("uid={1} rwid=0").unwrap_err().contains("positive"));
        assert!(Backend::parse("fname={*.h5} roid=1 prefetch=1").unwrap().prefetch);
        assert!(Backend::parse("fname={*.h5} rwid=1 pccrw=1 prefetch=1").unwrap_err().contains("pccro=1"));
    }
}
