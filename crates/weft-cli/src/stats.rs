//! `weft stats` and `weft top`: what the management service's monitor recorded in its
//! history. `stats --since 1h --by job` totals each job's (user's, target's) requests and
//! bytes over the time asked; `top` shows the busiest jobs, users and targets now, as rates
//! over the last few intervals.

use crate::cluster_addr::MgsArgs;
use crate::limits::{TOP_INTERVALS, TOP_ROWS};
use anyhow::{anyhow, bail};
use clap::Args;
use weft_proto::msg::{mgs, HistoryReply, UsageTotal};

#[derive(Args)]
pub struct StatsArgs {
    /// How far back: seconds, or a number with s, m, h or d (10m, 1h, 2d).
    #[arg(long, default_value = "1h", value_name = "TIME")]
    since: String,
    /// What to total by: job, user, group or target. OPS are a job's or user's metadata
    /// operations, and all requests of a target.
    #[arg(long, default_value = "job", value_name = "KIND")]
    by: String,
    /// At most this many, busiest first (0: all).
    #[arg(long, default_value_t = 0, value_name = "N")]
    top: u32,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    at: MgsArgs,
}

#[derive(Args)]
pub struct TopArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    at: MgsArgs,
}

use weft_proto::units::parse_duration;

/// Asks the management service's history.
fn history(at: &MgsArgs, kind: &str, secs: u64, top: u32) -> anyhow::Result<HistoryReply> {
    let address = at.address(None)?;
    let op = mgs::History { kind: kind.to_string(), secs, top, step: 0 };
    crate::remote::Remote::mgs(&address)?.ask(0, op)
}

fn row_json(r: &UsageTotal) -> serde_json::Value {
    serde_json::json!({ "name": r.name, "ops": r.ops, "read_bytes": r.read_bytes, "write_bytes": r.write_bytes })
}

pub fn stats(a: StatsArgs) -> anyhow::Result<()> {
    let secs = parse_duration(&a.since).map_err(|e| anyhow!("--since {e}"))?;
    let kind = match a.by.as_str() {
        "job" | "user" | "group" | "target" => a.by.clone(),
        other => bail!("--by '{other}': one of job, user, group, target"),
    };
    let reply = history(&a.at, &kind, secs, a.top)?;
    if a.json {
        let rows: Vec<_> = reply.totals.iter().map(row_json).collect();
        let out = serde_json::json!({ "since_s": secs, "by": kind, "interval_s": reply.interval_s, "rows": rows });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("{:<32} {:>12} {:>16} {:>16}", kind.to_uppercase(), "OPS", "READ_BYTES", "WRITE_BYTES");
    for r in &reply.totals {
        println!("{:<32} {:>12} {:>16} {:>16}", r.name, r.ops, r.read_bytes, r.write_bytes);
    }
    if reply.totals.is_empty() {
        println!("(nothing recorded in the last {})", a.since);
    }
    Ok(())
}

pub fn top(a: TopArgs) -> anyhow::Result<()> {
    // "Now": the last few intervals of the monitor, as rates.
    let probe = history(&a.at, "target", 1, 1)?;
    let interval = probe.interval_s.max(1);
    let window = interval * TOP_INTERVALS;
    let mut sections = Vec::new();
    for kind in ["job", "user", "target"] {
        let reply = history(&a.at, kind, window, TOP_ROWS)?;
        sections.push((kind, reply.totals));
    }
    let rate = |v: u64| v as f64 / window as f64;
    if a.json {
        let mut out = serde_json::Map::new();
        out.insert("window_s".into(), window.into());
        for (kind, rows) in &sections {
            let rows: Vec<_> = rows
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "name": r.name,
                        "ops_per_s": rate(r.ops),
                        "read_bytes_per_s": rate(r.read_bytes),
                        "write_bytes_per_s": rate(r.write_bytes),
                    })
                })
                .collect();
            out.insert(format!("{kind}s"), rows.into());
        }
        println!("{}", serde_json::to_string_pretty(&serde_json::Value::Object(out))?);
        return Ok(());
    }
    println!("busiest over the last {window} s");
    for (kind, rows) in &sections {
        println!("\n{:<32} {:>10} {:>12} {:>12}", kind.to_uppercase(), "OPS/s", "READ MB/s", "WRITE MB/s");
        for r in rows {
            let mb = |v: u64| rate(v) / 1e6;
            println!("{:<32} {:>10.1} {:>12.2} {:>12.2}", r.name, rate(r.ops), mb(r.read_bytes), mb(r.write_bytes));
        }
        if rows.is_empty() {
            println!("(idle)");
        }
    }
    Ok(())
}
