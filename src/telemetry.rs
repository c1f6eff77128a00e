//! Logging: `tracing` to standard error, as text or JSON lines.
//! Standard output stays free for the admin commands' JSON.

use crate::cli::{LogArgs, LogFormat};
use anyhow::Context;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

pub fn init(args: &LogArgs) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&args.filter)
        .with_context(|| format!("invalid log filter {:?} (WARDEN_LOG)", args.filter))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(true)
        .with_ansi(std::io::stderr().is_terminal());
    let installed = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("could not install the logger: {e}"))
}
