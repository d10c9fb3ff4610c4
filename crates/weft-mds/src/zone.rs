//! I/O zoning (FEFS's, on the K computer): jobs kept on separate OSTs so that their I/O
//! never meets on a disk. A zone is an OST pool; a zone rule (`lod.*.zone_rule`) says whose
//! new files go to it, in the condition language of the NRS's TBF rules
//! ([`weft_proto::rule_expr`]):
//!
//! * `start NAME EXPR pool=POOL` adds a rule at the end (`jobid={ckpt*} pool=zone1` alone
//!   is `start zone1 jobid={ckpt*} pool=zone1`: the rule named after its zone);
//! * `stop NAME` removes it.
//!
//! EXPR matches the creator's `jobid`, `uid` and `gid` (from the request's header), with `&`
//! (and) and `,` (or); the first rule that matches gives the pool. Named rules added and
//! stopped as `nrs_tbf_rule`'s, so that `set-param -P` records them one after the other
//! and a server replays them in order at its start.
//!
//! Pure parsing, matching and listing; the MDS applies the pool at create time
//! ([`crate::objects::Objects::zoned`]).

use crate::limits::{ZONE_RULES_MAX, ZONE_RULE_NAME_BYTES_MAX};
use weft_proto::rule_expr::{check_rule_name, split_options, Expr, Facts, Field, TbfType};

/// The fields a zone rule may name: what the MDS knows of a create's caller.
pub const FIELDS: [Field; 3] = [Field::Jobid, Field::Uid, Field::Gid];

pub const USAGE: &str = "start NAME EXPR pool=POOL | EXPR pool=POOL (named after POOL) | stop NAME, \
where EXPR is jobid={a b*}, uid={N}, gid={N} joined by & (and) and , (or)";

/// One rule: whose new files go to which pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneRule {
    pub name: String,
    pub expr: Expr,
    pub pool: String,
}

/// A command written to `lod.*.zone_rule`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneCommand {
    Start(ZoneRule),
    Stop { name: String },
}

impl ZoneCommand {
    pub fn parse(text: &str) -> Result<ZoneCommand, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let (name, rest) = match words.first() {
            None => return Err(format!("an empty zone rule command; write {USAGE}")),
            Some(&"stop") => {
                return match &words[1..] {
                    [name] => {
                        check_rule_name("zone rule", name, ZONE_RULE_NAME_BYTES_MAX)?;
                        Ok(ZoneCommand::Stop { name: name.to_string() })
                    }
                    [] => Err(format!("'stop' needs a rule name; write {USAGE}")),
                    more => Err(format!("'stop' takes one rule name (got '{}')", more.join(" "))),
                };
            }
            Some(&"start") => {
                let name = words.get(1).ok_or_else(|| format!("'start' needs a rule name; write {USAGE}"))?;
                check_rule_name("zone rule", name, ZONE_RULE_NAME_BYTES_MAX)?;
                (Some(name.to_string()), &words[2..])
            }
            Some(_) => (None, &words[..]),
        };
        let (expr_words, options) = split_options(rest);
        let mut pool = None;
        for (k, v) in options {
            match k {
                "pool" if !v.is_empty() => pool = Some(v.to_string()),
                _ if Field::parse(k).is_ok() => return Err(format!("'{k}={v}': the values go in braces, {k}={{{v}}}")),
                _ => return Err(format!("zone rule option '{k}={v}': the one option is pool=POOL")),
            }
        }
        if expr_words.is_empty() {
            return Err(format!("a zone rule needs an expression such as jobid={{ckpt*}}; write {USAGE}"));
        }
        let pool = pool.ok_or_else(|| format!("a zone rule names its pool: pool=POOL; write {USAGE}"))?;
        let expr = Expr::parse(&expr_words.join(" "), &TbfType::generic())?;
        if let Some(f) = expr.fields().into_iter().find(|f| !FIELDS.contains(f)) {
            return Err(format!(
                "a zone rule matches the creator's {}; '{}' is not known when a file is created",
                FIELDS.map(Field::name).join(", "),
                f.name()
            ));
        }
        let name = match name {
            Some(n) => n,
            None => {
                // Named after its zone: a pool name may hold '-', a rule name may not.
                let n = pool.replace('-', "_");
                check_rule_name("zone rule (named after its pool)", &n, ZONE_RULE_NAME_BYTES_MAX)
                    .map_err(|e| format!("{e}: name it with 'start NAME ...'"))?;
                n
            }
        };
        Ok(ZoneCommand::Start(ZoneRule { name, expr, pool }))
    }
}

