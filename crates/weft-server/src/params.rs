//! The parameter tree of a server process (Lustre's `lctl get_param/set_param`): for each
//! service the process runs, its NRS policy and, under TBF, its rules, settings and classes.
//!
//! | name | get | set |
//! |---|---|---|
//! | `SERVICE.nrs_policies` | the policies, Lustre's YAML | `fifo`, `tbf`, `tbf jobid`, ... |
//! | `SERVICE.nrs_tbf_rule` | the rules, Lustre's shape | `start ...`, `change ...`, `stop ...` |
//! | `SERVICE.nrs_tbf_running_max` | requests running at once under TBF (0: no bound) | a number |
//! | `SERVICE.nrs_tbf_share_spare` | 1 when idle capacity is shared by rate | 0 or 1 |
//! | `SERVICE.nrs_tbf_depth` | tokens a class may save up | 1 or more |
//! | `SERVICE.nrs_tbf_classes` | each class: its rule, requests held and waits | read only |
//!
//! SERVICE is `ost.OSS.ost_io`, `ost.OSS.ost`, `mds.MDS.mdt`, `mgs.MGS.mgs` or
//! `ldlm.services.ldlm_canceld`, as the process serves them. The `nrs_tbf_*` names answer
//! while the service's policy is TBF.

use std::fmt::Write;
use std::sync::Arc;
use weft_proto::msg::param::{name_matches, name_or_parent_matches, ParamNames, ParamValue, ParamValues};
use weft_proto::msg::{ParamReply, ParamRequest, RequestHeader, Service};
use weft_proto::{ErrorCode, WeftError, WeftResult};
use weft_rpc::schedule::tbf::rule::Field;
use weft_rpc::schedule::tbf::TbfPolicy;
use weft_rpc::schedule::Schedulers;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leaf {
    Policies,
    TbfRule,
    TbfRunningMax,
    TbfShareSpare,
    TbfDepth,
    TbfClasses,
}

impl Leaf {
    const ALL: [Leaf; 6] =
        [Leaf::Policies, Leaf::TbfRule, Leaf::TbfRunningMax, Leaf::TbfShareSpare, Leaf::TbfDepth, Leaf::TbfClasses];

    fn name(self) -> &'static str {
        match self {
            Leaf::Policies => "nrs_policies",
            Leaf::TbfRule => "nrs_tbf_rule",
            Leaf::TbfRunningMax => "nrs_tbf_running_max",
            Leaf::TbfShareSpare => "nrs_tbf_share_spare",
            Leaf::TbfDepth => "nrs_tbf_depth",
            Leaf::TbfClasses => "nrs_tbf_classes",
        }
    }
}

pub(crate) struct Params {
    schedulers: Arc<Schedulers>,
    services: Vec<Service>,
}

impl Params {
    /// The tree of a process running `services`.
    pub fn new(schedulers: Arc<Schedulers>, services: Vec<Service>) -> Params {
        Params { schedulers, services }
    }

