//! Loading a guest: reading, compiling (or reusing a cached compilation),
//! checking it against the world, linking it with nothing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker};

use crate::bindings::GuestPre;
use crate::cache::{CacheEntry, CacheWarning, Lookup, hex};
use crate::config::SandboxConfig;
use crate::error::LoadError;
use crate::pool::StoreState;

/// The export a guest must provide.
pub const WORLD_EXPORT: &str = "warden:policy/validator@0.2.0";
/// Prefix of the export names accepted as compatible with [`WORLD_EXPORT`]:
/// patch releases of the same minor version. An older minor version (0.1.x)
/// lacks `match-pattern`, which the server calls on every turn, so it is
/// refused (wit/policy.wit, "Version policy").
const WORLD_EXPORT_COMPATIBLE: &str = "warden:policy/validator@0.2.";
/// The functions of that export.
pub const WORLD_FUNCTIONS: &[&str] = &[
    "check-definition",
    "validate-arguments",
    "prune-output",
    "shape-interaction",
    "check-integration-schema",
    "validate-integration",
    "match-pattern",
];

/// The default guest, built from `guest-policy/` by `build.rs`.
static DEFAULT_GUEST: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/warden_guest_policy.wasm"));

/// Where a guest comes from.
#[derive(Debug, Clone)]
pub enum GuestSource {
    /// The default guest embedded in the binary.
    Default,
    /// A component file (the value of `WARDEN_POLICY_GUEST`).
    Path(PathBuf),
    /// Component bytes already in memory.
    Bytes { name: String, bytes: Vec<u8> },
}

impl GuestSource {
    /// `WARDEN_POLICY_GUEST`-style selection: a path when set and non-empty,
    /// the embedded default otherwise.
    pub fn from_option(path: Option<&Path>) -> Self {
        match path {
            Some(p) if !p.as_os_str().is_empty() => GuestSource::Path(p.to_path_buf()),
            _ => GuestSource::Default,
        }
    }

    pub(crate) fn name(&self) -> String {
        match self {
            GuestSource::Default => "(embedded default guest)".to_string(),
            GuestSource::Path(p) => p.display().to_string(),
            GuestSource::Bytes { name, .. } => name.clone(),
        }
    }

    fn bytes(&self) -> Result<std::borrow::Cow<'_, [u8]>, LoadError> {
        Ok(match self {
            GuestSource::Default => DEFAULT_GUEST.into(),
            GuestSource::Path(p) => std::fs::read(p)
                .map_err(|source| LoadError::Read {
                    path: p.clone(),
                    source,
                })?
                .into(),
            GuestSource::Bytes { bytes, .. } => bytes.as_slice().into(),
        })
    }
}

/// What was loaded, for logs and `warden admin guest check`.
#[derive(Debug, Clone, Serialize)]
pub struct GuestInfo {
    pub name: String,
    pub sha256: String,
    pub size_bytes: usize,
    /// Imports the component declares; each is linked to a trapping stub.
    pub imports: Vec<String>,
    /// Time to compile or to load the cached compilation.
    pub load_ms: f64,
    /// Whether the compiled form came from `cache_dir` (a verified entry).
    pub from_cache: bool,
    /// Why the cache was not used as configured (the server logs these).
    pub cache_warnings: Vec<CacheWarning>,
}

pub(crate) struct Loaded {
    pub pre: GuestPre<StoreState>,
    pub info: GuestInfo,
}

