//! `weft qos slurm-prolog` and `slurm-epilog`: Slurm's controller runs them around every job
//! (`PrologSlurmctld`, `EpilogSlurmctld`; `scripts/slurm-setup.sh` writes the configuration).
//! Bandwidth is a Slurm license (`weftbw`, global: each one stands for `--unit` bytes per
//! second of the file system) and a generic resource (`weftbw` per node, in bytes per second,
//! Slurm's own accounting of the nodes' links). Slurm holds a job in its queue until its
//! licenses are free; the prolog then reserves the job's licensed bandwidth for its time
//! limit, as `slurm-<job id>` (ids only root may take) for the requests of its job id, and waits
//! until it is active before the job starts (bounded by `--wait-max`), on the OSTs its comment names (`weft-pool=NAME` or
//! `weft-ost=LIST`; all OSTs otherwise), and the epilog cancels the reservation, so a job
//! that ends early gives its bandwidth back. The job's mounts take `jobid_var=SLURM_JOB_ID`,
//! so its requests carry the id the reservation's rule matches.

use crate::cluster_addr::MgsArgs;
use crate::remote::Remote;
use anyhow::{anyhow, bail, Context};
use clap::Args;
use std::collections::BTreeMap;
use weft_proto::msg::mgs;
use weft_proto::msg::qos::{now_ms, ReservationState, ReserveRequest, Throughput};
use weft_proto::units::parse_size;

/// The license's and the generic resource's name.
pub const RESOURCE: &str = "weftbw";

#[derive(Args)]
pub struct PrologArgs {
    /// What one license stands for, in bytes per second (1M).
    #[arg(long, default_value = "1M")]
    unit: String,
    /// The reservation's length when the job has no time limit.
    #[arg(long, default_value = "1h")]
    unlimited: String,
    /// The job (default: $SLURM_JOB_ID, as Slurm's controller sets it).
    #[arg(long)]
    job: Option<String>,
    /// How long the job may wait for its reservation to become active; past it the
    /// reservation is cancelled and the prolog fails, so Slurm requeues the job.
    #[arg(long, default_value = "10m")]
    wait_max: String,
    #[command(flatten)]
    at: MgsArgs,
}

#[derive(Args)]
pub struct EpilogArgs {
    /// The job (default: $SLURM_JOB_ID).
    #[arg(long)]
    job: Option<String>,
    #[command(flatten)]
    at: MgsArgs,
}

fn job_id(given: Option<String>) -> anyhow::Result<String> {
    given
        .or_else(|| std::env::var("SLURM_JOB_ID").ok())
        .ok_or_else(|| anyhow!("no job: --job ID, or run from Slurm's controller prolog (SLURM_JOB_ID)"))
}

