//! The token bucket filter's decisions, as pure logic over an injected clock (nanoseconds
//! from any origin): which class a request belongs to, whether it may start now, and which
//! waiting request starts next. The policy in [`super`] drives it from a task with real
//! time; the tests here drive it with made-up time. The rule list's commands (start,
//! change, stop) are in `core/rule_list.rs`, global rules' demand and shares in
//! `core/global.rs`.
//!
//! **Classes and buckets.** A request's class is its values of the fields the policy's type
//! names ([`TbfType`]); a class takes the first rule that matches it and holds a bucket of
//! that rule's rate, `depth` tokens deep (Lustre's `tbf_depth`), and a FIFO queue. The
//! bucket is kept as a theoretical arrival time (GCRA): the class may start a request while
//! `tat - now <= (depth - 1) / rate`, and each start moves `tat` on by `1 / rate` from
//! `max(tat, now)`. A byte rate (`bps=`) is a second such bucket whose step is the request's
//! bytes over the rate; a request larger than the burst goes once the bucket is full and
//! leaves it in deficit, so large requests are paced as well as small ones.
//!
//! **One limit per server.** There is one such scheduler per service of a server process,
//! not one per CPU partition as in Lustre, whose rates multiply by the number of partitions
//! (LU-17158).
//!
//! **Running requests.** At most `running_max` granted requests run at once under this
//! policy (Lustre's service threads are its bound): past it, even a class with tokens waits,
//! and that is what "the server is saturated" means below.
//!
//! **Hard token compensation** (`realtime=1`, Lustre's LU-9228): a backlogged class that was
//! due but waited because the server was saturated keeps the time it missed, so it is
//! served first, and faster than its rate, until it has caught up; the time kept is bounded
//! by `compensation_max_ns`, so a long saturation does not end in a flood. Without it the
//! missed time is lost, as in Lustre's default.
//!
//! **Dependent rules** (`depends=OTHER`, from the research on TBF): the rule's rate is what
//! it shares with rule OTHER, less what OTHER's classes were measured to start over the last
//! second (a sliding window), and at least 1: a job runs at what a more important one
//! leaves, and at the whole rate while that one is idle.
//!
//! **Global rules** (`global=1`): the rate is for the whole file system; the management
//! service divides it among the servers by their demand ([`Tbf::global_demands`], answered
//! with [`Tbf::set_shares`]), and this server's share is the rule's rate here, for each of
//! its classes (the division is by the rule's demand: one class per rule, a job, is exact).
//!
//! **Sharing spare capacity** (`share_spare`): TBF with fixed rates leaves the server idle
//! while classes wait for tokens. With sharing on, whenever fewer than `running_max`
//! requests run and no class is due, a waiting class starts one more request beyond its
//! rate; the class chosen is the one with the least extra service per unit of its rate, so
//! what idle classes leave is shared among the busy ones in proportion to their rates.

use super::rule::{Expr, Facts, Limits, TbfType};
use crate::limits::{GLOBAL_REPORT_MS, TBF_CLASSES_MAX, TBF_DEPTH_DEFAULT, TBF_EARLY_NS};
use std::collections::{HashMap, VecDeque};

mod global;
mod rule_list;

const NS_PER_S: u64 = 1_000_000_000;

/// The scheduler's settings (`nrs_tbf_*` parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Tokens a class may save up (its burst), at least 1.
    pub depth: u32,
    /// Requests granted by this policy running at once; None for no bound (then the server
    /// is never saturated as far as the scheduler knows, and spare capacity is not shared).
    pub running_max: Option<usize>,
    /// Share what idle classes leave among busy ones, in proportion to their rates.
    pub share_spare: bool,
    /// How far behind a `realtime=1` class may fall and still catch up.
    pub compensation_max_ns: u64,
    /// How early a request may start before its class is due: the resolution of the timer
    /// that would wake it (tokio's is a millisecond, so a request due in a microsecond
    /// would otherwise wait a whole millisecond, and be counted as held, for nothing). The
    /// schedule is kept (a start moves the class on from its due time, not from now), so
    /// rates hold over any longer time.
    pub early_ns: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            depth: TBF_DEPTH_DEFAULT,
            running_max: None,
            share_spare: false,
            compensation_max_ns: NS_PER_S,
            early_ns: TBF_EARLY_NS,
        }
    }
}

/// A rule in force.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub expr: Expr,
    pub limits: Limits,
    /// The rule whose measured use this one's rate is reduced by.
    pub depends: Option<String>,
    id: u64,
    /// Requests its classes started, for rules that depend on it and for the demand of a
    /// global rule.
    meter: Meter,
    /// A global rule's share on this server (request and byte rate), once the management
    /// service divided it; until then the whole rate.
    share: Option<(u64, Option<u64>)>,
    /// A request of its classes waited since the last demand report.
    waited: bool,
    /// The last demand report said the rule was idle here: a request that waits now asks
    /// for a report at once ([`Tbf::take_report_wanted`]), not at the next interval.
    reported_idle: bool,
}

/// Requests per second over the last second: the count of the current one-second window,
/// plus the previous window's in proportion to how much of the last second it covers.
#[derive(Debug, Clone, Copy, Default)]
struct Meter {
    window: u64,
    current: u64,
    previous: u64,
}