pub(crate) fn load(
    engine: &Engine,
    source: &GuestSource,
    config: &SandboxConfig,
) -> Result<Loaded, LoadError> {
    let name = source.name();
    let bytes = source.bytes()?;
    let digest: [u8; 32] = Sha256::digest(&bytes).into();
    let sha256 = hex(&digest);
    let started = Instant::now();
    let mut cache_warnings = Vec::new();
    let (component, from_cache) =
        compile(engine, &name, &bytes, digest, config, &mut cache_warnings)?;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;

    let missing = missing_exports(engine, &component);
    if !missing.is_empty() {
        return Err(LoadError::WorldMismatch { name, missing });
    }
    let imports = component
        .component_type()
        .imports(engine)
        .map(|(n, _)| n.to_string())
        .collect();

    // Link nothing: every import the guest declares becomes a function that
    // traps when called. A policy guest needs no host function at all.
    let mut linker: Linker<StoreState> = Linker::new(engine);
    linker
        .define_unknown_imports_as_traps(&component)
        .map_err(|e| LoadError::Link {
            name: name.clone(),
            reason: format!("{e:#}"),
        })?;
    let instance_pre = linker
        .instantiate_pre(&component)
        .map_err(|e| LoadError::Link {
            name: name.clone(),
            reason: format!("{e:#}"),
        })?;
    // Type-checks every function of the export against the world.
    let pre = GuestPre::new(instance_pre).map_err(|e| LoadError::WorldMismatch {
        name: name.clone(),
        missing: vec![format!(
            "`{WORLD_EXPORT}` does not have the world's types: {e:#}"
        )],
    })?;
    Ok(Loaded {
        pre,
        info: GuestInfo {
            name,
            sha256,
            size_bytes: bytes.len(),
            imports,
            load_ms,
            from_cache,
            cache_warnings,
        },
    })
}

/// Names what the component lacks of the world (empty when it has it all).
fn missing_exports(engine: &Engine, component: &Component) -> Vec<String> {
    let ty = component.component_type();
    // Semver: a guest built against any 0.2.x of the package fits (patch
    // releases of the WIT are documentation only; see wit/policy.wit).
    let name = ty
        .exports(engine)
        .map(|(n, _)| n)
        .find(|n| *n == WORLD_EXPORT || n.starts_with(WORLD_EXPORT_COMPATIBLE))
        .map(str::to_string);
    let Some(export) = name.as_deref().and_then(|n| ty.get_export(engine, n)) else {
        let found: Vec<String> = ty.exports(engine).map(|(n, _)| format!("`{n}`")).collect();
        let found = if found.is_empty() {
            "nothing".to_string()
        } else {
            found.join(", ")
        };
        return vec![format!(
            "missing export `{WORLD_EXPORT}` (the component exports {found})"
        )];
    };
    let ComponentItem::ComponentInstance(instance) = export.ty else {
        return vec![format!("export `{WORLD_EXPORT}` is not an instance")];
    };
    WORLD_FUNCTIONS
        .iter()
        .filter(|f| {
            !matches!(
                instance.get_export(engine, f).map(|e| e.ty),
                Some(ComponentItem::ComponentFunc(_))
            )
        })
        .map(|f| format!("missing function `{f}` in `{WORLD_EXPORT}`"))
        .collect()
}

fn compile(
    engine: &Engine,
    name: &str,
    bytes: &[u8],
    sha256: [u8; 32],
    config: &SandboxConfig,
    warnings: &mut Vec<CacheWarning>,
) -> Result<(Component, bool), LoadError> {
    let compile = || {
        Component::new(engine, bytes).map_err(|e| LoadError::NotAComponent {
            name: name.to_string(),
            reason: format!("{e:#}"),
        })
    };
    let Some(dir) = &config.cache_dir else {
        return Ok((compile()?, false));
    };
    let entry = match CacheEntry::open(dir, engine, sha256) {
        Ok(entry) => entry,
        Err(refused) => {
            warnings.push(refused);
            return Ok((compile()?, false));
        }
    };
    match entry.load(engine) {
        Lookup::Hit(component) => return Ok((component, true)),
        Lookup::Absent => {}
        Lookup::Refused(why) => warnings.push(why),
    }
    let component = compile()?;
    if let Err(failed) = entry.store(&component) {
        warnings.push(failed);
    }
    Ok((component, false))
}