    fn leaves(&self) -> impl Iterator<Item = (String, Service, Leaf)> + '_ {
        self.services.iter().filter_map(|s| s.param_prefix().map(|p| (p, *s))).flat_map(|(prefix, service)| {
            Leaf::ALL.into_iter().map(move |leaf| (format!("{prefix}.{}", leaf.name()), service, leaf))
        })
    }

    pub fn handle(&self, header: &RequestHeader, op: ParamRequest) -> WeftResult<ParamReply> {
        match op {
            ParamRequest::GetParam(g) => {
                let mut values = Vec::new();
                for (name, service, leaf) in self.leaves().filter(|(n, ..)| name_matches(&g.pattern, n)) {
                    match self.get(service, leaf) {
                        Ok(value) => values.push(ParamValue { name, value }),
                        // A TBF name while the policy is FIFO: not there, unless asked by name.
                        Err(e) if g.pattern.contains(['*', '?']) => drop(e),
                        Err(e) => return Err(WeftError::invalid(e)),
                    }
                }
                self.found(&g.pattern, values.is_empty())?;
                Ok(ParamReply::Values(ParamValues(values)))
            }
            ParamRequest::SetParam(s) => {
                if header.identity.uid != 0 {
                    return Err(WeftError::new(ErrorCode::Perm, "only root sets parameters"));
                }
                let matched: Vec<_> = self.leaves().filter(|(n, ..)| name_matches(&s.pattern, n)).collect();
                self.found(&s.pattern, matched.is_empty())?;
                let mut values = Vec::new();
                for (name, service, leaf) in matched {
                    self.set(service, leaf, &s.value).map_err(|e| WeftError::invalid(format!("{name}: {e}")))?;
                    values.push(ParamValue { name, value: s.value.clone() });
                }
                Ok(ParamReply::Values(ParamValues(values)))
            }
            ParamRequest::ListParam(l) => {
                let names: Vec<String> =
                    self.leaves().map(|(n, ..)| n).filter(|n| name_or_parent_matches(&l.pattern, n)).collect();
                Ok(ParamReply::Names(ParamNames(names)))
            }
        }
    }

    fn found(&self, pattern: &str, none: bool) -> WeftResult<()> {
        if none {
            return Err(WeftError::not_found(format!(
                "no parameter of this server matches '{pattern}' (weft list-param shows them)"
            )));
        }
        Ok(())
    }

    fn tbf(&self, service: Service) -> Result<Arc<TbfPolicy>, String> {
        self.schedulers.tbf(service).ok_or_else(|| {
            let prefix = service.param_prefix().unwrap_or_default();
            format!("the policy of {prefix} is {}: set {prefix}.nrs_policies=tbf first", self.policy_name(service))
        })
    }

    fn policy_name(&self, service: Service) -> String {
        self.schedulers.of(service).policy().name().to_string()
    }

    fn get(&self, service: Service, leaf: Leaf) -> Result<String, String> {
        Ok(match leaf {
            Leaf::Policies => self.schedulers.policies_listing(service),
            Leaf::TbfRule => self.tbf(service)?.listing(),
            Leaf::TbfRunningMax => self.tbf(service)?.options().running_max.unwrap_or(0).to_string(),
            Leaf::TbfShareSpare => u8::from(self.tbf(service)?.options().share_spare).to_string(),
            Leaf::TbfDepth => self.tbf(service)?.options().depth.to_string(),
            Leaf::TbfClasses => classes_listing(&*self.tbf(service)?),
        })
    }

    fn set(&self, service: Service, leaf: Leaf, value: &str) -> Result<(), String> {
        match leaf {
            Leaf::Policies => self.schedulers.set_policy(service, value),
            Leaf::TbfRule => self.tbf(service)?.command(value),
            Leaf::TbfRunningMax => {
                let tbf = self.tbf(service)?;
                let n: usize = value.trim().parse().map_err(|_| format!("'{value}': a number (0: no bound)"))?;
                tbf.set_options(weft_rpc::schedule::tbf::core::Options {
                    running_max: (n > 0).then_some(n),
                    ..tbf.options()
                });
                Ok(())
            }
            Leaf::TbfShareSpare => {
                let tbf = self.tbf(service)?;
                let on = match value.trim() {
                    "0" => false,
                    "1" => true,
                    _ => return Err(format!("'{value}': 0 or 1")),
                };
                tbf.set_options(weft_rpc::schedule::tbf::core::Options { share_spare: on, ..tbf.options() });
                Ok(())
            }
            Leaf::TbfDepth => {
                let tbf = self.tbf(service)?;
                let depth: u32 = match value.trim().parse() {
                    Ok(d) if d >= 1 => d,
                    _ => return Err(format!("'{value}': a number of tokens, 1 or more")),
                };
                tbf.set_options(weft_rpc::schedule::tbf::core::Options { depth, ..tbf.options() });
                Ok(())
            }
            Leaf::TbfClasses => Err("read only: it lists the classes TBF has seen".into()),
        }
    }
}

/// Each class TBF keeps: its key, rule, and what its limit did to it (who hit a limit).
fn classes_listing(tbf: &TbfPolicy) -> String {
    let mut out = String::from("classes:\n");
    let mut classes = tbf.classes();
    classes.sort_by(|a, b| b.stats.held.cmp(&a.stats.held).then(b.stats.started.cmp(&a.stats.started)));
    for c in classes {
        let k = &c.key;
        let ty = tbf.ty();
        let mut key = Vec::new();
        for field in ty.fields() {
            key.push(match field {
                Field::Nid => format!("nid={}", k.nid),
                Field::Jobid => format!("jobid={}", k.jobid),
                Field::Opcode => format!("opcode={}", k.opcode),
                Field::Uid => format!("uid={}", k.uid),
                Field::Gid => format!("gid={}", k.gid),
            });
        }
        let s = c.stats;
        let _ = write!(
            out,
            "- class: {}\n  rule: {}\n  queued: {}\n  started: {}\n  held: {}\n  extra: {}\n  bytes: {}\n  waited_usecs: {}\n  waited_max_usecs: {}\n",
            key.join("&"),
            c.rule,
            c.queued,
            s.started,
            s.held,
            s.extra,
            s.bytes,
            s.waited_ns / 1000,
            s.waited_max_ns / 1000,
        );
    }
    out
}
