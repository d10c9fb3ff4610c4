//! `weft qos`: the decay policies of the management service (`policy add|remove|list`), the
//! warnings they gave (`warnings`: a user sees their own, root anyone's), and bandwidth
//! reservations (`reserve`, `status`, `list`, `cancel`, `capacity`: see [`crate::reserve`]).

use crate::cluster_addr::MgsArgs;
use crate::remote::Remote;
use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use weft_proto::msg::{mgs, DecayPolicy};
use weft_proto::units::{parse_duration, parse_size};

#[derive(Args)]
pub struct QosArgs {
    #[command(subcommand)]
    command: QosCommand,
}

#[derive(Subcommand)]
enum QosCommand {
    /// Decay policies: whoever uses more than a budget within a period runs at a fallback
    /// rate until the next period begins.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// The warnings of the current periods: the caller's own and their groups' (root: --uid
    /// N, or --all).
    Warnings(WarningsArgs),
    /// Reserves a throughput on the OSTs of files, directories, a pool or a list, for a
    /// duration, for a job: planned at the earliest time the OSTs have room for it.
    Reserve(crate::reserve::ReserveArgs),
    /// A reservation's state: undefined, scheduled, active or done, with its times.
    Status {
        id: String,
        #[command(flatten)]
        out: Shown,
    },
    /// Every reservation planned, active, or done within the last hour.
    List(Shown),
    /// Ends a reservation now (its owner or root); what it held is given back.
    Cancel {
        id: String,
        #[command(flatten)]
        out: Shown,
    },
    /// Shows the OSTs' capacities, or sets them (root): what reservations are planned against.
    Capacity(crate::reserve::CapacityArgs),
    /// Measures each OST's write bandwidth (one stream through a Weft mount) and makes it
    /// the OST's capacity.
    Calibrate(crate::reserve::CalibrateArgs),
    /// For Slurm's PrologSlurmctld: reserves the bandwidth of the job's weftbw licenses for
    /// its time limit (see scripts/slurm-setup.sh).
    SlurmProlog(crate::slurm::PrologArgs),
    /// For Slurm's EpilogSlurmctld: ends the job's reservation.
    SlurmEpilog(crate::slurm::EpilogArgs),
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Adds a policy (or replaces the one of that name).
    Add(AddArgs),
    /// Removes a policy; the limits it set are lifted.
    Remove {
        name: String,
        #[command(flatten)]
        at: MgsArgs,
    },
    /// Lists the policies.
    List(Shown),
}

/// Where the management service is, and whether to print JSON: what the listing commands take.
#[derive(Args)]
struct Shown {
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    at: MgsArgs,
}

#[derive(Args)]
struct AddArgs {
    /// The policy's name (letters, digits, '_', '-').
    name: String,
    /// Whose usage counts: user, group or job.
    #[arg(long, default_value = "user")]
    by: String,
    /// The period: budgets count from its start, limits are lifted at its end (90s, 10m, 24h).
    #[arg(long, default_value = "24h")]
    period: String,
    /// Bytes read and written per period (K, M, G, T in powers of 1024).
    #[arg(long, value_name = "SIZE")]
    budget_bytes: Option<String>,
    /// Metadata operations per period.
    #[arg(long, value_name = "N")]
    budget_ops: Option<u64>,
    /// Requests per second on the object servers' I/O for whoever is over budget.
    #[arg(long, value_name = "N")]
    rate: u64,
    /// Requests per second on the metadata server for whoever is over budget (default: --rate).
    #[arg(long, value_name = "N")]
    mds_rate: Option<u64>,
    /// Only log what the policy would do.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    at: MgsArgs,
}

#[derive(Args)]
struct WarningsArgs {
    /// Another user's warnings (root).
    #[arg(long, conflicts_with = "all")]
    uid: Option<u32>,
    /// Everyone's (root).
    #[arg(long)]
    all: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    at: MgsArgs,
}

