//! The compiled-guest cache (`SandboxConfig::cache_dir`).
//!
//! A cached entry is native code the process maps and runs, so nothing is
//! taken from the cache on its name alone:
//!
//! - the directory must be a directory owned by the service's user and
//!   writable by nobody else; otherwise the cache is neither read nor
//!   written (the guest is compiled, a warning says why);
//! - an entry is opened without following symbolic links and must be a
//!   regular file of the service's user, writable by nobody else;
//! - an entry's header names the SHA-256 of the guest it was compiled from,
//!   a SHA-256 of the engine's compilation settings, and the SHA-256 of the
//!   artifact that follows; all three are checked against the bytes read
//!   before those exact bytes are deserialised (from memory, so the file
//!   cannot change between the check and the load);
//! - an entry is written to a fresh file with an unpredictable name
//!   (`O_CREAT|O_EXCL`, mode 0600, never following a link), synced, then
//!   renamed over the entry's name, which replaces a planted link instead of
//!   following it.
//!
//! The hashes catch corruption, truncation and an entry of another guest or
//! engine under this guest's name. They are not a signature: whoever can
//! write the directory could write a consistent entry, which is why the
//! directory itself is checked.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::hash::Hasher;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// First bytes of an entry; the trailing digit is the layout's version.
const MAGIC: &[u8; 16] = b"warden-cwasm\0\0\0\x01";
/// Magic, guest SHA-256, engine hash, artifact SHA-256, artifact length.
const HEADER_LEN: usize = 16 + 32 + 32 + 32 + 8;
/// Larger entries are refused unread (the default guest's is a few MiB).
const MAX_ENTRY_BYTES: u64 = 1 << 30;

/// Why the cache was not used as configured. The load goes on: the guest is
/// compiled instead; the server logs these at warning level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CacheWarning {
    /// The directory is not safe to run code from: not read, not written.
    DirectoryRefused { dir: PathBuf, reason: String },
    /// An entry was there but is not this guest's verified compilation; it
    /// is replaced by a fresh one.
    EntryRefused { path: PathBuf, reason: String },
    /// The fresh compilation could not be written (the next start compiles again).
    WriteFailed { path: PathBuf, reason: String },
}

impl fmt::Display for CacheWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheWarning::DirectoryRefused { dir, reason } => write!(
                f,
                "compiled-guest cache directory {} refused ({reason}); compiling without the cache",
                dir.display()
            ),
            CacheWarning::EntryRefused { path, reason } => write!(
                f,
                "compiled-guest cache entry {} ignored ({reason}); recompiling and replacing it",
                path.display()
            ),
            CacheWarning::WriteFailed { path, reason } => write!(
                f,
                "compiled-guest cache entry {} not written: {reason}",
                path.display()
            ),
        }
    }
}

/// The entry of one guest on one engine, in a directory found safe.
pub(crate) struct CacheEntry {
    dir: PathBuf,
    path: PathBuf,
    guest_sha256: [u8; 32],
    engine_hash: [u8; 32],
}

/// What looking an entry up gave.
pub(crate) enum Lookup {
    Hit(Component),
    Absent,
    Refused(CacheWarning),
}

