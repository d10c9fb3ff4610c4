//! `weft qos reserve|status|list|cancel|capacity`: bandwidth reservations (the planner in
//! weft-mgs's `planner`, enforced on the OSSs by weft-server's `reservations`). A
//! reservation names its OSTs by files or directories (their layouts), a pool, or OST
//! indices; it is for a job id (a Slurm job's, for the prolog and epilog in `scripts/`).

use crate::cluster_addr::MgsArgs;
use crate::remote::Remote;
use anyhow::{anyhow, bail, Context};
use clap::Args;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use weft_proto::msg::qos::{now_ms, utc, OstCapacity, Reservation, ReservationState, ReserveRequest, Throughput};
use weft_proto::msg::{mgs, target_name, ClusterMap, TargetKind};
use weft_proto::units::parse_duration;

#[derive(Args)]
pub struct ReserveArgs {
    /// The throughput for the whole job: bytes per second (100M, 2G) or requests per second
    /// (500rps), divided evenly over the OSTs.
    #[arg(long, value_name = "RATE")]
    throughput: String,
    /// How long it holds (90s, 10m, 2h).
    #[arg(long, value_name = "TIME")]
    duration: String,
    /// Files or directories whose OSTs it holds (a directory: those of its default layout).
    #[arg(long = "path", value_name = "PATH", num_args = 1..)]
    paths: Vec<PathBuf>,
    /// A pool's OSTs.
    #[arg(long)]
    pool: Option<String>,
    /// OST indices (0,2,4-7).
    #[arg(long, value_name = "LIST")]
    ost: Option<String>,
    /// The reservation's id (a Slurm job id).
    #[arg(long)]
    id: String,
    /// The job id its requests carry (default: the id).
    #[arg(long)]
    job: Option<String>,
    /// The earliest start: +DURATION from now (+30s) or Unix seconds (default: as soon as
    /// the OSTs have room).
    #[arg(long, value_name = "WHEN")]
    start: Option<String>,
    /// Wait until it is active.
    #[arg(long)]
    wait: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    at: MgsArgs,
}

#[derive(Args)]
pub struct CapacityArgs {
    /// OST indices (0,2,4-7; default: every OST).
    #[arg(long, value_name = "LIST")]
    ost: Option<String>,
    /// What each OST gives: bytes per second (500M) and/or requests per second (2000rps).
    #[arg(long, value_name = "RATE", num_args = 1..)]
    set: Vec<String>,
    /// Clears the capacities (nothing can be reserved on those OSTs).
    #[arg(long, conflicts_with = "set")]
    clear: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    at: MgsArgs,
}

#[derive(Args)]
pub struct CalibrateArgs {
    /// A directory on a Weft mount to write the test files in (they are removed after).
    #[arg(long)]
    dir: PathBuf,
    /// OST indices (0,2,4-7; default: every OST that is up).
    #[arg(long, value_name = "LIST")]
    ost: Option<String>,
    /// Bytes written to each OST (one stream of 1 MiB writes, synced).
    #[arg(long, default_value = "256M")]
    size: String,
    /// Only measure: print, do not set the capacities.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    at: MgsArgs,
}

/// `+30s` from now, or Unix seconds.
fn parse_start(text: &str) -> anyhow::Result<u64> {
    if let Some(rel) = text.strip_prefix('+') {
        let d = parse_duration(rel).map_err(|e| anyhow!("--start {text}: {e}"))?;
        return d
            .checked_mul(1000)
            .map(|ms| now_ms().saturating_add(ms))
            .ok_or_else(|| anyhow!("--start {text}: too far ahead"));
    }
    let secs: u64 = text.parse().map_err(|_| anyhow!("--start {text}: write +DURATION (+30s, +5m) or Unix seconds"))?;
    secs.checked_mul(1000).ok_or_else(|| anyhow!("--start {text}: too far ahead"))
}

