//! `persyk models list | download NAME | rm NAME`: the on-device models folder.
//!
//! `download` draws a progress bar on stderr (redrawn in place on a terminal, a line per 10 %
//! otherwise) and stops cleanly on Ctrl+C, keeping the `.part` so the same command resumes.
//! The folder is `$PERSYK_MODELS_DIR` or the platform data folder's `models/`; the download
//! base URL may be overridden with `$PERSYK_MODELS_URL` (https, or http to loopback).

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use persyk::local::models::{self, ModelState, ModelStore, Phase, Progress};

use super::EXIT_CANNOT_RUN;

/// The exit status after Ctrl+C (128 + SIGINT), as shells report it.
pub const EXIT_INTERRUPTED: u8 = 130;

fn store() -> Result<ModelStore, u8> {
    ModelStore::from_env().map_err(|e| {
        eprintln!("persyk: {e}");
        EXIT_CANNOT_RUN
    })
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

pub fn list() -> u8 {
    let store = match store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    println!("{}", store.dir().display());
    // A folder someone else may write in proves nothing about its files.
    if let Err(e) = store.check_folder() {
        eprintln!("persyk: {e}");
        return EXIT_CANNOT_RUN;
    }
    for info in store.list() {
        let state = match info.state {
            ModelState::Installed => "downloaded".to_owned(),
            ModelState::Absent => "-".to_owned(),
            ModelState::Partial { bytes } => format!("partial ({})", mib(bytes)),
            ModelState::Damaged { .. } => "damaged (rm and download again)".to_owned(),
        };
        println!(
            "{:<22} {:>11}  {:<32} {}",
            info.model.name,
            mib(info.model.bytes),
            state,
            info.model.description
        );
    }
    0
}

pub fn rm(name: &str) -> u8 {
    let store = match store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    match store.delete(name) {
        Ok(true) => {
            eprintln!("persyk: deleted {name}");
            0
        }
        Ok(false) => {
            eprintln!("persyk: {name} is not downloaded");
            0
        }
        Err(e) => {
            eprintln!("persyk: {e}");
            EXIT_CANNOT_RUN
        }
    }
}

/// How long a Ctrl+C waits for the download to notice before the process exits anyway (a
/// read from a stalled server only returns at its timeout). The part is a prefix of the
/// file either way: the next run re-hashes it.
const CTRL_C_GRACE: Duration = Duration::from_secs(3);

/// Sets `flag` on the first Ctrl+C (a thread with a small runtime waits for the signal).
fn cancel_on_ctrl_c(flag: Arc<AtomicBool>, name: String) {
    let _ = std::thread::Builder::new()
        .name("persyk-ctrl-c".into())
        .spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
                && rt.block_on(tokio::signal::ctrl_c()).is_ok()
            {
                flag.store(true, Ordering::SeqCst);
                std::thread::sleep(CTRL_C_GRACE);
                eprintln!("\npersyk: {}", models::ModelError::Cancelled);
                eprintln!("persyk: run `persyk models download {name}` again to resume");
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
        });
}

/// The progress bar on stderr.
struct Bar {
    terminal: bool,
    last_draw: Option<Instant>,
    last_tenth: Option<u64>,
    started: Instant,
}

impl Bar {
    fn draw(&mut self, p: Progress) {
        let done = p.done_bytes >= p.total_bytes;
        if self.terminal {
            if !done
                && self
                    .last_draw
                    .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
            {
                return;
            }
            self.last_draw = Some(Instant::now());
            let width = 30usize;
            let filled = ((p.fraction() * width as f32) as usize).min(width);
            let what = match p.phase {
                Phase::Checking => "checking",
                Phase::Downloading => "downloading",
            };
            let secs = self.started.elapsed().as_secs_f64().max(0.001);
            eprint!(
                "\r[{}{}] {:>5.1}% {} / {} {what} {:.1} MiB/s ",
                "#".repeat(filled),
                " ".repeat(width - filled),
                p.fraction() * 100.0,
                mib(p.done_bytes),
                mib(p.total_bytes),
                p.done_bytes as f64 / secs / (1024.0 * 1024.0),
            );
        } else {
            let tenth = p.done_bytes * 10 / p.total_bytes.max(1);
            if self.last_tenth == Some(tenth) {
                return;
            }
            self.last_tenth = Some(tenth);
            eprintln!(
                "persyk: {:>3}% {} / {}",
                tenth * 10,
                mib(p.done_bytes),
                mib(p.total_bytes)
            );
        }
        let _ = std::io::stderr().flush();
    }

    fn end(&self) {
        if self.terminal && self.last_draw.is_some() {
            eprintln!();
        }
    }
}

pub fn download(name: &str) -> u8 {
    let Some(model) = models::find(name) else {
        eprintln!("persyk: {}", persyk::local::models::ModelError::Unknown);
        let names: Vec<&str> = models::CATALOG.iter().map(|m| m.name).collect();
        eprintln!("persyk: the catalog has {}", names.join(", "));
        return EXIT_CANNOT_RUN;
    };
    let store = match store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let cancel = Arc::new(AtomicBool::new(false));
    cancel_on_ctrl_c(cancel.clone(), name.to_owned());
    let mut bar = Bar {
        terminal: std::io::stderr().is_terminal(),
        last_draw: None,
        last_tenth: None,
        started: Instant::now(),
    };
    eprintln!("persyk: downloading {} ({})", model.name, mib(model.bytes));
    let result = store.download(model, &cancel, &mut |p| bar.draw(p));
    bar.end();
    match result {
        Ok(path) => {
            println!("{}", path.display());
            eprintln!("persyk: {} is downloaded and verified", model.name);
            0
        }
        Err(e) => {
            eprintln!("persyk: {e}");
            if e.is_resumable() {
                eprintln!("persyk: run `persyk models download {name}` again to resume");
            }
            if e.code() == "models.cancelled" {
                EXIT_INTERRUPTED
            } else {
                EXIT_CANNOT_RUN
            }
        }
    }
}
