//! `persyk fake-provider`: serves a scripted fake of the OpenAI Realtime API on loopback
//! (see `persyk::realtime::fake`) until its scripted connections are done, then writes the
//! JSONL dump.

use std::io::Write;
use std::path::Path;

use persyk::realtime::fake::{self, Scenario};
use tokio::sync::watch;

use super::EXIT_CANNOT_RUN;

pub fn run(scenario: &Path, port: u16, dump: Option<&Path>, full_audio: bool) -> u8 {
    let scenario = match Scenario::from_file(scenario) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("persyk: fake-provider: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let result = runtime.block_on(async {
        let listener = fake::bind(&scenario, port)?;
        if let Ok(addr) = listener.local_addr() {
            say(format_args!(
                "scenario {} listening on ws://{addr}/v1/realtime ({} connection(s))",
                scenario.name,
                scenario.connections.len()
            ));
        }
        // The sender lives as long as the run: nothing asks the fake to stop early.
        let (_keep, shutdown) = watch::channel(false);
        fake::serve(listener, scenario, shutdown).await
    });
    let log = match result {
        Ok(log) => log,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    for note in &log.notes {
        say(format_args!("{note}"));
    }
    for c in &log.connections {
        say(format_args!(
            "connection {}: {} ({} received, {} sent)",
            c.index,
            c.end.as_str(),
            c.received().count(),
            c.sent().count()
        ));
    }
    if let Some(path) = dump
        && let Err(e) = log.write_jsonl(path, !full_audio)
    {
        eprintln!("persyk: {e}");
        return EXIT_CANNOT_RUN;
    }
    0
}

/// A progress line on stdout; a closed stdout (the driver stopped listening) is not an error.
fn say(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "fake-provider: {line}");
    let _ = out.flush();
}