/// The OSTs named by paths, a pool and a list, together.
fn osts_named(map: &ClusterMap, a: &ReserveArgs) -> anyhow::Result<Vec<u32>> {
    let mut osts = Vec::new();
    for path in &a.paths {
        let info: weft_client::virtual_xattr::LayoutAnswer =
            crate::xattr::get_json(path, weft_client::virtual_xattr::LAYOUT)
                .with_context(|| format!("{}: not a file or directory of a Weft mount", path.display()))?;
        osts.extend(weft_client::qos::osts_of(map, info.layout.as_ref(), info.default.as_ref()));
    }
    if let Some(pool) = &a.pool {
        let members = map.pools.get(pool).ok_or_else(|| {
            anyhow!("no pool '{pool}' (the pools: {})", map.pools.keys().cloned().collect::<Vec<_>>().join(", "))
        })?;
        osts.extend(members);
    }
    if let Some(list) = &a.ost {
        osts.extend(crate::lfs::parse_ost_list(list)?);
    }
    if a.paths.is_empty() && a.pool.is_none() && a.ost.is_none() {
        bail!("name what the reservation is for: --path PATH..., --pool NAME or --ost LIST");
    }
    osts.sort_unstable();
    osts.dedup();
    Ok(osts)
}

pub fn reserve(a: ReserveArgs) -> anyhow::Result<()> {
    let throughput = Throughput::parse(&a.throughput).map_err(|e| anyhow!("--throughput: {e}"))?;
    let duration = parse_duration(&a.duration).map_err(|e| anyhow!("--duration {}: {e}", a.duration))?;
    let earliest_ms = a.start.as_deref().map(parse_start).transpose()?.unwrap_or(0);
    let address = a.at.address(a.paths.first().map(PathBuf::as_path))?;
    let map = crate::up::fetch_map(&address)?;
    let osts = osts_named(&map, &a)?;
    let request = ReserveRequest {
        id: a.id.clone(),
        job: a.job.clone().unwrap_or_default(),
        throughput,
        osts,
        earliest_ms,
        duration_ms: duration.checked_mul(1000).ok_or_else(|| anyhow!("--duration {}: too long", a.duration))?,
    };
    let map = Remote::mgs(&address)?.ask(0, mgs::QosReserve { request, uid: 0 })?;
    let r = map.qos.get(&a.id).ok_or_else(|| anyhow!("the management service did not keep reservation {}", a.id))?;
    if a.wait {
        wait_active(&address, &a.id, a.json)?;
    } else {
        show(&map, r, a.json)?;
    }
    Ok(())
}

/// Polls until `id` is active (printing it then), or fails if it ends first.
fn wait_active(address: &str, id: &str, json: bool) -> anyhow::Result<()> {
    let mut said = false;
    loop {
        let map = crate::up::fetch_map(address)?;
        let Some(r) = map.qos.get(id) else { bail!("reservation {id} is gone") };
        match r.state(now_ms()) {
            ReservationState::Active => return show(&map, r, json),
            ReservationState::Done => bail!("reservation {id} ended before it became active (cancelled)"),
            _ if !said && !json => {
                said = true;
                println!("reservation {id}: scheduled, starts at {}; waiting", utc(r.start_ms));
            }
            _ => {}
        }
        let left = r.start_ms.saturating_sub(now_ms());
        std::thread::sleep(Duration::from_millis(left.clamp(50, 1000)));
    }
}

#[derive(serde::Serialize)]
struct Shown<'a> {
    #[serde(flatten)]
    reservation: &'a Reservation,
    state: &'static str,
    per_ost: String,
    start: String,
    end: String,
}

fn shown(r: &Reservation, now: u64) -> Shown<'_> {
    Shown {
        reservation: r,
        state: r.state(now).name(),
        per_ost: r.per_ost().to_string(),
        start: utc(r.start_ms),
        end: utc(r.end_ms()),
    }
}

