//! Which job a process's requests are for (Lustre's jobid), named as Lustre's `jobid_var`
//! and `jobid_name` say. Pure logic over what is known of the process; [`crate::callers`]
//! reads those facts from /proc and keeps the answers.

use crate::limits::JOBID_BYTES_MAX;
use std::fmt::Write;

/// The default `jobid_name`: the process name and its uid (`dd.0`).
pub const JOBID_NAME_DEFAULT: &str = "%e.%u";

/// Lustre's `jobid_var`: where a process's jobid comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobidVar {
    /// No jobid (Lustre's `disable`).
    Disable,
    /// `jobid_name` expanded per process; with the default name, `procname_uid`.
    ProcnameUid,
    /// `jobid_name` expanded, for every process of the node (`nodelocal`).
    NodeLocal,
    /// The value of this environment variable of the process (`SLURM_JOB_ID`, ...);
    /// `jobid_name` expanded when the process has none.
    Env(String),
}

/// How a mount names jobs: `jobid_var` and `jobid_name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobidScheme {
    pub var: JobidVar,
    /// Format of `%e %u %g %h %H %j %p` escapes (see [`expand`]).
    pub name: String,
}

impl Default for JobidScheme {
    fn default() -> Self {
        JobidScheme { var: JobidVar::ProcnameUid, name: JOBID_NAME_DEFAULT.to_string() }
    }
}

/// What is known of a process when its jobid is made.
#[derive(Debug, Clone, Default)]
pub struct ProcessFacts<'a> {
    /// The executable's name (`/proc/PID/comm`).
    pub exe: &'a str,
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
    pub hostname: &'a str,
    /// The value of the `jobid_var` environment variable, if the scheme names one and the
    /// process has it.
    pub env: Option<&'a str>,
}

impl JobidVar {
    /// `disable`, `procname_uid`, `nodelocal`, or an environment variable's name.
    pub fn parse(text: &str) -> Result<JobidVar, String> {
        match text {
            "disable" => Ok(JobidVar::Disable),
            "procname_uid" => Ok(JobidVar::ProcnameUid),
            "nodelocal" => Ok(JobidVar::NodeLocal),
            v if !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                Ok(JobidVar::Env(v.to_string()))
            }
            v => Err(format!(
                "jobid_var={v}: allowed are disable, procname_uid, nodelocal, or an environment variable's name"
            )),
        }
    }

    /// As `jobid_var` is written: `disable`, `procname_uid`, `nodelocal` or the variable.
    pub fn name(&self) -> &str {
        match self {
            JobidVar::Disable => "disable",
            JobidVar::ProcnameUid => "procname_uid",
            JobidVar::NodeLocal => "nodelocal",
            JobidVar::Env(name) => name,
        }
    }

    /// The environment variable whose value is wanted, if any.
    pub fn env_name(&self) -> Option<&str> {
        match self {
            JobidVar::Env(name) => Some(name),
            _ => None,
        }
    }
}

impl JobidScheme {
    /// Whether jobids depend on the process at all (else one value serves every request).
    pub fn per_process(&self) -> bool {
        match self.var {
            JobidVar::Disable => false,
            JobidVar::NodeLocal => self.name.contains('%'),
            JobidVar::ProcnameUid | JobidVar::Env(_) => true,
        }
    }

    /// The jobid of a process.
    pub fn jobid(&self, p: &ProcessFacts<'_>) -> String {
        match &self.var {
            JobidVar::Disable => String::new(),
            JobidVar::Env(_) => match p.env.filter(|v| !v.is_empty()) {
                Some(v) => clip(v.to_string()),
                None => expand(&self.name, p),
            },
            JobidVar::ProcnameUid | JobidVar::NodeLocal => expand(&self.name, p),
        }
    }
}

