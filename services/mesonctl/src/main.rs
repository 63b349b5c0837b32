//! `mesonctl`: see `mesonctl --help`.

use clap::Parser;
use mesonctl::error::exit;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Usage errors exit 2 (clap's code); --help and --version exit 0.
    let cli = mesonctl::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start: {e}");
            return ExitCode::from(exit::API);
        }
    };
    match runtime.block_on(mesonctl::app::run(cli)) {
        Ok(()) => ExitCode::from(exit::SUCCESS),
        Err(failure) => {
            for line in failure.lines() {
                eprintln!("{line}");
            }
            ExitCode::from(failure.exit_code())
        }
    }
}
