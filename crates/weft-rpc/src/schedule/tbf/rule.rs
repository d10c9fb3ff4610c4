//! The token bucket filter's commands, as Lustre writes them: the policy's type (`tbf`,
//! `tbf jobid`, `tbf uid+gid`) and rule commands (`start NAME EXPR rate=N`, `change NAME
//! rate=N`, `change NAME rank=OTHER`, `stop NAME`). Their expressions
//! (`jobid={dd.* ior.1}&opcode={ost_write},nid={10.0.0.[1-9]@tcp}`) are weft-proto's
//! [`weft_proto::rule_expr`], shared with the MDS's zone rules. Pure parsing; the scheduler
//! is in [`super::core`].

use crate::limits::{TBF_RATE_DEFAULT, TBF_RATE_MAX, TBF_RULE_NAME_BYTES_MAX};
use weft_proto::rule_expr::split_options;
pub use weft_proto::rule_expr::{Expr, Facts, Field, TbfType};

/// A rule's limits: requests per second, and bytes per second (Weft's addition; Lustre
/// counts requests only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub rate: u64,
    pub bps: Option<u64>,
    /// Hard token compensation: a class that fell behind while the server was saturated
    /// catches up (Lustre's `realtime=1`).
    pub realtime: bool,
    /// The rates are for the whole file system, divided among the servers by demand
    /// through the management service (`global=1`; see weft-mgs's qos.rs).
    pub global: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { rate: TBF_RATE_DEFAULT, bps: None, realtime: false, global: false }
    }
}

/// A rule command, as written to `...nrs_tbf_rule`.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `depends`: the rule whose measured use this one's rate is reduced by (a dependent
    /// rule: `rate` is then what the two share, and this one gets what the other leaves).
    Start {
        name: String,
        expr: Expr,
        limits: Limits,
        rank: Option<String>,
        depends: Option<String>,
    },
    Change {
        name: String,
        rate: Option<u64>,
        bps: Option<Option<u64>>,
        rank: Option<String>,
    },
    Stop {
        name: String,
    },
}

pub const USAGE: &str =
    "[reg] start NAME EXPR [rate=N] [bps=SIZE] [rank=OTHER] [realtime=1] [depends=OTHER] [global=1] | \
[reg] change NAME [rate=N] [bps=SIZE|0] [rank=OTHER] | [reg] stop NAME";

impl Command {
    pub fn parse(text: &str, ty: &TbfType) -> Result<Command, String> {
        let mut words = text.split_whitespace().peekable();
        match words.peek() {
            Some(&"reg") => {
                words.next();
            }
            Some(&"hp") => {
                return Err("Weft's services have one request queue: 'hp' rules have nothing to apply to; \
                            leave out the queue or write 'reg'"
                    .into())
            }
            _ => {}
        }
        let verb = words.next().ok_or_else(|| format!("empty TBF rule command; write {USAGE}"))?;
        let name = words.next().ok_or_else(|| format!("'{verb}' needs a rule name; write {USAGE}"))?;
        check_name(name)?;
        let name = name.to_string();
        // The rest: for start, the expression (which may hold spaces inside braces) then
        // key=value options; for change, options only.
        let rest: Vec<&str> = words.collect();
        let (expr_words, opts) = split_options(&rest);
        match verb {
            "start" => {
                if expr_words.is_empty() {
                    return Err(format!("'start {name}' needs an expression such as jobid={{dd.0}}; write {USAGE}"));
                }
                let expr = Expr::parse(&expr_words.join(" "), ty)?;
                let mut limits = Limits::default();
                let (mut rank, mut depends) = (None, None);
                for (k, v) in opts {
                    match k {
                        "rate" => limits.rate = parse_rate(v)?,
                        "bps" => limits.bps = parse_bps(v)?,
                        "rank" => rank = Some(v.to_string()),
                        "realtime" => limits.realtime = parse_flag(k, v)?,
                        "depends" => depends = Some(v.to_string()),
                        "global" => limits.global = parse_flag(k, v)?,
                        _ => return Err(unknown_option(k, "rate, bps, rank, realtime, depends, global")),
                    }
                }
                Ok(Command::Start { name, expr, limits, rank, depends })
            }
            "change" => {
                if !expr_words.is_empty() {
                    return Err(format!(
                        "'change {name}' takes rate=, bps= or rank=, not an expression ('{}'): stop the rule and start it again",
                        expr_words.join(" ")
                    ));
                }
                let (mut rate, mut bps, mut rank) = (None, None, None);
                for (k, v) in opts {
                    match k {
                        "rate" => rate = Some(parse_rate(v)?),
                        "bps" => bps = Some(parse_bps(v)?),
                        "rank" => rank = Some(v.to_string()),
                        _ => return Err(unknown_option(k, "rate, bps, rank")),
                    }
                }
                if rate.is_none() && bps.is_none() && rank.is_none() {
                    return Err(format!("'change {name}' needs rate=N, bps=SIZE or rank=OTHER"));
                }
                Ok(Command::Change { name, rate, bps, rank })
            }
            "stop" => {
                if !rest.is_empty() {
                    return Err(format!("'stop {name}' takes nothing more (got '{}')", rest.join(" ")));
                }
                Ok(Command::Stop { name })
            }
            other => {
                Err(format!("unknown TBF rule command '{other}': the commands are start, change, stop; write {USAGE}"))
            }
        }
    }
}