/// Expands a `jobid_name`: `%e` executable name, `%u` uid, `%g` gid, `%h` hostname, `%H`
/// hostname up to its first dot, `%j` the `jobid_var` environment value (empty without),
/// `%p` pid, `%%` a percent sign. Unknown escapes are dropped and spaces skipped, as
/// Lustre does; the result is cut to [`JOBID_BYTES_MAX`].
pub fn expand(format: &str, p: &ProcessFacts<'_>) -> String {
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' => {}
            '%' => {
                let _ = match chars.next() {
                    Some('e') => write!(out, "{}", p.exe),
                    Some('u') => write!(out, "{}", p.uid),
                    Some('g') => write!(out, "{}", p.gid),
                    Some('h') => write!(out, "{}", p.hostname),
                    Some('H') => write!(out, "{}", p.hostname.split('.').next().unwrap_or_default()),
                    Some('j') => write!(out, "{}", p.env.unwrap_or_default()),
                    Some('p') => write!(out, "{}", p.pid),
                    Some('%') => write!(out, "%"),
                    _ => Ok(()),
                };
            }
            c => out.push(c),
        }
    }
    clip(out)
}

fn clip(mut s: String) -> String {
    if s.len() > JOBID_BYTES_MAX {
        let mut end = JOBID_BYTES_MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dd() -> ProcessFacts<'static> {
        ProcessFacts { exe: "dd", uid: 500, gid: 100, pid: 4242, hostname: "node7.cluster.org", env: None }
    }

    #[test]
    fn procname_uid_is_exe_dot_uid() {
        assert_eq!(JobidScheme::default().jobid(&dd()), "dd.500");
        assert!(JobidScheme::default().per_process());
    }

    #[test]
    fn every_escape_expands_and_unknown_ones_and_spaces_go() {
        let p = ProcessFacts { env: Some("77"), ..dd() };
        assert_eq!(expand("%e:%u:%g:%j:%p:%%", &p), "dd:500:100:77:4242:%");
        assert_eq!(expand("%h/%H", &p), "node7.cluster.org/node7");
        assert_eq!(expand("a %q b%", &p), "ab");
        assert_eq!(expand("%j", &dd()), "");
        let long = expand(&"x".repeat(100), &p);
        assert_eq!(long.len(), JOBID_BYTES_MAX);
    }

    #[test]
    fn an_environment_variable_wins_and_the_name_stands_in_without_it() {
        let scheme = JobidScheme { var: JobidVar::Env("SLURM_JOB_ID".into()), name: JOBID_NAME_DEFAULT.into() };
        assert_eq!(scheme.jobid(&ProcessFacts { env: Some("1234"), ..dd() }), "1234");
        assert_eq!(scheme.jobid(&dd()), "dd.500");
        assert_eq!(scheme.jobid(&ProcessFacts { env: Some(""), ..dd() }), "dd.500");
    }

    #[test]
    fn disable_and_nodelocal() {
        let off = JobidScheme { var: JobidVar::Disable, name: JOBID_NAME_DEFAULT.into() };
        assert_eq!(off.jobid(&dd()), "");
        assert!(!off.per_process());
        let node = JobidScheme { var: JobidVar::NodeLocal, name: "ckpt".into() };
        assert_eq!(node.jobid(&dd()), "ckpt");
        assert!(!node.per_process());
        let host = JobidScheme { var: JobidVar::NodeLocal, name: "%H".into() };
        assert_eq!(host.jobid(&dd()), "node7");
        assert!(host.per_process());
    }

    #[test]
    fn jobid_var_values_are_checked() {
        assert_eq!(JobidVar::parse("procname_uid"), Ok(JobidVar::ProcnameUid));
        assert_eq!(JobidVar::parse("SLURM_JOB_ID"), Ok(JobidVar::Env("SLURM_JOB_ID".into())));
        let e = JobidVar::parse("A-B").unwrap_err();
        assert!(e.contains("jobid_var=A-B") && e.contains("procname_uid"), "{e}");
        assert!(JobidVar::parse("").is_err());
    }
}