/// One line: `ID job JOB: RATE on OSTs (RATE each), STATE, START to END`.
fn line(map: &ClusterMap, r: &Reservation, now: u64) -> String {
    let osts: Vec<String> = r.osts.iter().map(|&o| target_name(&map.fsname, TargetKind::Ost, o)).collect();
    let state = r.state(now);
    let when = match state {
        ReservationState::Scheduled => {
            format!("starts {} (in {} s)", utc(r.start_ms), (r.start_ms - now).div_ceil(1000))
        }
        ReservationState::Active => format!("since {}, until {}", utc(r.start_ms), utc(r.end_ms())),
        _ => format!("{} to {}", utc(r.start_ms.min(r.end_ms())), utc(r.end_ms())),
    };
    format!(
        "{} job {}: {} on {} ({} each) for {} s, {}, {when}",
        r.id,
        r.job,
        r.throughput,
        osts.join(","),
        r.per_ost(),
        r.duration_ms / 1000,
        state.name()
    )
}

fn show(map: &ClusterMap, r: &Reservation, json: bool) -> anyhow::Result<()> {
    let now = now_ms();
    if json {
        println!("{}", serde_json::to_string_pretty(&shown(r, now))?);
    } else {
        println!("{}", line(map, r, now));
    }
    Ok(())
}

pub fn status(id: &str, json: bool, at: &MgsArgs) -> anyhow::Result<()> {
    let map = crate::up::fetch_map(&at.address(None)?)?;
    match map.qos.get(id) {
        Some(r) => show(&map, r, json),
        None if json => {
            println!("{}", serde_json::json!({ "id": id, "state": ReservationState::Undefined.name() }));
            Ok(())
        }
        None => {
            println!("{id}: undefined");
            Ok(())
        }
    }
}