/// Sends `op` to the management service as the calling user.
fn ask<O>(at: &MgsArgs, op: O) -> anyhow::Result<O::Reply>
where
    O: weft_proto::msg::ops::Op,
    O::Request: weft_proto::msg::ServiceRequest,
    O::Answer: weft_proto::msg::ops::Payload<weft_proto::msg::ReplyBody> + weft_proto::msg::ops::Variant,
{
    let address = at.address(None)?;
    Remote::mgs(&address)?.ask(0, op)
}

pub fn qos(a: QosArgs) -> anyhow::Result<()> {
    match a.command {
        QosCommand::Policy(PolicyCommand::Add(a)) => add(a),
        QosCommand::Policy(PolicyCommand::Remove { name, at }) => {
            ask(&at, mgs::DecayRemove { name: name.clone() })?;
            println!("decay policy {name} removed; its limits are lifted within the monitor's next interval");
            Ok(())
        }
        QosCommand::Policy(PolicyCommand::List(Shown { json, at })) => {
            let map = crate::up::fetch_map(&at.address(None)?)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&map.decay)?);
                return Ok(());
            }
            if map.decay.is_empty() {
                println!("no decay policy");
            }
            for p in &map.decay {
                let budget = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
                println!(
                    "{}: by {}, period {} s, budget {} bytes and {} metadata operations, then {} requests/s (MDS {}){}",
                    p.name,
                    p.by,
                    p.period_s,
                    budget(p.budget_bytes),
                    budget(p.budget_ops),
                    p.rate,
                    p.mds_rate,
                    if p.dry_run { ", dry run" } else { "" }
                );
            }
            Ok(())
        }
        QosCommand::Reserve(a) => crate::reserve::reserve(a),
        QosCommand::Status { id, out } => crate::reserve::status(&id, out.json, &out.at),
        QosCommand::List(out) => crate::reserve::list(out.json, &out.at),
        QosCommand::Cancel { id, out } => crate::reserve::cancel(&id, out.json, &out.at),
        QosCommand::Capacity(a) => crate::reserve::capacity(a),
        QosCommand::Calibrate(a) => crate::reserve::calibrate(a),
        QosCommand::SlurmProlog(a) => crate::slurm::prolog(a),
        QosCommand::SlurmEpilog(a) => crate::slurm::epilog(a),
        QosCommand::Warnings(w) => {
            let actions = ask(&w.at, mgs::DecayWarnings { uid: w.uid, gids: Vec::new(), all: w.all })?.0;
            if w.json {
                println!("{}", serde_json::to_string_pretty(&actions)?);
                return Ok(());
            }
            if actions.is_empty() {
                println!("no warning in the current periods");
            }
            for a in actions {
                println!("{} {}: {} {}: {}", a.at, a.policy, a.action, a.key, a.reason);
            }
            Ok(())
        }
    }
}

fn add(a: AddArgs) -> anyhow::Result<()> {
    if !["user", "group", "job"].contains(&a.by.as_str()) {
        bail!("--by '{}': user, group or job", a.by);
    }
    let period_s = parse_duration(&a.period).map_err(|e| anyhow!("--period {e}"))?;
    let budget_bytes = match &a.budget_bytes {
        Some(s) => Some(parse_size(s).map_err(|e| anyhow!("--budget-bytes {e}"))?),
        None => None,
    };
    if budget_bytes.is_none() && a.budget_ops.is_none() {
        bail!("give --budget-bytes, --budget-ops, or both");
    }
    let epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let policy = DecayPolicy {
        name: a.name.clone(),
        by: a.by,
        period_s,
        epoch,
        budget_bytes,
        budget_ops: a.budget_ops,
        rate: a.rate,
        mds_rate: a.mds_rate.unwrap_or(a.rate),
        dry_run: a.dry_run,
    };
    ask(&a.at, mgs::DecaySet { policy })?;
    println!("decay policy {} set", a.name);
    Ok(())
}
