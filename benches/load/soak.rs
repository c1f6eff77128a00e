//! The soak (`make soak`, `WARDEN_BENCH_SOAK=<seconds>`): one `warden serve`
//! per database under steady load for a long time, watched for growth.
//!
//! The load alternates, in slices of [`SLICE`], between the two request
//! kinds that touch the most state: a message turn that calls
//! `order_status` (a new conversation each time, every order number drawn at
//! random, so each turn brings words, references and pattern questions the
//! server has not seen) and a contract test. After each slice it reads, from
//! /proc and the file system, what would grow if something were kept per
//! request: resident memory (VmRSS, now, not the peak), threads, open file
//! descriptors and the database's files on disk (which are meant to grow:
//! every turn and test is a stored record).
//!
//! The verdict compares resident memory once warm (the end of the first
//! minute) with the end, and fits a line through the second half of the
//! samples: a leak shows as a slope that does not flatten.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::load::{self, RequestSpec};

/// One slice of steady load between two readings (5 s in the quick mode,
/// which `make test` runs as a smoke).
pub fn slice(quick: bool) -> Duration {
    Duration::from_secs(if quick { 5 } else { 30 })
}
/// Connections during the soak (the targets are at 8).
const CONNECTIONS: usize = 8;
/// Largest slope of resident memory over the second half still called flat.
const FLAT_MIB_PER_MIN: f64 = 0.25;

/// What the server looked like after one slice.
#[derive(Clone, Debug)]
pub struct Sample {
    pub at: Duration,
    pub kind: &'static str,
    pub throughput: f64,
    pub p99_ms: f64,
    pub errors: u64,
    pub rss_mib: f64,
    pub threads: u64,
    pub fds: u64,
    /// The SQLite files (database and WAL); `None` on PostgreSQL.
    pub db_mib: Option<f64>,
}

/// One backend's soak.
pub struct Soak {
    pub backend: &'static str,
    pub duration: Duration,
    pub slice: Duration,
    pub samples: Vec<Sample>,
}

/// Loads `pid` with `turn` and `test` alternately for `duration`.
pub async fn run(
    backend: &'static str,
    pid: u32,
    specs: [(&'static str, RequestSpec); 2],
    duration: Duration,
    slice: Duration,
    sqlite_file: Option<&Path>,
    work: &Path,
) -> Soak {
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut turn = 0usize;
    println!(
        "soak ({backend}): {} s in {} s slices",
        duration.as_secs(),
        slice.as_secs()
    );
    while started.elapsed() < duration {
        let (kind, spec) = specs[turn % specs.len()].clone();
        let work = work.to_owned();
        let measured = tokio::task::spawn_blocking(move || {
            load::closed_loop(&spec, CONNECTIONS, slice, &work)
        })
        .await
        .unwrap();
        let sample = Sample {
            at: started.elapsed(),
            kind,
            throughput: measured.throughput,
            p99_ms: measured.p99_ms,
            errors: measured.errors,
            rss_mib: status_field(pid, "VmRSS:") / 1024.0,
            threads: status_field(pid, "Threads:") as u64,
            fds: std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|d| d.count() as u64)
                .unwrap_or(0),
            db_mib: sqlite_file.map(sqlite_mib),
        };
        println!("{}", line(&sample));
        samples.push(sample);
        turn += 1;
    }
    Soak {
        backend,
        duration,
        slice,
        samples,
    }
}

fn line(s: &Sample) -> String {
    format!(
        "  {:>5.0} s {:<15} {:>7.0} req/s p99 {:>7.2} ms errors {:>3}  RSS {:>6.1} MiB  threads {:>3}  fds {:>4}  db {}",
        s.at.as_secs_f64(),
        s.kind,
        s.throughput,
        s.p99_ms,
        s.errors,
        s.rss_mib,
        s.threads,
        s.fds,
        s.db_mib.map_or("–".into(), |m| format!("{m:.1} MiB")),
    )
}

/// A `kB` (or plain count) field of /proc/<pid>/status.
fn status_field(pid: u32, name: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status.lines().find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
        })
        .unwrap_or(0.0)
}

/// The database file and its WAL, in MiB.
fn sqlite_mib(file: &Path) -> f64 {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let wal = file.with_extension("db-wal");
    (size(file) + size(&wal)) as f64 / (1024.0 * 1024.0)
}

