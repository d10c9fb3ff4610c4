//! `weft`: the one binary. Parses the command line and wires the crates together; the logic
//! lives in the library crates. Messages a person can act on are made here and nowhere else.

// mimalloc instead of glibc's malloc: a metadata operation makes dozens of small
// allocations across the FUSE, client and MDS layers of one process, and glibc's (with
// its consolidation passes) took about a tenth of `weft up`'s CPU per create. Measured with
// two create loops under `weft up`: 4-9% less daemon CPU per create, 4-6% more creates/s.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench;
mod changelog;
mod cluster_addr;
mod copytool;
mod daemon;
mod del_ost;
mod dirstripe;
mod errors;
mod failover;
mod find;
mod group_status;
mod hsm;
mod key;
mod lfs;
mod limits;
mod logging;
mod mdts;
mod members;
mod migrate;
mod migrate_mdt;
mod mirror;
mod mount;
mod mount_helper;
mod nodemap;
mod param;
mod pcc;
mod policy;
mod pool;
mod project;
mod qos;
mod quota;
mod remote;
mod replicas;
mod reserve;
mod slurm;
mod stats;
mod sys_xattr;
mod tool;
mod up;
mod xattr;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use weft_bench::size;

#[derive(Parser)]
#[command(name = "weft", version, about = "Weft: a parallel distributed file system in user space", long_about = None)]
struct Cli {
    /// The file system's shared key file (`weft key new`), proved at every connection to
    /// its servers; default: $WEFT_KEY_FILE, else none.
    #[arg(long, global = true, value_name = "FILE")]
    key: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a whole file system on this machine (MGS, one MDT, N OSTs) and mount it.
    Up(up::UpArgs),
    /// Unmount and stop what `weft up` started.
    Down(up::DataArgs),
    /// Show the roles, targets, their state and addresses, and the mount.
    Status(up::StatusArgs),
    /// Run the server roles that a config file names, on this node.
    Server(ServerArgs),
    /// Mount a Weft file system from its management service.
    Mount(mount::MountArgs),
    /// Unmount a Weft mount.
    Umount(mount::UmountArgs),
    /// Set the layout of a new file, or the default layout of a directory (as lfs setstripe).
    Setstripe(lfs::SetstripeArgs),
    /// Show the layout of files and directories (as lfs getstripe).
    Getstripe(lfs::GetstripeArgs),
    /// Show space and inode use per target (as lfs df).
    Df(lfs::DfArgs),
    /// Make a directory on another MDT (-i) or striped over several (-c), or with -D set a
    /// directory's default for new subdirectories (as lfs mkdir / setdirstripe).
    #[command(alias = "setdirstripe")]
    Mkdir(dirstripe::SetdirstripeArgs),
    /// Show a directory's placement over MDTs (as lfs getdirstripe).
    Getdirstripe(dirstripe::GetdirstripeArgs),
    /// List the MDTs and their state (as lfs mdts).
    Mdts(dirstripe::MdtsArgs),
    /// Print the FID of each path (as lfs path2fid).
    Path2fid(lfs::Path2fidArgs),
    /// Print the path of a FID under a mount (as lfs fid2path).
    Fid2path(lfs::Fid2pathArgs),
    /// Measure: the IO-500 phases, or a single stream.
    Bench(bench::BenchArgs),
    /// The file system's shared key (as lgss_sk): `weft key new FILE [--flavor skpi|skn]`
    /// makes one, `weft key show FILE` names it.
    Key(key::KeyArgs),
    /// Set server and mount parameters: NRS policies and rules, job statistics, jobids (as
    /// lctl set_param).
    ///
    /// Policies: `ost.OSS.ost_io.nrs_policies=fifo|tbf|tbf jobid|tbf uid+gid|...` (also
    /// `ost.OSS.ost`, `mds.MDS.mdt`, `ldlm.services.ldlm_canceld`, `mgs.MGS.mgs`). TBF rules,
    /// written to `SERVICE.nrs_tbf_rule`: `start NAME EXPR [rate=N] [bps=SIZE] [rank=OTHER]
    /// [realtime=1] [depends=OTHER] [global=1]`, `change NAME [rate=N] [bps=SIZE] [rank=OTHER]`, `stop
    /// NAME`; EXPR is `field={v1 v2}` terms over nid, jobid, opcode, uid, gid joined by `&`
    /// (and) and `,` (or). A rule's rate (requests per second; bps= bytes per second) applies
    /// to each class it matches, not to all of them together, as in Lustre: with `tbf jobid`,
    /// `start dd jobid={dd.*} rate=50` gives every dd job 50 requests a second. Limits hold
    /// per server process. `depends=OTHER` makes RATE shared with rule OTHER: this rule gets
    /// what OTHER's classes leave of it. `realtime=1` lets a class that a saturated server
    /// delayed catch up (bounded). `global=1` (set with -P, so that every server has it)
    /// makes RATE one rate for the whole file system: the management service divides it
    /// among the servers by their measured demand, each second.
    SetParam(param::SetParamArgs),
    /// Show server parameters (as lctl get_param).
    GetParam(param::GetParamArgs),
    /// List server parameter names (as lctl list_param).
    ListParam(param::ListParamArgs),
    /// Totals per job, user or target over a past time, from the management service's
    /// history (`--since 1h --by job`).
    Stats(stats::StatsArgs),
    /// The busiest jobs, users and targets now (rates over the monitor's last intervals).
    Top(stats::TopArgs),
    /// Decay policies (budgets per period, then a fallback rate) and their warnings; bandwidth
    /// reservations (reserve, status, list, cancel, capacity, calibrate, the Slurm prolog).
    Qos(qos::QosArgs),
    /// A file's hierarchical storage state, and the flags users and root set (as lfs
    /// hsm_state, hsm_set, hsm_clear).
    Hsm(hsm::HsmArgs),
    /// Project ids, which quotas by project count against (as lfs project): list
    /// (`ID P|- PATH`), set with -p ID and -s (directories pass it on), clear with -C,
    /// check a tree with -c; -r over a tree. Changing is root's.
    Project(project::ProjectArgs),
    /// Quota limits and usage of a user, group or project (as lfs quota): Lustre's table,
    /// -v per target, -h human sizes, -t grace times, -U/-G/-P defaults, --verify counts by a
    /// scan (root).
    Quota(quota::QuotaArgs),
    /// Set quota limits (as lfs setquota, root): `-u|-g|-p NAME -b SOFT -B HARD -i SOFT -I
    /// HARD MNT` (blocks in KiB, K/M/G/T suffixes, 0 none), -U/-G/-P for the defaults, -D or
    /// --delete to follow them again, `-t -u -b 1w -i 1d MNT` for grace times.
    Setquota(quota::SetquotaArgs),
    /// Persistent client caches: add, del and list a mount's cache directories (as lctl
    /// pcc), attach, detach and show files (as lfs pcc).
    Pcc(pcc::PccArgs),
    /// Run an HSM copytool (as lhsmtool_posix): serve archive requests of the coordinator
    /// with a posix directory or a command as the archive (root).
    Copytool(copytool::CopytoolArgs),
    /// A policy engine that follows the changelog: archive and release what its rules name
    /// (dry run unless --apply) (root).
    Policy(policy::PolicyArgs),
    /// Print an MDT's changelog records (as lfs changelog): `INDEX NNTYPE TIME DATE FLAGS
    /// t=[FID] j=JOB ef=0x1 u=UID:GID p=[PARENT] NAME`, times in UTC (root).
    Changelog(changelog::ReadArgs),
    /// Rewrite files' data into a new layout while they stay in use (as lfs migrate); the
    /// files from standard input when none are named (`weft find ... | weft migrate -o 0,1`).
    /// With -m MDT: move a tree's inodes to another MDT (as lfs migrate -m).
    Migrate(migrate::MigrateArgs),
    /// Files with mirrors (as lfs mirror create, extend, split, resync, verify).
    Mirror(mirror::MirrorArgs),
    /// Find files by name, type, size, age and layout (as lfs find), from metadata only.
    Find(find::FindArgs),
    /// OST pools (as lctl pool_new, pool_add, pool_remove, pool_list, pool_destroy).
    Pool(pool::PoolArgs),
    /// Identity policies by client address (as lctl nodemap_activate, nodemap_add,
    /// nodemap_add_range, nodemap_add_idmap, nodemap_modify, nodemap_fileset_add, ...).
    Nodemap(nodemap::NodemapArgs),
    /// Move a failover OST to another of its servers on a live file system (root): its
    /// server stops serving it, the other takes it over, clients follow.
    Failover(failover::FailoverArgs),
    /// Take an OST out of the cluster map of a live file system (root; as lctl del_ost):
    /// refused while an MDT has objects there or still places new ones there.
    DelOst(del_ost::DelOstArgs),
    /// Add a replica to a replicated MDT's or the MGS's group, or remove one, on a live file
    /// system (root): `weft replica add weft-MDT0000 HOST:PORT`.
    Replica(members::ReplicaArgs),
    /// Register a changelog reader on an MDT (as lctl changelog_register): records are kept
    /// from now until it clears them (root).
    ChangelogRegister(changelog::RegisterArgs),
    /// Remove a changelog reader (as lctl changelog_deregister) (root).
    ChangelogDeregister(changelog::DeregisterArgs),
    /// A reader is done with the records up to ENDREC (as lfs changelog_clear); records
    /// every reader cleared are removed (root).
    ChangelogClear(changelog::ClearArgs),
    /// An MDT's changelog readers, what each cleared and for how long it has been idle (as
    /// lctl get_param mdd.*.changelog_users).
    ChangelogUsers(changelog::UsersArgs),
}

