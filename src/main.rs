//! The `persyk` binary: CLI dispatch. All behaviour lives in the library (`persyk::…`).

mod cli;

fn main() -> std::process::ExitCode {
    cli::run()
}
