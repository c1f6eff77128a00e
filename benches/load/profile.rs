//! A CPU profile of Warden during one run: `perf record` (DWARF call
//! graphs: the release build keeps no frame pointers) on the server's pid,
//! then `perf script` folded by inferno into a flamegraph SVG under `docs/`,
//! and the hottest frames printed. inferno is installed into `.tools/` by
//! `scripts/ensure-bench-tools.sh --profile`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Recording {
    perf: Child,
    data: PathBuf,
}

impl Recording {
    pub fn start(pid: u32, run: Duration, work: &Path) -> Recording {
        let data = work.join("perf.data");
        let perf = Command::new("perf")
            .args(["record", "-F", "999", "--call-graph", "dwarf,16384", "-p"])
            .arg(pid.to_string())
            .arg("-o")
            .arg(&data)
            .args(["--", "sleep"])
            .arg(run.as_secs().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("perf (linux-perf)");
        Recording { perf, data }
    }

    /// Waits for perf, folds its stacks and writes `docs/profile-<name>.svg`.
    pub fn finish(mut self, root: &Path, name: &str) {
        let _ = self.perf.wait();
        let tools = root.join(".tools/bin");
        let folded = self.data.with_extension("folded");
        let script = Command::new("perf")
            .arg("script")
            .arg("-i")
            .arg(&self.data)
            .stderr(Stdio::null())
            .output()
            .expect("perf script");
        let collapse = Command::new(tools.join("inferno-collapse-perf"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn();
        let Ok(mut collapse) = collapse else {
            eprintln!(
                "no .tools/bin/inferno-collapse-perf: run scripts/ensure-bench-tools.sh --profile"
            );
            return;
        };
        {
            use std::io::Write;
            let mut stdin = collapse.stdin.take().unwrap();
            let _ = stdin.write_all(&script.stdout);
        }
        let out = collapse.wait_with_output().unwrap();
        std::fs::write(&folded, &out.stdout).unwrap();
        let svg = root.join(format!("docs/profile-{name}.svg"));
        let drawn = Command::new(tools.join("inferno-flamegraph"))
            .args([
                "--title",
                &format!("warden serve, {name}, 8 connections"),
                "--width",
                "1400",
            ])
            .arg(&folded)
            .output()
            .unwrap();
        std::fs::write(&svg, drawn.stdout).unwrap();
        // Keep the folded stacks next to the run's other files for study.
        let keep = std::env::temp_dir().join(format!("warden-profile-{name}.folded"));
        let _ = std::fs::copy(&folded, &keep);
        println!(
            "profile: {} (folded stacks: {})",
            svg.display(),
            keep.display()
        );
        let _ = std::fs::remove_file(&self.data);
    }
}