impl Meter {
    fn roll(&mut self, now: u64) {
        let window = now / NS_PER_S;
        if window == self.window {
            return;
        }
        self.previous = if window == self.window + 1 { self.current } else { 0 };
        self.current = 0;
        self.window = window;
    }

    fn record(&mut self, now: u64) {
        self.roll(now);
        self.current += 1;
    }

    fn rate(&self, now: u64) -> u64 {
        let window = now / NS_PER_S;
        let (current, previous) = match window.checked_sub(self.window) {
            Some(0) => (self.current, self.previous),
            Some(1) => (0, self.current),
            _ => (0, 0),
        };
        let into = now % NS_PER_S;
        current + u64::try_from(u128::from(previous) * u128::from(NS_PER_S - into) / u128::from(NS_PER_S)).unwrap_or(0)
    }
}

/// What happened to a class's requests, for an admin who wants to see who hit a limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Requests started.
    pub started: u64,
    /// Of those, how many waited for the class's tokens or a running slot.
    pub held: u64,
    /// Bytes of the started requests.
    pub bytes: u64,
    /// Total and longest wait of the held ones.
    pub waited_ns: u64,
    pub waited_max_ns: u64,
    /// Requests started beyond the rate, from spare capacity.
    pub extra: u64,
}

/// One class as a listing shows it.
#[derive(Debug, Clone)]
pub struct ClassView {
    pub key: Facts,
    pub rule: String,
    pub queued: usize,
    pub stats: ClassStats,
}

struct Waiting<T> {
    item: T,
    bytes: u64,
    since: u64,
}

struct Class<T> {
    key: Facts,
    /// The rule's id, and the rule list's generation it was matched in.
    rule_id: u64,
    matched_gen: u64,
    tat: u64,
    tat_bytes: u64,
    queue: VecDeque<Waiting<T>>,
    /// Extra service received, in nanoseconds of the class's rate (for sharing).
    vtime: u64,
    last_seen: u64,
    stats: ClassStats,
}

/// What to do next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<T> {
    /// Start this request.
    Run(T),
    /// Nothing may start before this time (unless a request arrives or one finishes).
    At(u64),
    /// Nothing waits, or the server is saturated: nothing to do until a request arrives
    /// or one finishes.
    Idle,
}

/// The token bucket filter of one service; see the module documentation.
pub struct Tbf<T> {
    ty: TbfType,
    options: Options,
    /// Highest priority first; the default rule last.
    rules: Vec<Rule>,
    rules_gen: u64,
    next_rule_id: u64,
    classes: HashMap<Facts, usize>,
    slots: Vec<Option<Class<T>>>,
    free_slots: Vec<usize>,
    running: usize,
    /// Requests waiting, over all classes.
    queued: usize,
    /// A global rule's request waits on this server, which last reported the rule idle.
    report_wanted: bool,
}

pub const DEFAULT_RULE: &str = "default";

impl<T> Tbf<T> {
    pub fn new(ty: TbfType, options: Options) -> Tbf<T> {
        let default = Rule {
            name: DEFAULT_RULE.into(),
            expr: Expr::everything(),
            limits: Limits::default(),
            depends: None,
            id: 0,
            meter: Meter::default(),
            share: None,
            waited: false,
            reported_idle: false,
        };
        Tbf {
            ty,
            options: Options { depth: options.depth.max(1), ..options },
            rules: vec![default],
            rules_gen: 0,
            next_rule_id: 1,
            classes: HashMap::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            running: 0,
            queued: 0,
            report_wanted: false,
        }
    }

    pub fn ty(&self) -> TbfType {
        self.ty
    }

    pub fn options(&self) -> Options {
        self.options
    }