/// What the soak found, judged.
pub struct Verdict {
    pub warm_mib: f64,
    pub end_mib: f64,
    pub max_mib: f64,
    /// Least-squares slope of RSS over the second half, MiB per minute.
    pub slope_mib_per_min: f64,
    pub fds_start: u64,
    pub fds_end: u64,
    pub threads_max: u64,
    pub errors: u64,
    pub requests: f64,
}

impl Verdict {
    pub fn of(soak: &Soak) -> Option<Verdict> {
        let samples = &soak.samples;
        let last = samples.last()?;
        let warm = samples
            .iter()
            .find(|s| s.at >= Duration::from_secs(60))
            .unwrap_or(&samples[0]);
        let half = &samples[samples.len() / 2..];
        Some(Verdict {
            warm_mib: warm.rss_mib,
            end_mib: last.rss_mib,
            max_mib: samples.iter().map(|s| s.rss_mib).fold(0.0, f64::max),
            slope_mib_per_min: slope(half) * 60.0,
            fds_start: samples[0].fds,
            fds_end: last.fds,
            threads_max: samples.iter().map(|s| s.threads).max().unwrap_or(0),
            errors: samples.iter().map(|s| s.errors).sum(),
            requests: samples
                .iter()
                .map(|s| s.throughput * soak.slice.as_secs_f64())
                .sum(),
        })
    }

    /// Flat: the second half's slope is under [`FLAT_MIB_PER_MIN`] and no
    /// descriptor was left open per request.
    pub fn flat(&self) -> bool {
        self.slope_mib_per_min <= FLAT_MIB_PER_MIN && self.fds_end <= self.fds_start + 8
    }
}

/// MiB per second through `samples` (least squares).
fn slope(samples: &[Sample]) -> f64 {
    let n = samples.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let xs: Vec<f64> = samples.iter().map(|s| s.at.as_secs_f64()).collect();
    let mean_x = xs.iter().sum::<f64>() / n;
    let mean_y = samples.iter().map(|s| s.rss_mib).sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (x, s) in xs.iter().zip(samples) {
        num += (x - mean_x) * (s.rss_mib - mean_y);
        den += (x - mean_x) * (x - mean_x);
    }
    if den == 0.0 { 0.0 } else { num / den }
}

pub const BEGIN: &str =
    "<!-- load-soak:begin (generated by `make soak`; edit outside the markers) -->";
pub const END: &str = "<!-- load-soak:end -->";

/// The soak's section of docs/benchmarks.md.
pub fn markdown(soaks: &[Soak], load_before: &str, load_after: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Soak: {CONNECTIONS} connections, alternating {} s slices of `turn_1` and `capability_test`; \
         load average (1/5/15 min) {load_before} before, {load_after} after. \
         Flat means resident memory rises by at most {FLAT_MIB_PER_MIN} MiB/min over the second half \
         (least squares) and no file descriptor is left open per request.\n",
        soaks.first().map_or(0, |s| s.slice.as_secs())
    );
    s += "| db | duration | requests | errors | RSS warm (1 min) MiB | RSS end MiB | RSS max MiB | slope 2nd half MiB/min | fds start → end | threads max | flat |\n";
    s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for soak in soaks {
        let Some(v) = Verdict::of(soak) else {
            continue;
        };
        let _ = writeln!(
            s,
            "| {} | {} min | {:.0} | {} | {:.1} | {:.1} | {:.1} | {:+.3} | {} → {} | {} | {} |",
            soak.backend,
            soak.duration.as_secs() / 60,
            v.requests,
            v.errors,
            v.warm_mib,
            v.end_mib,
            v.max_mib,
            v.slope_mib_per_min,
            v.fds_start,
            v.fds_end,
            v.threads_max,
            if v.flat() { "yes" } else { "**no**" }
        );
    }
    for soak in soaks {
        let _ = writeln!(s, "\nSamples, {}:\n", soak.backend);
        s += "| at s | load | req/s | p99 ms | errors | RSS MiB | threads | fds | db files MiB |\n";
        s += "|---:|---|---:|---:|---:|---:|---:|---:|---:|\n";
        for x in &soak.samples {
            let _ = writeln!(
                s,
                "| {:.0} | {} | {:.0} | {:.2} | {} | {:.1} | {} | {} | {} |",
                x.at.as_secs_f64(),
                x.kind,
                x.throughput,
                x.p99_ms,
                x.errors,
                x.rss_mib,
                x.threads,
                x.fds,
                x.db_mib.map_or("–".into(), |m| format!("{m:.1}"))
            );
        }
    }
    s
}
