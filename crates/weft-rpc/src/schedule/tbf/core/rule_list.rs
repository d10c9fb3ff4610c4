//! The rule list of a token bucket filter: rules started (in front of the others or of a
//! named one), changed (rate, byte rate, rank) and stopped, by an administrator's command.
//! A child of core.rs: the rules are the filter's own fields.

use super::{Meter, Rule, Tbf, DEFAULT_RULE};
use crate::schedule::tbf::rule::Command;

impl<T> Tbf<T> {
    /// Applies a rule command: `start` puts the new rule first (or in front of `rank`),
    /// `change` sets its rate or moves it, `stop` removes it (never the default rule).
    pub fn command(&mut self, cmd: Command) -> Result<(), String> {
        match cmd {
            Command::Start { name, expr, limits, rank, depends } => {
                if let Some(other) = &depends {
                    if *other == name {
                        return Err(format!("rule '{name}' cannot depend on itself"));
                    }
                    if self.find(other).is_none() {
                        return Err(format!("depends={other}: {}", self.no_rule(other)));
                    }
                }
                if let Some(i) = self.find(&name) {
                    let r = &self.rules[i];
                    let same = r.expr == expr && r.limits == limits && r.depends == depends && rank.is_none();
                    if same {
                        // The same rule again (a permanent setting applied after the live
                        // one): nothing to do.
                        return Ok(());
                    }
                    return Err(format!("TBF rule '{name}' exists already: change it, or stop it first"));
                }
                let at = match rank {
                    Some(other) => self.rank_position(&other)?,
                    None => 0,
                };
                let id = self.next_rule_id;
                self.next_rule_id += 1;
                self.rules.insert(
                    at,
                    Rule {
                        name,
                        expr,
                        limits,
                        depends,
                        id,
                        meter: Meter::default(),
                        share: None,
                        waited: false,
                        reported_idle: false,
                    },
                );
            }
            Command::Change { name, rate, bps, rank } => {
                let i = self.find(&name).ok_or_else(|| self.no_rule(&name))?;
                if let Some(rate) = rate {
                    let rule = &mut self.rules[i];
                    // A global rule's share moves with its rate until the next division.
                    if let Some((share, _)) = &mut rule.share {
                        *share = (u128::from(*share) * u128::from(rate) / u128::from(rule.limits.rate.max(1)))
                            .try_into()
                            .unwrap_or(rate)
                            .max(1);
                    }
                    rule.limits.rate = rate;
                }
                if let Some(bps) = bps {
                    self.rules[i].limits.bps = bps;
                }
                if let Some(other) = rank {
                    if name == DEFAULT_RULE {
                        return Err("the default rule stays last: rank other rules in front of it".into());
                    }
                    if other == name {
                        return Err(format!("rule '{name}' cannot be ranked in front of itself"));
                    }
                    let rule = self.rules.remove(i);
                    let at = match self.rank_position(&other) {
                        Ok(at) => at,
                        Err(e) => {
                            self.rules.insert(i, rule);
                            return Err(e);
                        }
                    };
                    self.rules.insert(at, rule);
                }
            }
            Command::Stop { name } => {
                if name == DEFAULT_RULE {
                    return Err("the default rule cannot be stopped; change its rate instead".into());
                }
                if let Some(dependent) = self.rules.iter().find(|r| r.depends.as_deref() == Some(name.as_str())) {
                    return Err(format!("rule '{}' depends on '{name}': stop it first", dependent.name));
                }
                let i = self.find(&name).ok_or_else(|| self.no_rule(&name))?;
                self.rules.remove(i);
            }
        }
        // Classes match again on their next request (as Lustre re-matches on a change).
        self.rules_gen += 1;
        Ok(())
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.rules.iter().position(|r| r.name == name)
    }

    fn no_rule(&self, name: &str) -> String {
        let names: Vec<&str> = self.rules.iter().map(|r| r.name.as_str()).collect();
        format!("no TBF rule '{name}': the rules are {}", names.join(", "))
    }

    fn rank_position(&self, other: &str) -> Result<usize, String> {
        self.find(other).ok_or_else(|| format!("rank={other}: {}", self.no_rule(other)))
    }
}