    pub fn set_options(&mut self, options: Options) {
        self.options = Options { depth: options.depth.max(1), ..options };
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// A request of `bytes` arrives: `Some(item)` to start it now, or None when it waits
    /// (it comes out of [`Tbf::next`] later).
    pub fn arrive(&mut self, now: u64, facts: &Facts, bytes: u64, item: T) -> Option<T> {
        let key = facts.key(&self.ty);
        let mut item = Some(item);
        let started = self.arrive_keyed(now, &key, bytes, || item.take().expect("made once"));
        if started {
            item
        } else {
            None
        }
    }

    /// As [`Tbf::arrive`] for a class key made by the caller (the facts of the type's fields
    /// only, see [`Facts::key`]); `waiter` is made only when the request waits. True when
    /// it starts now.
    pub fn arrive_keyed(&mut self, now: u64, key: &Facts, bytes: u64, waiter: impl FnOnce() -> T) -> bool {
        let slot = self.class_of(now, key);
        // With running slots bounded, a slot that frees goes to the waiting class furthest
        // behind ([`Tbf::next`]), not to whoever arrives at that moment.
        let may_start = !self.saturated() && (self.options.running_max.is_none() || self.queued == 0);
        let (limits, depth) = (self.class_limits(slot, now), self.options.depth);
        let class = self.slots[slot].as_mut().expect("a live class");
        class.last_seen = now;
        if class.queue.is_empty() && may_start && due(class, &limits, depth) <= now + self.options.early_ns {
            charge(class, &limits, now, bytes, 0);
            self.count_start(slot, now, bytes);
            return true;
        }
        let newly_backlogged = class.queue.is_empty();
        let floor = if newly_backlogged { self.min_backlogged_vtime(slot) } else { 0 };
        let class = self.slots[slot].as_mut().expect("a live class");
        // Newly backlogged: no extra service saved up from its idle time.
        class.vtime = class.vtime.max(floor);
        class.queue.push_back(Waiting { item: waiter(), bytes, since: now });
        let id = class.rule_id;
        self.queued += 1;
        if let Some(rule) = self.rules.iter_mut().find(|r| r.id == id) {
            rule.waited = true;
            if rule.limits.global && rule.reported_idle {
                // It holds the small share of an idle server: a job has just come here.
                rule.reported_idle = false;
                self.report_wanted = true;
            }
        }
        false
    }

    /// A started request finished (its running slot is free).
    pub fn finished(&mut self) {
        self.running = self.running.saturating_sub(1);
    }

    pub fn running(&self) -> usize {
        self.running
    }

    fn saturated(&self) -> bool {
        self.options.running_max.is_some_and(|max| self.running >= max)
    }

    /// The next request to start, or when to ask again.
    pub fn next(&mut self, now: u64) -> Next<T> {
        if self.saturated() {
            return Next::Idle;
        }
        let depth = self.options.depth;
        // Among the classes whose head may start, the one furthest behind its schedule
        // (the smallest theoretical arrival time: a class that lagged goes before one that
        // merely saved up a burst); else the time the first becomes due. An O(classes
        // waiting) scan: they are the jobs with requests queued on this service, a handful
        // to hundreds.
        let mut ready: Option<(u64, usize)> = None;
        let mut when = u64::MAX;
        for (slot, class) in self.slots.iter().enumerate() {
            let Some(class) = class else { continue };
            if class.queue.is_empty() {
                continue;
            }
            let d = due(class, &self.class_limits(slot, now), depth);
            if d <= now + self.options.early_ns {
                let behind = class.tat.max(class.tat_bytes);
                if ready.is_none_or(|(b, _)| behind < b) {
                    ready = Some((behind, slot));
                }
            } else {
                when = when.min(d - self.options.early_ns);
            }
        }
        if let Some((_, slot)) = ready {
            return Next::Run(self.start_head(slot, now, false));
        }
        if when == u64::MAX {
            return Next::Idle;
        }
        if self.options.share_spare && self.options.running_max.is_some() {
            // Spare capacity: the backlogged class with the least extra service per rate.
            let pick = self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(s, c)| c.as_ref().filter(|c| !c.queue.is_empty()).map(|c| (c.vtime, s)))
                .min();
            if let Some((_, slot)) = pick {
                return Next::Run(self.start_head(slot, now, true));
            }
        }
        Next::At(when)
    }

    fn start_head(&mut self, slot: usize, now: u64, extra: bool) -> T {
        let limits = self.class_limits(slot, now);
        let comp = if limits.realtime { self.options.compensation_max_ns } else { 0 };
        let class = self.slots[slot].as_mut().expect("a live class");
        let head = class.queue.pop_front().expect("a waiting request");
        self.queued -= 1;
        if extra {
            class.vtime += NS_PER_S / limits.rate.max(1);
            class.stats.extra += 1;
        } else {
            charge(class, &limits, now, head.bytes, comp);
        }
        let waited = now.saturating_sub(head.since);
        class.stats.held += 1;
        class.stats.waited_ns += waited;
        class.stats.waited_max_ns = class.stats.waited_max_ns.max(waited);
        self.count_start(slot, now, head.bytes);
        head.item
    }

    /// Counts a request of the class in `slot` as started: its statistics, the running
    /// requests, and its rule's meter (what dependent rules follow).
    fn count_start(&mut self, slot: usize, now: u64, bytes: u64) {
        let class = self.slots[slot].as_mut().expect("a live class");
        class.stats.started += 1;
        class.stats.bytes += bytes;
        class.last_seen = now;
        let id = class.rule_id;
        self.running += 1;
        if let Some(rule) = self.rules.iter_mut().find(|r| r.id == id) {
            rule.meter.record(now);
        }
    }

    fn min_backlogged_vtime(&self, except: usize) -> u64 {
        self.slots
            .iter()
            .enumerate()
            .filter(|(s, _)| *s != except)
            .filter_map(|(_, c)| c.as_ref().filter(|c| !c.queue.is_empty()).map(|c| c.vtime))
            .min()
            .unwrap_or(0)
    }

    /// The limits of the class in `slot` at `now`: its rule's, with a dependent rule's rate
    /// less what the rule it depends on used over the last second.
    fn class_limits(&self, slot: usize, now: u64) -> Limits {
        let id = self.slots[slot].as_ref().expect("a live class").rule_id;
        let Some(rule) = self.rules.iter().find(|r| r.id == id) else { return Limits::default() };
        let mut limits = rule.limits;
        if let Some((rate, bps)) = rule.share.filter(|_| rule.limits.global) {
            limits.rate = rate;
            limits.bps = bps;
        }
        if let Some(other) = rule.depends.as_deref().and_then(|d| self.rules.iter().find(|r| r.name == d)) {
            limits.rate = limits.rate.saturating_sub(other.meter.rate(now)).max(1);
        }
        limits
    }