#[derive(Args)]
pub struct ServerArgs {
    /// The TOML config naming this node's roles (see docs/CONFIG.md).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
}

/// Servers keep object files open (up to 1024 per OST) and clients a socket per server:
/// raise the soft limit on open files to the hard limit, as daemons do.
fn raise_open_files_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// The command's name as typed, its subcommands included (`hsm release`).
fn command_name(matches: &clap::ArgMatches) -> String {
    let mut words = Vec::new();
    let mut at = matches;
    while let Some((name, sub)) = at.subcommand() {
        words.push(name.to_string());
        at = sub;
    }
    words.join(" ")
}

fn main() -> ExitCode {
    // mount(8) runs `/sbin/mount.fuse.weft SOURCE DIR -o OPTIONS`, a link to this binary.
    let mut argv = std::env::args_os();
    if mount_helper::started_as_helper(argv.next().as_ref()) {
        raise_open_files_limit();
        return mount_helper::main(argv.map(|a| a.to_string_lossy().into_owned()).collect());
    }
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    errors::set_command(command_name(&matches));
    raise_open_files_limit();
    // `weft key` makes and reads key files; it connects nowhere (and may be making the very
    // file WEFT_KEY_FILE names).
    let makes_keys = matches!(cli.command, Command::Key(_));
    if let Err(e) = key::use_key(cli.key.as_deref()).or_else(|e| if makes_keys { Ok(()) } else { Err(e) }) {
        errors::report(&e);
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Key(a) => key::key(a),
        Command::Up(a) => up::up(a),
        Command::Down(a) => up::down(a),
        Command::Status(a) => up::status(a),
        Command::Server(a) => up::server(a.config),
        Command::Mount(a) => mount::mount(a),
        Command::Umount(a) => mount::umount(a),
        Command::Setstripe(a) => lfs::setstripe(a),
        Command::Getstripe(a) => lfs::getstripe(a),
        Command::Df(a) => lfs::df(a),
        Command::Mkdir(a) => dirstripe::setdirstripe(a),
        Command::Getdirstripe(a) => dirstripe::getdirstripe(a),
        Command::Mdts(a) => dirstripe::mdts(a),
        Command::Path2fid(a) => lfs::path2fid(a),
        Command::Fid2path(a) => lfs::fid2path(a),
        Command::Bench(a) => bench::bench(a),
        Command::SetParam(a) => param::set_param(a),
        Command::GetParam(a) => param::get_param(a),
        Command::ListParam(a) => param::list_param(a),
        Command::Stats(a) => stats::stats(a),
        Command::Hsm(a) => hsm::hsm(a),
        Command::Project(a) => project::project(a),
        Command::Quota(a) => quota::quota(a),
        Command::Setquota(a) => quota::setquota(a),
        Command::Pcc(a) => pcc::pcc(a),
        Command::Pool(a) => pool::pool(a),
        Command::Nodemap(a) => nodemap::nodemap(a),
        Command::Failover(a) => failover::failover(a),
        Command::DelOst(a) => del_ost::del_ost(a),
        Command::Replica(a) => members::replica(a),
        Command::Find(a) => find::find(a),
        Command::Migrate(a) => migrate::migrate(a),
        Command::Mirror(a) => mirror::mirror(a),
        Command::Copytool(a) => copytool::copytool(a),
        Command::Policy(a) => policy::policy(a),
        Command::Changelog(a) => changelog::read(a),
        Command::ChangelogRegister(a) => changelog::register(a),
        Command::ChangelogDeregister(a) => changelog::deregister(a),
        Command::ChangelogClear(a) => changelog::clear(a),
        Command::ChangelogUsers(a) => changelog::users(a),
        Command::Top(a) => stats::top(a),
        Command::Qos(a) => qos::qos(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errors::report(&e);
            ExitCode::FAILURE
        }
    }
}
