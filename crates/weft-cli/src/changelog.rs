//! `weft changelog`, `changelog-register`, `changelog-deregister`, `changelog-clear` and
//! `changelog-users`: an MDT's changelog, as `lfs changelog` and `lctl changelog_register`
//! give Lustre's. The MDT is named as Lustre names it (`weft-MDT0000`; `MDT0000` or `0`
//! also do) and found through the management service.

use crate::cluster_addr::MgsArgs;
use crate::mdts::Mdts;
use anyhow::{anyhow, bail};
use clap::Args;
use std::time::Duration;
use weft_proto::msg::changelog::ChangelogRecord;
use weft_proto::msg::ops::Op;
use weft_proto::msg::{mdt, target_name, TargetKind};

/// Records asked for per request while reading: as many as one answer holds.
use weft_proto::limits::CHANGELOG_READ_RECORDS_MAX as READ_BATCH;

#[derive(Args)]
pub struct RegisterArgs {
    /// The MDT (weft-MDT0000).
    mdt: String,
    /// A name for the reader: its id becomes clN-NAME.
    #[arg(short = 'u', long = "user", value_name = "NAME")]
    name: Option<String>,
    #[command(flatten)]
    at: MgsArgs,
}

#[derive(Args)]
pub struct DeregisterArgs {
    /// The MDT (weft-MDT0000).
    mdt: String,
    /// The reader's id (cl1, or cl1-NAME).
    id: String,
    #[command(flatten)]
    at: MgsArgs,
}

#[derive(Args)]
pub struct ReadArgs {
    /// The MDT (weft-MDT0000).
    mdt: String,
    /// The first record to print.
    start: Option<u64>,
    /// The last record to print.
    end: Option<u64>,
    /// Go on printing records as they are written, until interrupted.
    #[arg(long)]
    follow: bool,
    /// One JSON object per record, per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    at: MgsArgs,
}

#[derive(Args)]
pub struct ClearArgs {
    /// The MDT (weft-MDT0000).
    mdt: String,
    /// The reader's id (cl1, or cl1-NAME).
    id: String,
    /// The last record it is done with (0: every record written so far).
    end: u64,
    #[command(flatten)]
    at: MgsArgs,
}

#[derive(Args)]
pub struct UsersArgs {
    /// The MDT (weft-MDT0000).
    mdt: String,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    at: MgsArgs,
}

/// An MDT reached through the management service's map, asked as the caller.
struct Mdt {
    name: String,
    index: u32,
    mdts: Mdts,
}

impl Mdt {
    fn find(text: &str, at: &MgsArgs) -> anyhow::Result<Mdt> {
        let map = crate::up::fetch_map(&at.address(None)?)?;
        let fsname = map.fsname.clone();
        let index = mdt_index(text, &fsname)
            .ok_or_else(|| anyhow!("'{text}': an MDT name such as {}", target_name(&fsname, TargetKind::Mdt, 0)))?;
        let mdts = Mdts::from_map(map)?;
        if !mdts.has(index) {
            bail!("the file system {fsname} has no MDT {index}");
        }
        Ok(Mdt { name: mdts.name(index), index, mdts })
    }

    fn ask<O>(&self, op: O) -> anyhow::Result<O::Reply>
    where
        O: Op<Answer = weft_proto::msg::MdtReply>,
        O::Request: weft_proto::msg::ServiceRequest,
        O::Answer: weft_proto::msg::ops::Payload<weft_proto::msg::ReplyBody> + weft_proto::msg::ops::Variant,
    {
        self.mdts.ask(self.index, op)
    }
}

/// The index of `weft-MDT0000`, `MDT0000` or `0` (hexadecimal, as target names write it).
fn mdt_index(text: &str, fsname: &str) -> Option<u32> {
    let rest = text.strip_prefix(fsname).and_then(|r| r.strip_prefix('-')).unwrap_or(text);
    let hex = rest.strip_prefix("MDT").unwrap_or(rest);
    if hex.is_empty() || hex.len() > 4 {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

pub fn register(a: RegisterArgs) -> anyhow::Result<()> {
    let mdt = Mdt::find(&a.mdt, &a.at)?;
    let user = mdt.ask(mdt::ChangelogRegister { name: a.name })?;
    println!("{}: Registered changelog userid '{}'", mdt.name, user.id);
    Ok(())
}

pub fn deregister(a: DeregisterArgs) -> anyhow::Result<()> {
    let mdt = Mdt::find(&a.mdt, &a.at)?;
    mdt.ask(mdt::ChangelogDeregister { id: a.id.clone() })?;
    println!("{}: Deregistered changelog user #{}", mdt.name, a.id);
    Ok(())
}

pub fn clear(a: ClearArgs) -> anyhow::Result<()> {
    let mdt = Mdt::find(&a.mdt, &a.at)?;
    mdt.ask(mdt::ChangelogClear { id: a.id, end: a.end })?;
    Ok(())
}

pub fn users(a: UsersArgs) -> anyhow::Result<()> {
    let mdt = Mdt::find(&a.mdt, &a.at)?;
    let users = mdt.ask(mdt::ChangelogUsersList {})?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&users)?);
        return Ok(());
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    print!("{}", users.listing(now));
    println!("records kept: {}", users.records);
    Ok(())
}

pub fn read(a: ReadArgs) -> anyhow::Result<()> {
    if let (Some(s), Some(e)) = (a.start, a.end) {
        if e < s {
            bail!("END {e} is before START {s}");
        }
    }
    let mdt = Mdt::find(&a.mdt, &a.at)?;
    let mut next = a.start.unwrap_or(1).max(1);
    let end = a.end.unwrap_or(0);
    let print = |r: &ChangelogRecord| -> anyhow::Result<()> {
        if a.json {
            println!("{}", serde_json::to_string(r)?);
        } else {
            println!("{}", r.line());
        }
        Ok(())
    };
    loop {
        let records = mdt.ask(mdt::ChangelogRead { start: next, end, max: READ_BATCH })?;
        for r in &records {
            print(r)?;
        }
        match records.last() {
            Some(last) if end == 0 || last.index < end => next = last.index + 1,
            Some(_) => return Ok(()),
            None if a.follow => std::thread::sleep(Duration::from_secs(1)),
            None => return Ok(()),
        }
        if records.len() < READ_BATCH as usize && !a.follow {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mdt_names() {
        assert_eq!(mdt_index("weft-MDT0000", "weft"), Some(0));
        assert_eq!(mdt_index("MDT000a", "weft"), Some(10));
        assert_eq!(mdt_index("1", "weft"), Some(1));
        assert_eq!(mdt_index("other-MDT0000", "weft"), None);
        assert_eq!(mdt_index("weft-OST0000", "weft"), None);
    }
}