    /// The class of `key`, made (and matched to a rule) if new, matched again if the rules
    /// changed since.
    fn class_of(&mut self, now: u64, key: &Facts) -> usize {
        let slot = match self.classes.get(key) {
            Some(&slot) => slot,
            None => {
                if self.classes.len() >= TBF_CLASSES_MAX {
                    self.forget_idle_classes();
                }
                let class = Class {
                    key: key.clone(),
                    rule_id: u64::MAX,
                    matched_gen: u64::MAX,
                    tat: 0,
                    tat_bytes: 0,
                    queue: VecDeque::new(),
                    vtime: 0,
                    last_seen: now,
                    stats: ClassStats::default(),
                };
                let slot = match self.free_slots.pop() {
                    Some(s) => {
                        self.slots[s] = Some(class);
                        s
                    }
                    None => {
                        self.slots.push(Some(class));
                        self.slots.len() - 1
                    }
                };
                self.classes.insert(key.clone(), slot);
                slot
            }
        };
        let class = self.slots[slot].as_mut().expect("a live class");
        if class.matched_gen != self.rules_gen {
            class.rule_id = self.rules.iter().find(|r| r.expr.matches(&class.key)).map_or(0, |r| r.id);
            class.matched_gen = self.rules_gen;
        }
        slot
    }

    /// Drops the half of the idle classes seen longest ago (the class table is bounded, as
    /// Lustre's `tbf_jobid_cache_size`).
    fn forget_idle_classes(&mut self) {
        let mut idle: Vec<(u64, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(s, c)| c.as_ref().filter(|c| c.queue.is_empty()).map(|c| (c.last_seen, s)))
            .collect();
        idle.sort_unstable();
        for (_, slot) in idle.iter().take(idle.len().div_ceil(2)) {
            if let Some(class) = self.slots[*slot].take() {
                self.classes.remove(&class.key);
                self.free_slots.push(*slot);
            }
        }
    }

    /// Every class, for listings and statistics.
    pub fn classes(&self) -> Vec<ClassView> {
        self.slots
            .iter()
            .flatten()
            .map(|c| ClassView {
                key: c.key.clone(),
                rule: self.rules.iter().find(|r| r.id == c.rule_id).map_or_else(String::new, |r| r.name.clone()),
                queued: c.queue.len(),
                stats: c.stats,
            })
            .collect()
    }

    /// Every waiting request, the scheduler done with (a policy switched away from lets
    /// them all go).
    pub fn into_waiting(self) -> Vec<T> {
        self.slots.into_iter().flatten().flat_map(|c| c.queue.into_iter().map(|w| w.item)).collect()
    }

    /// Requests waiting, over all classes.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// The rule list in Lustre's shape (`NAME EXPR RATE, ref N`, one block: one partition),
    /// with Weft's byte rate and realtime flag after it.
    pub fn listing(&self) -> String {
        let mut out = String::from("regular_requests:\nCPT 0:\n");
        for r in &self.rules {
            let refs =
                self.slots.iter().flatten().filter(|c| c.rule_id == r.id && c.matched_gen == self.rules_gen).count();
            out.push_str(&format!("{} {} {}, ref {refs}", r.name, r.expr, r.limits.rate));
            if let Some(bps) = r.limits.bps {
                out.push_str(&format!(", bps {bps}"));
            }
            if r.limits.realtime {
                out.push_str(", realtime 1");
            }
            if let Some(d) = &r.depends {
                out.push_str(&format!(", depends {d}"));
            }
            if r.limits.global {
                let share = r.share.map_or(r.limits.rate, |(rate, _)| rate);
                out.push_str(&format!(", global 1, share {share}"));
            }
            out.push('\n');
        }
        out
    }
}

/// When the class's head request conforms to both buckets.
fn due<T>(class: &Class<T>, limits: &Limits, depth: u32) -> u64 {
    let step = NS_PER_S / limits.rate.max(1);
    let mut tau = step * u64::from(depth - 1);
    // The byte bucket's burst: `depth - 1` tenths of a second of the byte rate. A request
    // goes when the bucket is that full, whatever its size, and may leave it in deficit.
    let mut tau_b = NS_PER_S / 10 * u64::from(depth - 1);
    if limits.global {
        // A global rule's share may be saved up for one report interval: a job whose
        // requests move from server to server faster than the division follows (one
        // writer over 1 MiB stripes) finds on each what the share there saved while it was
        // elsewhere, and gets its whole rate, not the share of the server it is on. The
        // shares add up to the rate, so what all servers save adds up to one interval of it.
        let interval = GLOBAL_REPORT_MS * 1_000_000;
        tau = tau.max(interval.saturating_sub(step));
        tau_b = tau_b.max(interval);
    }
    let mut when = class.tat.saturating_sub(tau);
    if limits.bps.is_some() {
        when = when.max(class.tat_bytes.saturating_sub(tau_b));
    }
    when
}

