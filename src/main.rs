//! The `warden` binary: parse the command line, set up logging, run the command.
//! Everything else lives in the library so tests drive the same code.

use clap::Parser;
use std::process::ExitCode;
use warden::cli::{Cli, Command};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Traces are the server's: the admin commands only log.
    let traces = match &cli.command {
        Command::Serve(_) => warden::telemetry::otlp_settings(|name| std::env::var(name).ok()),
        _ => Ok(None),
    };
    let _telemetry = match traces.and_then(|traces| warden::telemetry::init(&cli.log, traces)) {
        Ok(telemetry) => telemetry,
        Err(err) => {
            eprintln!("error: {err:#}");
            return ExitCode::from(2);
        }
    };
    let outcome = match cli.command {
        Command::Serve(args) => warden::startup::serve(cli.database, cli.master_key, args).await,
        Command::Admin(command) => warden::admin::run(cli.database, cli.master_key, command).await,
        Command::Openapi => {
            println!("{}", warden::api::openapi::document_json());
            Ok(())
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
