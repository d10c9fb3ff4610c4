//! Server parameters from a program (`lctl get_param`/`set_param`/`list_param`, as `weft
//! get-param` does them: `weft_client::params`): asked of every server process in the
//! cluster map of this file system, each one's values by its address. Job statistics are
//! read this way (`*.job_stats`), under the job `Fs::set_jobid` named.

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::limits::{PARAM_CONNECT_TIMEOUT_MS, PARAM_REQUEST_TIMEOUT_S};
use std::collections::BTreeMap;
use std::time::Duration;
use weft_client::params::{Answers, ParamServers};
use weft_proto::msg::RequestHeader;

/// Each answering server's address and what it answered.
pub type ParamAnswers<T> = BTreeMap<String, T>;

impl Fs {
    fn param_servers(&self) -> Result<ParamServers> {
        let (connect, timeout) =
            (Duration::from_millis(PARAM_CONNECT_TIMEOUT_MS), Duration::from_secs(PARAM_REQUEST_TIMEOUT_S));
        self.run(ParamServers::of_cluster(self.client.mgs_address(), connect, timeout))
    }

    fn param_header(&self) -> RequestHeader {
        let who = self.who();
        RequestHeader { identity: who.identity, jobid: who.jobid, ..RequestHeader::default() }
    }

    /// This client's `max_rpcs_in_flight` (Lustre's `osc.*.max_rpcs_in_flight`): what the
    /// cluster map's permanent settings give it (`weft set-param -P max_rpcs_in_flight=N`),
    /// else 8. The MPI-IO layer's aggregators keep at most this many requests in flight to
    /// one OST unless its `weft_throttle` hint says otherwise.
    pub fn max_rpcs_in_flight(&self) -> usize {
        weft_client::params::permanent_max_rpcs_in_flight(&self.client.map())
    }

    /// The values of the parameters `pattern` matches (`obdfilter.*.job_stats`), by server:
    /// those that have one. ENOENT when none has; a server that failed otherwise fails the
    /// call, with every server's reason.
    pub fn get_param(&self, pattern: &str) -> Result<ParamAnswers<Vec<(String, String)>>> {
        let servers = self.param_servers()?;
        let answers = self.rt.block_on(servers.get(&self.param_header(), pattern));
        let found = gather(pattern, answers)?;
        Ok(found.into_iter().map(|(s, v)| (s, v.into_iter().map(|p| (p.name, p.value)).collect())).collect())
    }

    /// Sets the parameters `pattern` matches to `value` on every server that has them (and,
    /// `permanent`, records it in the management service for servers that start later); by
    /// server, the names set and their values now.
    pub fn set_param(
        &self,
        pattern: &str,
        value: &str,
        permanent: bool,
    ) -> Result<ParamAnswers<Vec<(String, String)>>> {
        let servers = self.param_servers()?;
        let header = self.param_header();
        let answers = self.rt.block_on(servers.set(&header, pattern, value));
        let found = gather(pattern, answers)?;
        if permanent {
            self.run(servers.record(&header, pattern, value, false))?;
        }
        Ok(found.into_iter().map(|(s, v)| (s, v.into_iter().map(|p| (p.name, p.value)).collect())).collect())
    }

    /// The names of the parameters `pattern` (or its leading parts) matches, over every
    /// server, sorted.
    pub fn list_param(&self, pattern: &str) -> Result<Vec<String>> {
        let servers = self.param_servers()?;
        let answers = self.rt.block_on(servers.list(&self.param_header(), pattern));
        let mut names = std::collections::BTreeSet::new();
        let mut failed = Vec::new();
        for (server, answer) in answers {
            match answer {
                Ok(n) => names.extend(n),
                Err(e) => failed.push((server, Error::from(e))),
            }
        }
        fail_with(failed)?;
        Ok(names.into_iter().collect())
    }
}

/// The servers that answered with values; an error when one failed, or when none had any.
fn gather<T>(pattern: &str, answers: Answers<Vec<T>>) -> Result<ParamAnswers<Vec<T>>> {
    let mut found = BTreeMap::new();
    let mut failed = Vec::new();
    for (server, answer) in answers {
        match answer {
            Ok(values) if !values.is_empty() => drop(found.insert(server, values)),
            Ok(_) => {}
            Err(e) if e.code == weft_proto::ErrorCode::NotFound => {}
            Err(e) => failed.push((server, Error::from(e))),
        }
    }
    fail_with(failed)?;
    if found.is_empty() {
        return Err(Error::new(libc::ENOENT, format!("no server has a parameter matching '{pattern}'")));
    }
    Ok(found)
}

fn fail_with(failed: Vec<(String, Error)>) -> Result<()> {
    let Some(errno) = failed.first().map(|(_, e)| e.errno) else { return Ok(()) };
    let why: Vec<String> = failed.iter().map(|(s, e)| format!("{s}: {}", e.message)).collect();
    Err(Error::new(errno, why.join("; ")))
}