impl CacheEntry {
    /// The entry for `guest_sha256` on `engine` in `dir`, creating `dir`
    /// (mode 0700) when missing; a warning when `dir` is not safe to use.
    pub(crate) fn open(
        dir: &Path,
        engine: &Engine,
        guest_sha256: [u8; 32],
    ) -> Result<Self, CacheWarning> {
        let refused = |reason: String| CacheWarning::DirectoryRefused {
            dir: dir.to_path_buf(),
            reason,
        };
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| refused(format!("cannot create it: {e}")))?;
        }
        // The configured path is followed (an operator may point it through
        // a link); what it leads to is what must be private.
        let meta = std::fs::metadata(dir).map_err(|e| refused(e.to_string()))?;
        if let Some(reason) = unsafe_directory(meta.is_dir(), meta.uid(), meta.mode(), euid()) {
            return Err(refused(reason));
        }
        let engine_hash = engine_hash(engine);
        let name = format!("{}-{}.cwasm", hex(&guest_sha256), hex(&engine_hash));
        Ok(CacheEntry {
            dir: dir.to_path_buf(),
            path: dir.join(name),
            guest_sha256,
            engine_hash,
        })
    }

    /// The verified compilation, if the entry holds one.
    pub(crate) fn load(&self, engine: &Engine) -> Lookup {
        let refused = |reason: String| {
            Lookup::Refused(CacheWarning::EntryRefused {
                path: self.path.clone(),
                reason,
            })
        };
        let bytes = match self.read() {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Lookup::Absent,
            Err(reason) => return refused(reason),
        };
        let artifact = match self.verify(&bytes) {
            Ok(artifact) => artifact,
            Err(reason) => return refused(reason.to_string()),
        };
        // SAFETY: `artifact` is exactly what `Component::serialize` produced
        // for this guest on an engine with these compilation settings: the
        // directory is private to this user (checked in `open`), the file is
        // this user's and was not reached through a link (checked in `read`),
        // and its header's guest, engine and artifact hashes match the bytes
        // in hand, which are what is deserialised.
        match unsafe { Component::deserialize(engine, artifact) } {
            Ok(component) => Lookup::Hit(component),
            Err(e) => refused(format!("does not deserialise: {e:#}")),
        }
    }

    /// Writes `component`'s compilation as the entry; a warning on failure.
    pub(crate) fn store(&self, component: &Component) -> Result<(), CacheWarning> {
        let failed = |reason: String| CacheWarning::WriteFailed {
            path: self.path.clone(),
            reason,
        };
        let artifact = component
            .serialize()
            .map_err(|e| failed(format!("{e:#}")))?;
        let mut entry = Vec::with_capacity(HEADER_LEN + artifact.len());
        entry.extend_from_slice(MAGIC);
        entry.extend_from_slice(&self.guest_sha256);
        entry.extend_from_slice(&self.engine_hash);
        entry.extend_from_slice(&Sha256::digest(&artifact));
        entry.extend_from_slice(&(artifact.len() as u64).to_le_bytes());
        entry.extend_from_slice(&artifact);
        self.write_atomically(&entry)
            .map_err(|e| failed(e.to_string()))
    }

    /// The entry's bytes; `None` when there is none.
    fn read(&self) -> Result<Option<Vec<u8>>, String> {
        // O_NOFOLLOW: a link at the entry's name is refused, not followed.
        // O_NONBLOCK: a FIFO there cannot hang the start.
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&self.path);
        let mut file = match file {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err("it is a symbolic link".to_string());
            }
            Err(e) => return Err(format!("cannot open it: {e}")),
        };
        let meta = file.metadata().map_err(|e| e.to_string())?;
        if !meta.is_file() {
            return Err("it is not a regular file".to_string());
        }
        if meta.uid() != euid() {
            return Err(format!(
                "it is owned by uid {}, not by this user",
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "it is writable by group or others (mode {:o})",
                meta.mode() & 0o7777
            ));
        }
        if meta.len() > MAX_ENTRY_BYTES {
            return Err(format!("it is too large ({} bytes)", meta.len()));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read it: {e}"))?;
        Ok(Some(bytes))
    }

    /// The artifact inside `entry`, once every hash of the header matches.
    fn verify<'a>(&self, entry: &'a [u8]) -> Result<&'a [u8], &'static str> {
        if entry.len() < HEADER_LEN || &entry[..16] != MAGIC {
            return Err("not an entry of this version of the cache");
        }
        let (header, artifact) = entry.split_at(HEADER_LEN);
        if header[16..48] != self.guest_sha256 {
            return Err("it was compiled from another guest");
        }
        if header[48..80] != self.engine_hash {
            return Err("it was compiled for another engine configuration");
        }
        let len = u64::from_le_bytes(header[112..120].try_into().expect("8 bytes"));
        if len != artifact.len() as u64 {
            return Err("its length does not match its header (truncated?)");
        }
        if header[80..112] != Sha256::digest(artifact)[..] {
            return Err("its SHA-256 does not match its header (corrupt or altered)");
        }
        Ok(artifact)
    }

    /// Fresh unpredictable temporary name, exclusive create, fsync, rename.
    fn write_atomically(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| std::io::Error::other(e.to_string()))?;
        let file_name = self.path.file_name().expect("entry has a name");
        let tmp = self.dir.join(format!(
            ".{}.{}.tmp",
            file_name.to_string_lossy(),
            hex(&nonce)
        ));
        let written = (|| {
            // create_new is O_CREAT|O_EXCL, which never follows a link.
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&tmp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            // rename replaces whatever is at the entry's name, a link
            // included, without following it.
            std::fs::rename(&tmp, &self.path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
        // Make the rename itself durable; a failure here loses only a cache entry.
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

/// Why a directory with this owner and mode must not hold native code
/// the process runs; `None` when it may.
fn unsafe_directory(is_dir: bool, owner: u32, mode: u32, euid: u32) -> Option<String> {
    if !is_dir {
        return Some("it is not a directory".to_string());
    }
    if owner != euid {
        return Some(format!(
            "it is owned by uid {owner}, not by this process's user (uid {euid})"
        ));
    }
    if mode & 0o022 != 0 {
        return Some(format!(
            "it is writable by group or others (mode {:o}); make it 0700",
            mode & 0o7777
        ));
    }
    None
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// SHA-256 of everything wasmtime says a compilation depends on (target,
/// compiler flags, tunables, features, wasmtime's own version).
fn engine_hash(engine: &Engine) -> [u8; 32] {
    struct Sha(Sha256);
    impl Hasher for Sha {
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
        fn finish(&self) -> u64 {
            // Never called by `Hash` implementations; the digest is read below.
            0
        }
    }
    let mut sha = Sha(Sha256::new());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut sha);
    sha.0.finalize().into()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::unsafe_directory;

    #[test]
    fn only_a_private_directory_of_this_user_is_used() {
        assert_eq!(unsafe_directory(true, 1000, 0o40700, 1000), None);
        assert_eq!(unsafe_directory(true, 1000, 0o40755, 1000), None);
        let group = unsafe_directory(true, 1000, 0o40770, 1000).unwrap();
        assert!(group.contains("writable by group or others"), "{group}");
        let world = unsafe_directory(true, 1000, 0o41777, 1000).unwrap();
        assert!(world.contains("mode 1777"), "{world}");
        let other = unsafe_directory(true, 0, 0o40700, 1000).unwrap();
        assert!(other.contains("owned by uid 0"), "{other}");
        let file = unsafe_directory(false, 1000, 0o100600, 1000).unwrap();
        assert!(file.contains("not a directory"), "{file}");
    }
}