/// Takes a request's tokens. `comp`: how far behind `now` a realtime class that waited may
/// keep its schedule (0: missed time is lost, and always for a request that did not wait).
fn charge<T>(class: &mut Class<T>, limits: &Limits, now: u64, bytes: u64, comp: u64) {
    let floor = now.saturating_sub(comp);
    class.tat = class.tat.max(floor) + NS_PER_S / limits.rate.max(1);
    if let Some(bps) = limits.bps {
        let step = u64::try_from(u128::from(bytes) * u128::from(NS_PER_S) / u128::from(bps)).unwrap_or(u64::MAX / 2);
        class.tat_bytes = class.tat_bytes.max(floor).saturating_add(step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::tbf::rule::Command;

    const MS: u64 = 1_000_000;

    fn job(j: &str) -> Facts {
        Facts { jobid: j.into(), opcode: "ost_write".into(), ..Facts::default() }
    }

    fn tbf(rules: &[&str], options: Options) -> Tbf<u64> {
        let ty = TbfType::parse("jobid").unwrap();
        let mut t = Tbf::new(ty, options);
        for r in rules {
            t.command(Command::parse(r, &ty).unwrap()).unwrap();
        }
        t
    }

    /// A simulated server: each job keeps `outstanding` requests in flight (a new one
    /// arrives as one finishes), each taking `service_ns` once started. Returns the
    /// requests each job completed in `secs`.
    fn simulate(t: &mut Tbf<u64>, jobs: &[(&str, usize, u64)], secs: u64) -> Vec<u64> {
        let mut done = vec![0u64; jobs.len()];
        let mut running: Vec<(u64, usize)> = Vec::new(); // (finish time, job)
        let end = secs * NS_PER_S;
        let mut now = 0u64;
        for (j, (name, outstanding, service)) in jobs.iter().enumerate() {
            for _ in 0..*outstanding {
                if t.arrive(now, &job(name), 4096, j as u64).is_some() {
                    running.push((now + service, j));
                }
            }
        }
        loop {
            let wake = loop {
                match t.next(now) {
                    Next::Run(j) => running.push((now + jobs[j as usize].2, j as usize)),
                    Next::At(at) => break at,
                    Next::Idle => break u64::MAX,
                }
            };
            let finish = running.iter().map(|(f, _)| *f).min().unwrap_or(u64::MAX);
            now = wake.min(finish);
            if now >= end {
                return done;
            }
            // Finish what is due; each finished request is followed by the next of its job.
            let mut i = 0;
            while i < running.len() {
                if running[i].0 <= now {
                    let (_, j) = running.swap_remove(i);
                    t.finished();
                    done[j] += 1;
                    if t.arrive(now, &job(jobs[j].0), 4096, j as u64).is_some() {
                        running.push((now + jobs[j].2, j));
                    }
                } else {
                    i += 1;
                }
            }
        }
    }

    /// Exact times, as if a timer could wake the dispatcher at any nanosecond.
    const EXACT: Options = Options {
        depth: TBF_DEPTH_DEFAULT,
        running_max: None,
        share_spare: false,
        compensation_max_ns: NS_PER_S,
        early_ns: 0,
    };

    #[test]
    fn a_burst_of_depth_then_the_rate() {
        let mut t = tbf(&["start slow jobid={dd.0} rate=10"], EXACT);
        let f = job("dd.0");
        // Three tokens saved up (the default depth) start at once; the fourth waits 100 ms.
        for i in 0..3 {
            assert_eq!(t.arrive(0, &f, 0, i), Some(i), "request {i} is within the burst");
        }
        assert_eq!(t.arrive(0, &f, 0, 3), None);
        assert_eq!(t.next(0), Next::At(100 * MS));
        assert_eq!(t.next(100 * MS), Next::Run(3));
        assert_eq!(t.next(100 * MS), Next::Idle);
        let v = &t.classes()[0];
        assert_eq!((v.rule.as_str(), v.stats.started, v.stats.held, v.stats.waited_ns), ("slow", 4, 1, 100 * MS));
    }

    #[test]
    fn two_jobs_get_their_rates_two_to_one() {
        let mut t = tbf(&["start a jobid={a} rate=100", "start b jobid={b} rate=50"], Options::default());
        let done = simulate(&mut t, &[("a", 8, MS), ("b", 8, MS)], 30);
        // 30 s at 100/s and 50/s, plus the initial burst.
        assert!((3000..=3003).contains(&done[0]), "{done:?}");
        assert!((1500..=1503).contains(&done[1]), "{done:?}");
    }

    #[test]
    fn a_class_alone_gets_its_rate_exactly_and_the_default_rule_the_rest() {
        let mut t = tbf(&["start a jobid={a} rate=100"], Options::default());
        let done = simulate(&mut t, &[("a", 4, MS)], 10);
        assert!((1000..=1003).contains(&done[0]), "{done:?}");
        // An unmatched job falls to the default rule (10000/s), here bounded by 1 ms service
        // with 4 outstanding: 4000/s.
        let done = simulate(&mut t, &[("other", 4, MS)], 1);
        assert!((3990..=4000).contains(&done[0]), "{done:?}");
    }

    #[test]
    fn each_matching_class_gets_the_rate_not_the_set() {
        let mut t = tbf(&["start dd jobid={dd.*} rate=50"], Options::default());
        let done = simulate(&mut t, &[("dd.0", 4, MS), ("dd.1", 4, MS)], 10);
        assert!(done.iter().all(|d| (500..=503).contains(d)), "{done:?}");
    }

    #[test]
    fn spare_capacity_is_shared_in_proportion_to_the_rates_when_sharing_is_on() {
        // A server that runs 4 requests of 1 ms at once: 4000/s.
        let opts = Options { running_max: Some(4), share_spare: true, ..Options::default() };
        let rules = ["start a jobid={a} rate=100", "start b jobid={b} rate=50"];
        let done = simulate(&mut tbf(&rules, opts), &[("a", 8, MS), ("b", 8, MS)], 10);
        let total = done[0] + done[1];
        assert!(total >= 39_000, "the server stays busy: {done:?}");
        let ratio = done[0] as f64 / done[1] as f64;
        assert!((1.9..=2.1).contains(&ratio), "2:1 of the whole: {done:?}");
        // With b idle, a takes all of it.
        let done = simulate(&mut tbf(&rules, opts), &[("a", 8, MS)], 10);
        assert!(done[0] >= 39_000, "{done:?}");
        // Sharing off: a gets exactly its rate while the server idles.
        let done = simulate(&mut tbf(&rules, Options { share_spare: false, ..opts }), &[("a", 8, MS)], 10);
        assert!((1000..=1003).contains(&done[0]), "{done:?}");
    }

    #[test]
    fn hard_token_compensation_gives_back_what_saturation_took_and_no_more() {
        // One running slot; a "hog" job starts a 500 ms request once a second, so half the
        // time the server is saturated and a's due requests wait for the slot.
        let run = |realtime: bool| {
            let rt = if realtime { " realtime=1" } else { "" };
            let opts = Options { running_max: Some(1), ..Options::default() };
            let mut t = tbf(&[&format!("start a jobid={{a}} rate=100{rt}"), "start hog jobid={hog} rate=1"], opts);
            simulate(&mut t, &[("a", 8, MS), ("hog", 1, 500 * MS)], 10)
        };
        let plain = run(false);
        let compensated = run(true);
        assert!(plain[0] < 700, "without compensation a loses what it missed: {plain:?}");
        assert!(compensated[0] >= 950, "with it a gets its rate back: {compensated:?} (plain {plain:?})");
        assert!(compensated[0] <= 1003, "and no more than its rate: {compensated:?}");
        assert!(compensated[1] >= 9, "the hog still gets its turns: {compensated:?}");
    }

    #[test]
    fn a_dependent_rule_gets_what_the_other_leaves() {
        let rules = ["start a jobid={a} rate=60", "start b jobid={b} rate=100 depends=a"];
        let done = simulate(&mut tbf(&rules, Options::default()), &[("a", 8, MS), ("b", 8, MS)], 10);
        assert!((595..=610).contains(&done[0]), "a at its own rate: {done:?}");
        assert!((360..=440).contains(&done[1]), "b at 100 less a's 60: {done:?}");
        let done = simulate(&mut tbf(&rules, Options::default()), &[("b", 8, MS)], 10);
        assert!((990..=1010).contains(&done[0]), "b alone at the whole 100: {done:?}");
        let mut t = tbf(&rules, Options::default());
        assert!(t.listing().contains("b jobid={b} 100, ref 0, depends a"), "{}", t.listing());
        let ty = t.ty();
        let e = t.command(Command::parse("stop a", &ty).unwrap()).unwrap_err();
        assert!(e.contains("'b' depends on 'a'"), "{e}");
        let e = t.command(Command::parse("start c jobid={c} depends=nosuch", &ty).unwrap()).unwrap_err();
        assert!(e.contains("depends=nosuch"), "{e}");
    }

    #[test]
    fn compensation_is_bounded() {
        let opts = Options { running_max: Some(1), compensation_max_ns: 100 * MS, ..Options::default() };
        let mut t = tbf(&["start a jobid={a} rate=100 realtime=1"], opts);
        let f = job("a");
        // A long request holds the only slot for 5 s while a's requests queue up.
        t.arrive(0, &job("long"), 0, 99).expect("the slot is free");
        for i in 0..1000 {
            assert_eq!(t.arrive(0, &f, 0, i), None);
        }
        t.finished();
        let now = 5 * NS_PER_S;
        let mut at_once = 0;
        while let Next::Run(_) = t.next(now) {
            at_once += 1;
            t.finished();
        }
        // 100 ms kept at 100/s: 10 catch-up requests plus the burst, not 500.
        assert!((10..=13).contains(&at_once), "{at_once}");
    }

    #[test]
    fn a_request_due_within_the_timers_resolution_starts_now_and_the_rate_holds() {
        // 100,000/s with a burst of 3: requests that come a few at a time are due within
        // microseconds; a timer would hold each for a millisecond.
        let mut t = tbf(&["start fast jobid={a} rate=100000"], Options::default());
        let f = job("a");
        for i in 0..50 {
            assert_eq!(t.arrive(0, &f, 0, i), Some(i), "request {i}: due within a millisecond");
        }
        assert_eq!(t.classes()[0].stats.held, 0);
        // Past a millisecond's worth (100 requests) they wait, and over a second the rate is
        // kept: 100,000 and the burst and one millisecond's start early.
        let mut started = 50u64;
        let mut i = 50;
        let mut now = 0;
        while now < NS_PER_S {
            while t.arrive(now, &f, 0, i).is_some() {
                started += 1;
                i += 1;
            }
            i += 1;
            loop {
                match t.next(now) {
                    Next::Run(_) => started += 1,
                    Next::At(at) => {
                        now = at.max(now + 1);
                        break;
                    }
                    Next::Idle => unreachable!("a request waits"),
                }
            }
        }
        assert!((100_000..=100_104).contains(&started), "{started}");
    }

    #[test]
    fn byte_rates_pace_large_requests() {
        let mut t = tbf(&["start big jobid={a} bps=10M"], EXACT);
        let f = job("a");
        let mb4 = 4 << 20;
        assert!(t.arrive(0, &f, mb4, 1).is_some(), "a full bucket lets one large request go");
        assert!(t.arrive(0, &f, mb4, 2).is_none());
        // The first 4 MiB at 10 MiB/s took 400 ms of the bucket; the burst is 0.2 s.
        let Next::At(at) = t.next(0) else { panic!() };
        assert_eq!(at, 400 * MS - 200 * MS);
        let mut started = 2;
        let mut now = at;
        while now < 10 * NS_PER_S {
            match t.next(now) {
                Next::Run(_) => {
                    started += 1;
                    t.arrive(now, &f, mb4, started);
                }
                Next::At(a) => now = a,
                Next::Idle => break,
            }
        }
        // 10 s at 10 MiB/s of 4 MiB requests: 25, plus the burst.
        assert!((25..=27).contains(&started), "{started}");
    }

    #[test]
    fn rules_change_rank_and_stop_and_classes_follow() {
        let mut t = tbf(&["start a jobid={a} rate=10"], Options::default());
        let f = job("a");
        for i in 0..3 {
            t.arrive(0, &f, 0, i);
        }
        assert_eq!(t.arrive(0, &f, 0, 3), None);
        let ty = t.ty();
        t.command(Command::parse("change a rate=1000", &ty).unwrap()).unwrap();
        // The new rate applies from the class's schedule on.
        assert!(t.listing().contains("a jobid={a} 1000, ref"), "{}", t.listing());
        t.command(Command::parse("start all jobid={*} rate=5", &ty).unwrap()).unwrap();
        t.command(Command::parse("change a rank=all", &ty).unwrap()).unwrap();
        let names: Vec<&str> = t.rules().iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["a", "all", "default"]);
        t.command(Command::parse("stop a", &ty).unwrap()).unwrap();
        t.arrive(NS_PER_S, &job("a"), 0, 9);
        assert_eq!(t.classes()[0].rule, "all", "re-matched after the rule went");
        assert_eq!(
            t.listing(),
            "regular_requests:\nCPT 0:\nall jobid={*} 5, ref 1\ndefault * 10000, ref 0\n",
            "Lustre's shape"
        );
        let e = t.command(Command::parse("stop default", &ty).unwrap()).unwrap_err();
        assert!(e.contains("cannot be stopped"), "{e}");
        let e = t.command(Command::parse("stop nosuch", &ty).unwrap()).unwrap_err();
        assert!(e.contains("the rules are all, default"), "{e}");
        let e = t.command(Command::parse("start all jobid={x}", &ty).unwrap()).unwrap_err();
        assert!(e.contains("exists already"), "{e}");
        t.command(Command::parse("start all jobid={*} rate=5", &ty).unwrap())
            .expect("the same rule again is no change");
        let e = t.command(Command::parse("change all rank=nosuch", &ty).unwrap()).unwrap_err();
        assert!(e.contains("rank=nosuch"), "{e}");
        assert_eq!(t.rules().len(), 2, "a failed move keeps the rule");
    }

    #[test]
    fn the_class_table_is_bounded() {
        let mut t: Tbf<u64> = tbf(&[], Options::default());
        for i in 0..(TBF_CLASSES_MAX as u64 * 2) {
            t.arrive(i, &job(&format!("j{i}")), 0, i);
        }
        assert!(t.classes().len() <= TBF_CLASSES_MAX);
    }

    #[test]
    fn a_saturated_server_starts_nothing_until_a_request_finishes() {
        let opts = Options { running_max: Some(2), ..Options::default() };
        let mut t = tbf(&[], opts);
        let f = job("a");
        assert!(t.arrive(0, &f, 0, 1).is_some());
        assert!(t.arrive(0, &f, 0, 2).is_some());
        assert_eq!(t.arrive(0, &f, 0, 3), None);
        assert_eq!(t.next(0), Next::Idle);
        t.finished();
        assert_eq!(t.next(0), Next::Run(3));
        assert_eq!(t.queued(), 0);
    }

    /// Two servers with the same rule; a job keeps 8 requests in flight (1 ms each) on each
    /// server where its files are: on the first for 10 s, on both for 10 s, on the second
    /// for 10 s. Each server reports its demand once a second (half a second apart) to the
    /// management service's division. Returns the requests started per second, over all
    /// servers, in each phase's last 7 s.
    fn two_servers(rule: &str) -> [u64; 3] {
        use weft_mgs::qos::GlobalTable;
        use weft_proto::msg::Service;
        let mut servers = [tbf(&[rule], Options::default()), tbf(&[rule], Options::default())];
        let mut table = GlobalTable::default();
        let mut in_flight = [0usize; 2];
        let mut running: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        let mut started = [0u64; 30];
        let f = job("ckpt");
        for t in 0..30_000u64 {
            let now = t * MS;
            let second = (t / 1000) as usize;
            let files = match second {
                0..10 => [true, false],
                10..20 => [true, true],
                _ => [false, true],
            };
            for s in 0..2 {
                let server = &mut servers[s];
                let before = running[s].len();
                running[s].retain(|&finish| finish > now);
                for _ in running[s].len()..before {
                    server.finished();
                    in_flight[s] -= 1;
                }
                while files[s] && in_flight[s] < 8 {
                    in_flight[s] += 1;
                    if server.arrive(now, &f, 4096, 0).is_some() {
                        running[s].push(now + MS);
                        started[second] += 1;
                    }
                }
                while let Next::Run(_) = server.next(now) {
                    running[s].push(now + MS);
                    started[second] += 1;
                }
                if t % 1000 == 500 * s as u64 {
                    let demands = server.global_demands(now);
                    let shares = table.report(t, &format!("oss{s}"), Service::OstIo, &demands).unwrap();
                    server.set_shares(now, &shares);
                }
            }
        }
        let phase = |from: usize| started[from + 3..from + 10].iter().sum::<u64>() / 7;
        [phase(0), phase(10), phase(20)]
    }

    /// One writer, one request at a time (1 ms each), its file striped over two servers:
    /// `per_stripe` requests to one, then as many to the other, and so on; the servers report
    /// as in [`two_servers`]. Returns the requests started per second over seconds 5 to 25.
    fn striped_writer(rule: &str, per_stripe: u64) -> u64 {
        use weft_mgs::qos::GlobalTable;
        use weft_proto::msg::Service;
        let mut servers = [tbf(&[rule], Options::default()), tbf(&[rule], Options::default())];
        let mut table = GlobalTable::default();
        let f = job("ckpt");
        let (mut issued, mut started) = (0u64, 0u64);
        // The request in flight: its server, and when it finishes once started.
        let mut current: Option<(usize, Option<u64>)> = None;
        for t in 0..25_000u64 {
            let now = t * MS;
            if let Some((s, Some(finish))) = current {
                if finish <= now {
                    servers[s].finished();
                    current = None;
                }
            }
            if current.is_none() {
                let s = ((issued / per_stripe) % 2) as usize;
                issued += 1;
                let now_started = servers[s].arrive(now, &f, 65536, 0).is_some();
                current = Some((s, now_started.then_some(now + MS)));
                if servers[s].take_report_wanted() {
                    let demands = servers[s].global_demands(now);
                    let shares = table.report(t, &format!("oss{s}"), Service::OstIo, &demands).unwrap();
                    servers[s].set_shares(now, &shares);
                }
                started += u64::from(now_started && t >= 5_000);
            }
            for (s, server) in servers.iter_mut().enumerate() {
                while let Next::Run(_) = server.next(now) {
                    assert_eq!(current.map(|c| c.0), Some(s), "only the writer's request waits");
                    current = Some((s, Some(now + MS)));
                    started += u64::from(t >= 5_000);
                }
                if t % 1000 == 500 * s as u64 {
                    let demands = server.global_demands(now);
                    let shares = table.report(t, &format!("oss{s}"), Service::OstIo, &demands).unwrap();
                    server.set_shares(now, &shares);
                }
            }
        }
        started / 20
    }

    #[test]
    fn a_global_rule_holds_one_writer_moving_between_servers_faster_than_the_reports_to_its_rate() {
        // 64 KiB writes over 1 MiB stripes: 16 to a server, then the other, at 20/s: the
        // writer moves every 0.8 s, faster than the division follows. Before shares were
        // saved up, owed tokens rescaled, max-min fairness and reports at once from an idle
        // server: 17, 4 and 10 requests/s.
        for per_stripe in [1, 16, 64] {
            let rate = striped_writer("start g jobid={ckpt} rate=20 global=1", per_stripe);
            assert!((18..=22).contains(&rate), "{per_stripe} requests per stripe: {rate}/s for a rate of 20");
        }
    }

    #[test]
    fn a_global_rule_holds_a_job_to_its_rate_wherever_its_files_are() {
        let per_second = two_servers("start g jobid={ckpt} rate=100 global=1");
        for (phase, rate) in ["one server", "both", "the other"].iter().zip(per_second) {
            assert!((90..=110).contains(&rate), "files on {phase}: {rate}/s ({per_second:?})");
        }
        // The same rule per server: twice the rate while the files are on both.
        let per_server = two_servers("start g jobid={ckpt} rate=100");
        assert!((90..=110).contains(&per_server[0]) && per_server[1] >= 190, "{per_server:?}");
    }
}