fn check_name(name: &str) -> Result<(), String> {
    weft_proto::rule_expr::check_rule_name("TBF rule", name, TBF_RULE_NAME_BYTES_MAX)
}

fn parse_rate(v: &str) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(r) if r > 0 && r < TBF_RATE_MAX => Ok(r),
        _ => Err(format!("rate '{v}': a number of requests per second, 0 < rate < {TBF_RATE_MAX}")),
    }
}

/// `bps=100M` (bytes per second, K/M/G/T suffixes in powers of 1024); `bps=0` removes it.
fn parse_bps(v: &str) -> Result<Option<u64>, String> {
    let bad = || format!("bps '{v}': bytes per second such as 500M or 2G (0 for none)");
    let (num, mult) = match v.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let mult: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(bad()),
            };
            (&v[..i], mult)
        }
        _ => (v, 1),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    let bytes = n.checked_mul(mult).ok_or_else(bad)?;
    Ok((bytes > 0).then_some(bytes))
}

fn parse_flag(k: &str, v: &str) -> Result<bool, String> {
    match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(format!("{k}='{v}': 0 or 1")),
    }
}

fn unknown_option(k: &str, allowed: &str) -> String {
    format!("unknown TBF rule option '{k}': the options are {allowed}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_as_lustre_writes_them() {
        let ty = TbfType::generic();
        let c = Command::parse("start comp_rule opcode={ost_write}&jobid={dd.0} rate=100 rank=computes", &ty).unwrap();
        let Command::Start { name, expr, limits, rank, .. } = c else { panic!("{c:?}") };
        assert_eq!((name.as_str(), limits.rate, rank.as_deref()), ("comp_rule", 100, Some("computes")));
        assert_eq!(expr.to_string(), "opcode={ost_write}&jobid={dd.0}");
        let c = Command::parse("reg start fast jobid={dd.0 ior.1} bps=500M realtime=1", &ty).unwrap();
        let Command::Start { limits, .. } = c else { panic!() };
        assert_eq!(limits, Limits { rate: TBF_RATE_DEFAULT, bps: Some(500 << 20), realtime: true, global: false });
        let Command::Start { limits, .. } = Command::parse("start g jobid={ckpt} rate=100 global=1", &ty).unwrap()
        else {
            panic!("not a start")
        };
        assert!(limits.global && limits.rate == 100);
        assert_eq!(
            Command::parse("change loginnode rate=200", &ty).unwrap(),
            Command::Change { name: "loginnode".into(), rate: Some(200), bps: None, rank: None }
        );
        assert_eq!(
            Command::parse("change a bps=0", &ty).unwrap(),
            Command::Change { name: "a".into(), rate: None, bps: Some(None), rank: None }
        );
        assert_eq!(Command::parse("stop loginnode", &ty).unwrap(), Command::Stop { name: "loginnode".into() });
    }

    #[test]
    fn bad_commands_name_what_is_allowed() {
        let ty = TbfType::generic();
        let err = |t: &str| Command::parse(t, &ty).unwrap_err();
        assert!(err("begin x jobid={a}").contains("start, change, stop"));
        assert!(err("start x jobid={a} rate=0").contains("0 < rate < 1000000"));
        assert!(err("start x jobid={a} rate=1000000").contains("0 < rate"));
        assert!(err("start x jobid={a} speed=3").contains("the options are rate, bps, rank, realtime, depends, global"));
        assert!(err("start this_name_is_too_long jobid={a}").contains("1 to 15 characters"));
        assert!(err("start bad-name jobid={a}").contains("A-Z"));
        assert!(err("start x rate=5").contains("needs an expression"));
        assert!(err("change x").contains("needs rate=N"));
        assert!(err("change x jobid={a}").contains("not an expression"));
        assert!(err("hp stop x").contains("one request queue"));
        assert!(err("start x jobid={a} bps=fast").contains("bytes per second"));
        assert!(err("start x jobid={a} realtime=yes").contains("0 or 1"));
    }
}
