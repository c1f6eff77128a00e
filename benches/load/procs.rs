//! The processes under load and what /proc says about them: CPU time
//! (utime + stime of every thread) and peak resident memory (VmHWM, reset
//! before each run through `clear_refs`).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `cmd`'s process is killed by the kernel when the benchmark dies, even by
/// SIGKILL or Ctrl-C, where no `Drop` runs: a stopped `make bench` used to
/// leave `warden serve`, the endpoint, the relay and `wrk` loading the
/// machine. (The signal follows the spawning thread; every child here is
/// spawned from the main thread, which lives as long as the benchmark.)
pub fn dies_with_parent(cmd: &mut Command) -> &mut Command {
    // SAFETY: `prctl` is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// A child process killed when dropped, so a failed run leaves nothing behind.
pub struct Proc {
    pub name: String,
    child: Child,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts this bench binary again in a `role` (endpoint or relay); the
    /// child prints the port it bound as its first line.
    pub fn role(name: &str, args: &[&str]) -> (Proc, u16) {
        let exe = std::env::current_exe().expect("current exe");
        let mut child = dies_with_parent(&mut Command::new(exe))
            .arg("role")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn role");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("role's port");
        let port = line.trim().parse().expect("role printed its port");
        (
            Proc {
                name: name.into(),
                child,
            },
            port,
        )
    }

    /// `warden serve` on `database_url`, logging (its default level) to `log`.
    pub fn warden(exe: &Path, port: u16, database_url: &str, work: &Path, log: &Path) -> Proc {
        Self::warden_with(exe, port, database_url, work, log, &[])
    }

    /// `warden serve` with `extra` settings on top (the observed run's
    /// metrics listener and OTLP endpoint).
    pub fn warden_with(
        exe: &Path,
        port: u16,
        database_url: &str,
        work: &Path,
        log: &Path,
        extra: &[(&str, String)],
    ) -> Proc {
        Self::warden_under(&[], exe, port, database_url, work, log, extra)
    }

    /// `warden serve` run by `wrapper` (a program and its arguments, which
    /// execs `exe` in the same process: callgrind in `observed.rs`), or
    /// directly when `wrapper` is empty.
    pub fn warden_under(
        wrapper: &[String],
        exe: &Path,
        port: u16,
        database_url: &str,
        work: &Path,
        log: &Path,
        extra: &[(&str, String)],
    ) -> Proc {
        let cache = work.join("guest-cache");
        std::fs::create_dir_all(&cache).unwrap();
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(exe);
                command
            }
            None => Command::new(exe),
        };
        let child = dies_with_parent(&mut command)
            .arg("serve")
            .envs(warden_env(database_url))
            .env("WARDEN_LISTEN", format!("127.0.0.1:{port}"))
            .env("WARDEN_DEV_ALLOW_LOOPBACK", "1")
            // The load generator is one address standing for many clients
            // (as a proxy in front would be): the per-client connection
            // limit is for deployments without one.
            .env("WARDEN_MAX_CONNECTIONS_PER_CLIENT", "0")
            .env("WARDEN_GUEST_CACHE_DIR", &cache)
            .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("spawn warden serve");
        Proc {
            name: "warden".into(),
            child,
        }
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Total CPU time process `pid` has used so far.
pub fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces); utime and
    // stime are fields 14 and 15, i.e. 11 and 12 after the `)`.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse().unwrap())
        .collect();
    Duration::from_secs_f64((fields[0] + fields[1]) as f64 / clock_ticks() as f64)
}

/// Resets the peak-RSS mark (Linux ≥ 4.0), so the next reading is this run's.
pub fn reset_peak_rss(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// Peak resident set of `pid` since the last reset, in MiB.
pub fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// The environment every `warden` command of a run shares.
pub fn warden_env(database_url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("WARDEN_DATABASE_URL", database_url.to_owned()),
        ("WARDEN_MASTER_KEY", MASTER_KEY.to_owned()),
        ("WARDEN_ENVIRONMENT", "bench".to_owned()),
    ]
}

const MASTER_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// `warden admin …`: its JSON output.
pub fn admin(exe: &Path, database_url: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(exe)
        .arg("admin")
        .args(args)
        .envs(warden_env(database_url))
        .env("WARDEN_LOG", "warn")
        .output()
        .expect("warden admin");
    assert!(
        out.status.success(),
        "warden admin {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("admin prints JSON")
}

/// Clock ticks per second, for /proc's CPU times (asked once).
fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

/// Waits until `url` answers 200, or panics after `limit`.
pub async fn wait_ready(client: &reqwest::Client, url: &str, proc: &mut Proc, limit: Duration) {
    let started = Instant::now();
    while started.elapsed() < limit {
        assert!(proc.is_running(), "{} exited during start-up", proc.name);
        if let Ok(r) = client.get(url).send().await {
            if r.status().is_success() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{url} did not answer within {limit:?}");
}

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The 1-, 5- and 15-minute load averages.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Read system calls process `pid` has made so far (`syscr` of
/// /proc/<pid>/io): on SQLite, each page its cache lacks is one `pread`.
pub fn read_syscalls(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("syscr:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}
