//! The master keyring: the current 32-byte key that seals stored secrets
//! (endpoint credentials, signing keys) and, during a rotation, the previous
//! key that still opens what was sealed before. Configured inline or as a
//! file; a SQLite deployment without one gets a key file created beside its
//! database.

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use std::fmt;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub const KEY_LEN: usize = 32;

#[derive(Clone)]
pub struct MasterKey {
    key: [u8; KEY_LEN],
    /// [`MasterKey::id`], computed once: every sealed value opened names
    /// its key by id, and hashing the key for each was a turn's cost.
    id: String,
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey(<redacted>)")
    }
}

impl MasterKey {
    fn of(key: [u8; KEY_LEN]) -> Self {
        let digest = Sha256::new()
            .chain_update(b"warden master key id v1")
            .chain_update(key)
            .finalize();
        let id = format!("mk_{}", super::hex::encode(&digest[..8]));
        MasterKey { key, id }
    }

    pub fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.key
    }

    /// A stable, non-secret identifier: a truncated hash of the key.
    pub fn id(&self) -> String {
        self.id.clone()
    }

    pub fn generate() -> Self {
        let mut key = [0u8; KEY_LEN];
        rand::rngs::OsRng.fill_bytes(&mut key);
        Self::of(key)
    }

    pub fn from_base64(text: &str) -> anyhow::Result<Self> {
        let bytes = STANDARD
            .decode(text.trim())
            .context("the master key is not valid base64")?;
        let key: [u8; KEY_LEN] = bytes.try_into().map_err(|b: Vec<u8>| {
            anyhow::anyhow!("the master key must be {KEY_LEN} bytes, got {}", b.len())
        })?;
        Ok(Self::of(key))
    }

    fn to_base64(&self) -> String {
        STANDARD.encode(self.key)
    }
}

/// The current key and any previous ones still accepted for opening.
#[derive(Clone, Debug)]
pub struct Keyring {
    current: MasterKey,
    previous: Vec<MasterKey>,
}

impl Keyring {
    pub fn new(current: MasterKey, previous: Vec<MasterKey>) -> Self {
        Keyring { current, previous }
    }

    pub fn current(&self) -> &MasterKey {
        &self.current
    }

    pub fn find(&self, id: &str) -> Option<&MasterKey> {
        std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.id == id)
    }
}

/// The master-key settings as configured (`WARDEN_MASTER_KEY`,
/// `WARDEN_MASTER_KEY_FILE`, `WARDEN_MASTER_KEY_PREVIOUS_FILE`): plain values,
/// so this floor needs nothing of the command line.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeySettings<'a> {
    pub inline: Option<&'a str>,
    pub file: Option<&'a Path>,
    pub previous_file: Option<&'a Path>,
}

/// Where the database lives, which decides what a missing key means: a
/// shared database (PostgreSQL) refuses to start, one in memory gets a
/// throwaway key, a SQLite file gets a key file created beside it.
#[derive(Clone, Copy, Debug)]
pub enum DatabasePlace<'a> {
    Shared,
    Memory,
    File(&'a Path),
}

/// The keyring as configured (creating the default key file if needed).
pub fn resolve_keyring(
    settings: KeySettings<'_>,
    database: DatabasePlace<'_>,
) -> anyhow::Result<Keyring> {
    let current = resolve(settings, database)?;
    let previous = match settings.previous_file {
        Some(path) => vec![read_key_file(path).context("WARDEN_MASTER_KEY_PREVIOUS_FILE")?],
        None => vec![],
    };
    Ok(Keyring::new(current, previous))
}

/// Finds the master key as configured, or creates the default key file.
pub fn resolve(
    settings: KeySettings<'_>,
    database: DatabasePlace<'_>,
) -> anyhow::Result<MasterKey> {
    if let Some(inline) = settings.inline {
        return MasterKey::from_base64(inline).context("WARDEN_MASTER_KEY");
    }
    if let Some(path) = settings.file {
        return read_key_file(path);
    }
    match database {
        DatabasePlace::Shared => bail!(
            "PostgreSQL needs a master key shared by every replica: set WARDEN_MASTER_KEY \
             (base64 of 32 bytes) or WARDEN_MASTER_KEY_FILE"
        ),
        DatabasePlace::Memory => {
            tracing::warn!(
                "no master key configured and the database is in memory: using a throwaway key"
            );
            Ok(MasterKey::generate())
        }
        DatabasePlace::File(db_path) => {
            let path = default_key_path(db_path);
            if path.exists() {
                return read_key_file(&path);
            }
            let key = MasterKey::generate();
            write_new_key_file(&path, &key)?;
            tracing::warn!(
                path = %path.display(),
                "no master key configured (WARDEN_MASTER_KEY / WARDEN_MASTER_KEY_FILE): created a key file \
                 with mode 0600 beside the database; back it up, stored secrets cannot be read without it"
            );
            Ok(key)
        }
    }
}

/// `warden.db` → `warden.db.key`.
pub fn default_key_path(db_path: &Path) -> PathBuf {
    let mut name = db_path.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

fn read_key_file(path: &Path) -> anyhow::Result<MasterKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the master key file {}", path.display()))?;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(path = %path.display(), "the master key file is readable by group or others; use mode 0600");
    }
    MasterKey::from_base64(&text).with_context(|| format!("master key file {}", path.display()))
}

fn write_new_key_file(path: &Path, key: &MasterKey) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create the master key file {}", path.display()))?;
    writeln!(file, "{}", key.to_base64())?;
    file.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_key() -> KeySettings<'static> {
        KeySettings::default()
    }

    #[test]
    fn creates_a_private_key_file_once_and_reuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let first = resolve(no_key(), DatabasePlace::File(&db)).unwrap();
        let path = default_key_path(&db);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let second = resolve(no_key(), DatabasePlace::File(&db)).unwrap();
        assert_eq!(first.bytes(), second.bytes());
    }

    #[test]
    fn postgres_without_a_key_refuses_to_start() {
        let err = resolve(no_key(), DatabasePlace::Shared).unwrap_err();
        assert!(err.to_string().contains("WARDEN_MASTER_KEY"));
    }

    #[test]
    fn inline_key_must_be_32_bytes() {
        let short = STANDARD.encode([1u8; 16]);
        let args = KeySettings {
            inline: Some(&short),
            ..no_key()
        };
        assert!(resolve(args, DatabasePlace::Shared).is_err());
        let whole = STANDARD.encode([1u8; 32]);
        let args = KeySettings {
            inline: Some(&whole),
            ..no_key()
        };
        assert_eq!(
            resolve(args, DatabasePlace::Shared).unwrap().bytes(),
            &[1u8; 32]
        );
    }

    #[test]
    fn debug_never_shows_the_key() {
        assert_eq!(
            format!("{:?}", MasterKey::generate()),
            "MasterKey(<redacted>)"
        );
    }
}