/// The rules of one MDT, in order: the first that matches a create gives its pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneRules {
    rules: Vec<ZoneRule>,
}

impl ZoneRules {
    /// Whether there is no rule: then placement is as without zoning (one test on the
    /// create path).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[ZoneRule] {
        &self.rules
    }

    /// Applies `cmd`. Starting a rule again as it is changes nothing (a permanent setting
    /// replayed at a start); under its name with another expression or pool it is refused.
    pub fn apply(&mut self, cmd: ZoneCommand) -> Result<(), String> {
        match cmd {
            ZoneCommand::Start(rule) => {
                if let Some(old) = self.rules.iter().find(|r| r.name == rule.name) {
                    if *old == rule {
                        return Ok(());
                    }
                    return Err(format!(
                        "zone rule '{}' exists already ({}): stop it first, or name the new rule with 'start NAME ...'",
                        rule.name,
                        line(old)
                    ));
                }
                if self.rules.len() >= ZONE_RULES_MAX {
                    return Err(format!("{ZONE_RULES_MAX} zone rules exist already: stop one first"));
                }
                self.rules.push(rule);
                Ok(())
            }
            ZoneCommand::Stop { name } => {
                let before = self.rules.len();
                self.rules.retain(|r| r.name != name);
                if self.rules.len() == before {
                    let names: Vec<&str> = self.rules.iter().map(|r| r.name.as_str()).collect();
                    return Err(format!(
                        "no zone rule '{name}' (the rules: {})",
                        if names.is_empty() { "none".to_string() } else { names.join(", ") }
                    ));
                }
                Ok(())
            }
        }
    }

    /// The pool of the first rule that matches a create by `jobid`, `uid`, `gid` among
    /// those `usable` accepts (a pool that exists and has OSTs).
    pub fn pool_for(&self, jobid: &str, uid: u32, gid: u32, usable: impl Fn(&str) -> bool) -> Option<&str> {
        let facts = Facts { jobid: jobid.to_string(), uid, gid, ..Facts::default() };
        self.rules.iter().find(|r| usable(&r.pool) && r.expr.matches(&facts)).map(|r| r.pool.as_str())
    }

    /// The pools the rules name: the zones.
    pub fn pools(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.pool.as_str())
    }

    /// One line per rule, in order (`NAME EXPR pool=POOL`), each followed by `note(pool)`
    /// when it says something (a pool that is empty or gone).
    pub fn listing(&self, note: impl Fn(&str) -> Option<String>) -> String {
        let mut out = String::new();
        for r in &self.rules {
            out.push_str(&line(r));
            if let Some(n) = note(&r.pool) {
                out.push_str(&format!(" ({n})"));
            }
            out.push('\n');
        }
        out
    }
}

fn line(r: &ZoneRule) -> String {
    format!("{} {} pool={}", r.name, r.expr, r.pool)
}