pub fn list(json: bool, at: &MgsArgs) -> anyhow::Result<()> {
    let map = crate::up::fetch_map(&at.address(None)?)?;
    let now = now_ms();
    if json {
        let all: Vec<Shown> = map.qos.reservations.iter().map(|r| shown(r, now)).collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    if map.qos.reservations.is_empty() {
        println!("no reservation");
    }
    for r in &map.qos.reservations {
        println!("{}", line(&map, r, now));
    }
    Ok(())
}

pub fn cancel(id: &str, json: bool, at: &MgsArgs) -> anyhow::Result<()> {
    let address = at.address(None)?;
    let map = Remote::mgs(&address)?.ask(0, mgs::QosCancel { id: id.to_string(), uid: 0 })?;
    let r = map.qos.get(id).ok_or_else(|| anyhow!("reservation {id} is gone"))?;
    show(&map, r, json)
}

pub fn capacity(a: CapacityArgs) -> anyhow::Result<()> {
    let address = a.at.address(None)?;
    let mut map = crate::up::fetch_map(&address)?;
    let osts: Vec<u32> = match &a.ost {
        Some(list) => crate::lfs::parse_ost_list(list)?,
        None => map.osts().map(|t| t.index).collect(),
    };
    if a.clear {
        map =
            Remote::mgs(&address)?.ask(0, mgs::QosCapacity { osts: osts.clone(), capacity: OstCapacity::default() })?;
    }
    if !a.set.is_empty() {
        let mut set = OstCapacity::default();
        for text in &a.set {
            match Throughput::parse(text).map_err(|e| anyhow!("--set: {e}"))? {
                Throughput::Bytes(b) => set.bytes = Some(b),
                Throughput::Requests(r) => set.requests = Some(r),
            }
        }
        // A unit not named keeps what each OST had: OSTs of one value go in one request.
        let mut groups: std::collections::BTreeMap<(Option<u64>, Option<u64>), Vec<u32>> = Default::default();
        for &ost in &osts {
            let had = map.qos.capacity.get(&ost).copied().unwrap_or_default();
            let c = OstCapacity { bytes: set.bytes.or(had.bytes), requests: set.requests.or(had.requests) };
            groups.entry((c.bytes, c.requests)).or_default().push(ost);
        }
        for ((bytes, requests), members) in groups {
            map = Remote::mgs(&address)?
                .ask(0, mgs::QosCapacity { osts: members, capacity: OstCapacity { bytes, requests } })?;
        }
    }
    let rows: Vec<(u32, OstCapacity)> =
        osts.iter().map(|&o| (o, map.qos.capacity.get(&o).copied().unwrap_or_default())).collect();
    if a.json {
        let value: Vec<_> = rows
            .iter()
            .map(|(o, c)| serde_json::json!({ "ost": o, "bytes_per_s": c.bytes, "requests_per_s": c.requests }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    let now = now_ms();
    for (ost, c) in rows {
        let reserved = |unit: Throughput| -> u64 {
            map.qos
                .active(now)
                .filter(|r| r.osts.contains(&ost))
                .map(|r| r.per_ost())
                .filter(|t| t.unit() == unit.unit())
                .map(Throughput::value)
                .sum()
        };
        let part = |cap: Option<u64>, unit: Throughput| match cap {
            Some(v) => format!("{} ({} reserved now)", unit.with(v), unit.with(reserved(unit))),
            None => "-".to_string(),
        };
        println!(
            "{}: {} bytes/s, {} requests/s",
            target_name(&map.fsname, TargetKind::Ost, ost),
            part(c.bytes, Throughput::Bytes(0)),
            part(c.requests, Throughput::Requests(0))
        );
    }
    Ok(())
}

/// Bytes per second one stream of 1 MiB writes, synced at the end, puts on `file` (made on
/// OST `ost` alone).
fn measure(file: &std::path::Path, ost: u32, size: u64) -> anyhow::Result<u64> {
    use std::io::Write;
    let spec = weft_proto::layout::StripeSpec {
        stripe_count: 1,
        ost_list: vec![ost],
        ..weft_proto::layout::StripeSpec::unset()
    };
    crate::lfs::apply_layout(file, spec).with_context(|| format!("making {} on OST {ost}", file.display()))?;
    let block = vec![0x5au8; 1 << 20];
    let t0 = Instant::now();
    let mut f = std::fs::OpenOptions::new().write(true).open(file)?;
    let mut left = size;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    f.sync_all()?;
    let took = t0.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(file)?;
    Ok((size as f64 / took.max(1e-6)) as u64)
}

/// `weft qos calibrate`: measures what each OST takes from one writer, and makes it the
/// OST's capacity (rounded down to a MiB).
pub fn calibrate(a: CalibrateArgs) -> anyhow::Result<()> {
    let size = weft_proto::units::parse_size(&a.size).map_err(|e| anyhow!("--size {}: {e}", a.size))?;
    if size < 1 << 20 {
        bail!("--size {}: at least 1M, or the measure is mostly latency", a.size);
    }
    if !a.dir.is_dir() {
        bail!("--dir {}: not a directory", a.dir.display());
    }
    let address = a.at.address(Some(&a.dir))?;
    let map = crate::up::fetch_map(&address)?;
    let osts: Vec<u32> = match &a.ost {
        Some(list) => crate::lfs::parse_ost_list(list)?,
        None => map.osts().filter(|t| t.state == weft_proto::msg::TargetState::Up).map(|t| t.index).collect(),
    };
    if map.qos.active(now_ms()).next().is_some() {
        eprintln!("weft qos calibrate: reservations are active: the measures are what their rules leave");
    }
    let mut rows = Vec::new();
    for ost in osts {
        let file = a.dir.join(format!(".weft-calibrate-{}-{ost}", std::process::id()));
        let measured = measure(&file, ost, size);
        if measured.is_err() {
            let _ = std::fs::remove_file(&file);
        }
        let rate = measured?;
        let capacity = (rate >> 20).max(1) << 20;
        if !a.dry_run {
            let set = OstCapacity { bytes: Some(capacity), ..map.qos.capacity.get(&ost).copied().unwrap_or_default() };
            Remote::mgs(&address)?.ask(0, mgs::QosCapacity { osts: vec![ost], capacity: set })?;
        }
        let name = target_name(&map.fsname, TargetKind::Ost, ost);
        if !a.json {
            println!(
                "{name}: {} written at {}/s{}",
                Throughput::Bytes(size),
                Throughput::Bytes(capacity),
                if a.dry_run { "" } else { ": capacity set" }
            );
        }
        rows.push(serde_json::json!({ "ost": ost, "target": name, "bytes_per_s": capacity, "set": !a.dry_run }));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(())
}
