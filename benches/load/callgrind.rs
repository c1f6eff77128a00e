//! Instructions counted by callgrind: a measure of work that does not move
//! with the machine. CPU time on a shared 2-core machine moved by 25 %
//! between runs of the same build (docs/benchmarks.md, "What watching
//! costs"); callgrind counts the same total for the same binary and inputs
//! whatever else runs. It counts user-space instructions only (no system
//! call's work in the kernel, no cache miss), and slows the process tens of
//! times, so it judges small differences of code, not throughput.
//!
//! The process runs under `valgrind --tool=callgrind`; `callgrind_control
//! --dump` writes the counts since the previous dump and zeroes them, so a
//! dump before and one after a window give the window's instructions.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One dump: its instructions, and the file (for `callgrind_annotate`).
pub struct Dump {
    pub instructions: u64,
    pub path: PathBuf,
}

pub struct Callgrind {
    out: PathBuf,
}

impl Callgrind {
    /// valgrind is installed (Debian's package; on every machine of this
    /// project's kind, not installed by the project's scripts).
    pub fn available() -> bool {
        Command::new("valgrind")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Counts for a process named `name`, written under `work`.
    pub fn new(work: &Path, name: &str) -> Callgrind {
        Callgrind {
            out: work.join(format!("callgrind-{name}.out")),
        }
    }

    /// The program and arguments that run a command under callgrind.
    pub fn wrapper(&self) -> Vec<String> {
        vec![
            "valgrind".into(),
            "--tool=callgrind".into(),
            "-q".into(),
            format!("--callgrind-out-file={}", self.out.display()),
            // Per-function totals suffice; lines would only grow the files.
            "--dump-line=no".into(),
        ]
    }

    /// Instructions the process `pid` executed since its start or the
    /// previous dump, all threads together, and the dump file.
    pub fn dump(&self, pid: u32) -> Dump {
        let before = self.dumps();
        let status = Command::new("callgrind_control")
            .args(["--dump", &pid.to_string()])
            .output()
            .expect("callgrind_control (valgrind)");
        assert!(
            status.status.success(),
            "callgrind_control --dump {pid}: {}",
            String::from_utf8_lossy(&status.stderr)
        );
        let new: Vec<PathBuf> = self.dumps().difference(&before).cloned().collect();
        assert_eq!(new.len(), 1, "one new dump of {pid}, found {new:?}");
        let path = new[0].clone();
        let text = std::fs::read_to_string(&path).unwrap();
        let instructions = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("totals:")
                    .or_else(|| l.strip_prefix("summary:"))
            })
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no totals in {}", path.display()));
        Dump { instructions, path }
    }

    /// The dump files written so far (`<out>.<n>`).
    fn dumps(&self) -> HashSet<PathBuf> {
        let dir = self.out.parent().unwrap();
        let prefix = self.out.file_name().unwrap().to_string_lossy().into_owned();
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect()
    }
}
