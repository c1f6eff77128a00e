//! The `warden` binary: parse the command line, set up logging, run the command.
//! Everything else lives in the library so tests drive the same code.

use clap::Parser;
use std::process::ExitCode;
use warden::cli::{Cli, Command};

/// jemalloc, not glibc's malloc: a request's memory is often freed on
/// another runtime thread than the one that took it, and glibc then locks
/// the other thread's arena (a tenth of a request's CPU went to malloc and
/// free, docs/benchmarks.md, "The allocator"). Its dirty pages are returned
/// by a background thread of its own, not on a request's.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Most of the top of glibc's heap kept rather than handed back (64 MiB:
/// more than every SQLite connection's page cache together).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const C_HEAP_KEPT: i32 = 64 << 20;

/// SQLite is C and allocates with glibc's malloc, not jemalloc. A
/// connection's page cache is emptied whenever another connection has
/// committed, and glibc then gave the top of its heap back to the kernel
/// (`madvise`, 2 % of a turn's samples) on the request's thread, to fault
/// it in again on the next read (docs/benchmarks.md, "The C heap").
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_the_c_heap() {
    // SAFETY: mallopt sets one parameter of glibc's allocator, before any
    // other thread runs.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, C_HEAP_KEPT);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_the_c_heap() {}

fn main() -> ExitCode {
    keep_the_c_heap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(warden::shedding_threads::RUNTIME_THREAD_STACK)
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(run()),
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> ExitCode {
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