/// `scontrol show job -o ID`'s fields.
fn show_job(id: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let out = std::process::Command::new("scontrol")
        .args(["show", "job", "-o", id])
        .output()
        .context("running scontrol (Slurm's client commands must be installed on the controller)")?;
    if !out.status.success() {
        bail!("scontrol show job {id}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(fields(&String::from_utf8_lossy(&out.stdout)))
}

/// `Key=Value` words of one line of scontrol.
pub(crate) fn fields(line: &str) -> BTreeMap<String, String> {
    line.split_whitespace().filter_map(|w| w.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The count of `weftbw` in a `Licenses=` value (`weftbw:100,other:2`; `weftbw` alone is 1).
pub(crate) fn licenses(value: &str) -> u64 {
    value
        .split(',')
        .filter_map(|l| {
            let (name, count) = l.split_once(':').unwrap_or((l, "1"));
            (name == RESOURCE).then(|| count.parse::<u64>().ok()).flatten()
        })
        .sum()
}

/// Milliseconds of a Slurm time limit (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`,
/// `D-HH:MM:SS`); None for `UNLIMITED` or what does not parse.
pub(crate) fn time_limit_ms(value: &str) -> Option<u64> {
    let (days, rest) = match value.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, value),
    };
    let parts: Vec<u64> = rest.split(':').map(|p| p.parse::<u64>().ok()).collect::<Option<_>>()?;
    let secs = match (value.contains('-'), parts.as_slice()) {
        (false, [m]) => m * 60,
        (false, [m, s]) => m * 60 + s,
        (_, [h, m, s]) => h * 3600 + m * 60 + s,
        (true, [h]) => h * 3600,
        (true, [h, m]) => h * 3600 + m * 60,
        _ => return None,
    };
    Some((days * 86_400 + secs) * 1000)
}

pub fn prolog(a: PrologArgs) -> anyhow::Result<()> {
    let id = job_id(a.job)?;
    let job = show_job(&id)?;
    let count = job.get("Licenses").map_or(0, |v| licenses(v));
    if count == 0 {
        println!("job {id} asks no {RESOURCE} license: no reservation");
        return Ok(());
    }
    let unit = parse_size(&a.unit).map_err(|e| anyhow!("--unit {}: {e}", a.unit))?;
    let duration_ms = match job.get("TimeLimit").and_then(|v| time_limit_ms(v)) {
        Some(ms) => ms,
        None => weft_proto::units::parse_duration(&a.unlimited).map_err(|e| anyhow!("--unlimited: {e}"))? * 1000,
    };
    let address = a.at.address(None)?;
    let map = crate::up::fetch_map(&address)?;
    let comment = job.get("Comment").map(String::as_str).unwrap_or("");
    let osts: Vec<u32> = if let Some(pool) = comment.strip_prefix("weft-pool=") {
        map.pools
            .get(pool)
            .cloned()
            .ok_or_else(|| anyhow!("job {id}'s comment names no pool of the file system: {pool}"))?
    } else if let Some(list) = comment.strip_prefix("weft-ost=") {
        crate::lfs::parse_ost_list(list)?
    } else {
        map.osts().filter(|t| t.state == weft_proto::msg::TargetState::Up).map(|t| t.index).collect()
    };
    let wait_max = weft_proto::units::parse_duration(&a.wait_max).map_err(|e| anyhow!("--wait-max: {e}"))?;
    let name = reservation_id(&id);
    let request = ReserveRequest {
        id: name.clone(),
        job: id.clone(),
        throughput: Throughput::Bytes(count * unit),
        osts,
        earliest_ms: 0,
        duration_ms,
    };
    let map = Remote::mgs(&address)?.ask(0, mgs::QosReserve { request, uid: 0 })?;
    let r = map.qos.get(&name).ok_or_else(|| anyhow!("the management service did not keep reservation {name}"))?;
    println!(
        "job {id}: reserved {} for {} s as {name}, {}",
        r.throughput,
        r.duration_ms / 1000,
        r.state(now_ms()).name()
    );
    // The job starts when its bandwidth is there: Slurm's licenses and the OSTs' capacities
    // should agree, but where they do not, the job waits here, not unheld.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(wait_max);
    loop {
        let map = crate::up::fetch_map(&address)?;
        match map.qos.state(&name, now_ms()) {
            ReservationState::Active => return Ok(()),
            ReservationState::Scheduled if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(250))
            }
            state => {
                let _ = Remote::mgs(&address)?.ask(0, mgs::QosCancel { id: name.clone(), uid: 0 });
                bail!(
                    "job {id}: its reservation is {} after {}: cancelled; Slurm requeues the job",
                    state.name(),
                    a.wait_max
                );
            }
        }
    }
}

/// The reservation the prolog makes for Slurm job `job` (an id only root may take).
fn reservation_id(job: &str) -> String {
    format!("{}{job}", weft_proto::msg::qos::SLURM_PREFIX)
}

pub fn epilog(a: EpilogArgs) -> anyhow::Result<()> {
    let id = job_id(a.job)?;
    let address = a.at.address(None)?;
    match Remote::mgs(&address)?.ask(0, mgs::QosCancel { id: reservation_id(&id), uid: 0 }) {
        Ok(_) => println!("job {id}: reservation ended"),
        // A job that asked no license has none.
        Err(e) if e.to_string().contains("no reservation") => println!("job {id}: no reservation"),
        Err(e) => return Err(e),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scontrol_fields_licenses_and_time_limits_parse() {
        let f = fields(
            "JobId=12 JobName=wrap TimeLimit=00:10:00 Licenses=weftbw:100,matlab:1 NumNodes=1 Comment=weft-pool=fast",
        );
        assert_eq!(f["JobId"], "12");
        assert_eq!(f["Comment"], "weft-pool=fast");
        assert_eq!(licenses(&f["Licenses"]), 100);
        assert_eq!(licenses("other:3"), 0);
        assert_eq!(licenses("weftbw"), 1);
        assert_eq!(licenses("(null)"), 0);
        assert_eq!(time_limit_ms("00:10:00"), Some(600_000));
        assert_eq!(time_limit_ms("5"), Some(300_000));
        assert_eq!(time_limit_ms("5:30"), Some(330_000));
        assert_eq!(time_limit_ms("1-02"), Some(93_600_000));
        assert_eq!(time_limit_ms("1-00:00:10"), Some(86_410_000));
        assert_eq!(time_limit_ms("UNLIMITED"), None);
    }
}