/// A listing's rules as (name, expression, pool), for readers of `get-param
/// lod.*.zone_rule` (the dashboard); notes in parentheses are dropped.
pub fn parse_listing(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .filter_map(|l| {
            let l = l.split(" (").next().unwrap_or(l).trim();
            let (name, rest) = l.split_once(' ')?;
            let (expr, pool) = rest.rsplit_once(" pool=")?;
            Some((name.to_string(), expr.to_string(), pool.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(cmds: &[&str]) -> ZoneRules {
        let mut r = ZoneRules::default();
        for c in cmds {
            r.apply(ZoneCommand::parse(c).unwrap()).unwrap();
        }
        r
    }

    #[test]
    fn the_first_matching_rule_gives_the_pool() {
        let r = rules(&[
            "start ckpt jobid={ckpt*} pool=zone1",
            "jobid={ana* viz.7}&uid={500} pool=zone2",
            "start admins uid={0},gid={10 11} pool=zone3",
        ]);
        let any = |_: &str| true;
        assert_eq!(r.pool_for("ckpt.42", 1000, 1000, any), Some("zone1"));
        assert_eq!(r.pool_for("ana.1", 500, 500, any), Some("zone2"));
        assert_eq!(r.pool_for("ana.1", 501, 501, any), None, "and: the uid too");
        assert_eq!(r.pool_for("viz.7", 500, 1, any), Some("zone2"));
        assert_eq!(r.pool_for("x", 7, 11, any), Some("zone3"), "or: the gid group");
        assert_eq!(r.pool_for("ckpt.1", 0, 0, any), Some("zone1"), "the first match wins");
        assert_eq!(r.pool_for("other", 1000, 1000, any), None);
        // A zone whose pool is unusable is passed over.
        assert_eq!(r.pool_for("ckpt.1", 0, 0, |p| p != "zone1"), Some("zone3"));
        assert_eq!(r.pools().collect::<Vec<_>>(), ["zone1", "zone2", "zone3"]);
        let listing = r.listing(|p| (p == "zone3").then(|| "pool empty: ignored".to_string()));
        assert_eq!(
            listing,
            "ckpt jobid={ckpt*} pool=zone1\nzone2 jobid={ana* viz.7}&uid={500} pool=zone2\n\
             admins uid={0},gid={10 11} pool=zone3 (pool empty: ignored)\n"
        );
        let parsed = parse_listing(&listing);
        assert_eq!(parsed[1], ("zone2".into(), "jobid={ana* viz.7}&uid={500}".into(), "zone2".into()));
        assert_eq!(parsed[2].2, "zone3");
    }

    #[test]
    fn rules_are_added_replayed_and_stopped_by_name() {
        let mut r = rules(&["jobid={ckpt*} pool=zone1"]);
        r.apply(ZoneCommand::parse("start zone1 jobid={ckpt*} pool=zone1").unwrap()).expect("the same rule again");
        assert_eq!(r.rules().len(), 1);
        let e = r.apply(ZoneCommand::parse("jobid={other} pool=zone1").unwrap()).unwrap_err();
        assert!(e.contains("exists already") && e.contains("jobid={ckpt*}"), "{e}");
        r.apply(ZoneCommand::parse("stop zone1").unwrap()).unwrap();
        assert!(r.is_empty());
        let e = r.apply(ZoneCommand::parse("stop zone1").unwrap()).unwrap_err();
        assert!(e.contains("no zone rule 'zone1' (the rules: none)"), "{e}");
        let mut many = ZoneRules::default();
        for i in 0..ZONE_RULES_MAX {
            many.apply(ZoneCommand::parse(&format!("start r{i} uid={{{i}}} pool=p")).unwrap()).unwrap();
        }
        let e = many.apply(ZoneCommand::parse("start one_more uid={1} pool=p").unwrap()).unwrap_err();
        assert!(e.contains("stop one first"), "{e}");
    }

    #[test]
    fn bad_commands_say_what_is_allowed() {
        let err = |t: &str| ZoneCommand::parse(t).unwrap_err();
        assert!(err("").contains("start NAME EXPR pool=POOL"));
        assert!(err("jobid={ckpt*}").contains("pool=POOL"));
        assert!(err("start r pool=zone1").contains("needs an expression"));
        assert!(err("nid={10.0.0.1@tcp} pool=z").contains("'nid' is not known"));
        assert!(err("opcode={ost_write} pool=z").contains("jobid, uid, gid"));
        assert!(err("jobid={a} pool=z rate=5").contains("the one option is pool=POOL"));
        assert!(err("jobid=a pool=z").contains("jobid={a}"));
        assert!(err("jobid={a} uid=5 pool=z").contains("uid={5}"));
        assert!(err("jobid={a}&uid={5} x pool=z").contains("must end in '}'"));
        assert!(err("uid={me} pool=z").contains("not a number"));
        assert!(err("start bad-name jobid={a} pool=z").contains("A-Z"));
        assert!(err("stop").contains("needs a rule name"));
        assert!(err("stop a b").contains("one rule name"));
        assert!(err("jobid={a} pool=a_pool_name_far_too_long").contains("name it with 'start NAME"));
        // A pool name with '-' names its rule with '_'.
        let ZoneCommand::Start(r) = ZoneCommand::parse("gid={5} pool=fast-ssd").unwrap() else { panic!() };
        assert_eq!((r.name.as_str(), r.pool.as_str()), ("fast_ssd", "fast-ssd"));
        // `*`: every file not matched before (a default zone).
        let ZoneCommand::Start(r) = ZoneCommand::parse("start rest * pool=z").unwrap() else { panic!() };
        assert!(r.expr.matches(&Facts::default()));
    }
}
