//! `persyk context` on a long session, beside pi's SessionManager in the same run.
//!
//! Run: `cargo bench --bench history` (messages: `PERSYK_BENCH_MESSAGES`, default 150000,
//! about 215 MB). The session is generated once under the target dir (never committed): a
//! chain of user and assistant messages of realistic text, about 1.4 KB a line.
//!
//! Measured, each as the median of five runs of a separate process (the fastest run is shown
//! too), wall time and peak RSS (`/usr/bin/time -f "%e %M"`); the runs go in rounds, every
//! command once per round, so a machine whose load changes meanwhile treats them alike:
//! - `persyk context SESSION --json > /dev/null` (the release binary cargo built for this
//!   bench) and the human output;
//! - the baseline: pi's `SessionManager.open(file)` + `buildSessionContext()` in node (its
//!   `dist/core/session-manager.js`, imported alone so node 20 can load it), when
//!   pi is installed under `target/pi` (`npm install @earendil-works/pi-coding-agent@0.85.1`
//!   there, or point `PERSYK_BENCH_PI` at such a folder); pi reads a copy whose header
//!   carries pi's version 3 (so it migrates nothing);
//! - the previous Persyk, when `PERSYK_BENCH_PREVIOUS` names its `persyk` binary;
//! - `persyk check` on the same file: the validating scan alone;
//! - a second baseline always available: every line read into a `Vec<serde_json::Value>`.
//!
//! Targets (issue #15): peak RSS < 5 % of the file; time ≥ 5× faster than pi.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod support;
use support::vm_hwm_kib;

const ID: &str = "019a0000-0000-7000-8000-0000000000aa";

/// The session folder for `messages` messages (generated once), and pi's copy of its file.
fn generate(messages: u64) -> (PathBuf, PathBuf) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("bench-data")
        .join(format!("history-{messages}"));
    let file = support::chain_session(&dir, messages);
    let pi = dir.join("pi-session.jsonl");
    if pi.exists() {
        return (dir, pi);
    }
    // pi's copy: the same entries under pi's own header version.
    let mut out = BufWriter::new(File::create(&pi).expect("create pi copy"));
    let mut lines = BufReader::new(File::open(&file).expect("open")).lines();
    lines.next();
    writeln!(
        out,
        r#"{{"type":"session","version":3,"id":"{ID}","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/tmp"}}"#
    )
    .expect("write");
    for l in lines {
        writeln!(out, "{}", l.expect("line")).expect("write");
    }
    out.flush().expect("flush");
    (dir, pi)
}

/// Runs of each measured command.
const RUNS: usize = 5;

/// The median of `values` (sorted in place).
fn median<T: PartialOrd + Copy>(values: &mut [T]) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values[values.len() / 2]
}

/// One run of `cmd args…` with stdout to /dev/null: (seconds, peak RSS KiB).
fn run_once(cmd: &Path, args: &[String], env: Option<(&str, &Path)>) -> Option<(f64, u64)> {
    let mut c = Command::new("/usr/bin/time");
    c.args(["-f", "%e %M"]).arg(cmd).args(args);
    if let Some((k, v)) = env {
        c.env(k, v);
    }
    let out = c
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "history: {} failed: {}",
            cmd.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let mut it = err.lines().last()?.split_whitespace();
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// A measured command.
struct Subject {
    what: &'static str,
    cmd: PathBuf,
    args: Vec<String>,
    env: Option<(&'static str, PathBuf)>,
    secs: Vec<f64>,
    kibs: Vec<u64>,
}

impl Subject {
    fn new(what: &'static str, cmd: impl Into<PathBuf>, args: &[&str]) -> Subject {
        Subject {
            what,
            cmd: cmd.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: None,
            secs: Vec::new(),
            kibs: Vec::new(),
        }
    }

    /// (median seconds, median peak RSS KiB, fastest seconds), if every run succeeded.
    fn result(&self) -> Option<(f64, u64, f64)> {
        if self.secs.len() < RUNS {
            return None;
        }
        let fastest = self.secs.iter().copied().fold(f64::INFINITY, f64::min);
        Some((
            median(&mut self.secs.clone()),
            median(&mut self.kibs.clone()),
            fastest,
        ))
    }
}

const PI_SCRIPT: &str = r#"
const path = require('path');
const root = process.argv[2];
const file = process.argv[3];
(async () => {
  const pi = await import(path.join(root, 'node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js'));
  const sm = pi.SessionManager.open(file);
  const ctx = sm.buildSessionContext();
  process.stdout.write(String(ctx.messages.length) + '\n');
})().catch((e) => { console.error(e); process.exit(1); });
"#;

fn main() {
    // Child mode: the plain baseline, every line into a Vec of values.
    if let Ok(path) = std::env::var("PERSYK_BENCH_CHILD_VEC") {
        let r = BufReader::with_capacity(256 * 1024, File::open(&path).expect("open"));
        let all: Vec<serde_json::Value> = r
            .lines()
            .map(|l| serde_json::from_str(&l.expect("line")).expect("parse"))
            .collect();
        println!("{} {}", all.len(), vm_hwm_kib());
        return;
    }
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --benches` smoke: nothing to measure.
    }
    if !Path::new("/usr/bin/time").exists() {
        println!("history: /usr/bin/time is missing; nothing measured");
        return;
    }
    let messages: u64 = std::env::var("PERSYK_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150_000);
    let (dir, pi_file) = generate(messages);
    let file = dir.join("session.jsonl");
    let size_mib = fs::metadata(&file).expect("metadata").len() as f64 / 1048576.0;
    let dir_s = dir.to_str().expect("utf-8 path");
    // Warm the page cache.
    let _ = fs::read(&file);
    let _ = fs::read(&pi_file);
    println!("history: session {size_mib:.1} MiB, {messages} messages");

    let exe = env!("CARGO_BIN_EXE_persyk");
    let mut subjects = vec![
        Subject::new("persyk context --json", exe, &["context", dir_s, "--json"]),
        Subject::new("persyk context (human)", exe, &["context", dir_s]),
        Subject::new("persyk check (the scan alone)", exe, &["check", dir_s]),
    ];
    // The previous Persyk, when its binary is given (a build of the commit before).
    if let Some(p) = std::env::var_os("PERSYK_BENCH_PREVIOUS") {
        subjects.push(Subject::new(
            "baseline: previous persyk context --json",
            p,
            &["context", dir_s, "--json"],
        ));
    }
    // Baseline 1: pi 0.85 SessionManager.open + buildSessionContext.
    let pi_root = std::env::var_os("PERSYK_BENCH_PI")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/pi"));
    let script =
        std::env::temp_dir().join(format!("persyk-bench-context-{}.cjs", std::process::id()));
    let pi_installed = pi_root
        .join("node_modules/@earendil-works/pi-coding-agent/package.json")
        .exists();
    if pi_installed {
        fs::write(&script, PI_SCRIPT).expect("script");
        subjects.push(Subject::new(
            "baseline: pi SessionManager.open+buildContext",
            "node",
            &[
                script.to_str().expect("utf-8"),
                pi_root.to_str().expect("utf-8"),
                pi_file.to_str().expect("utf-8"),
            ],
        ));
    } else {
        println!("history: baseline pi: not installed under target/pi (see the module doc)");
    }
    // Baseline 2: every line into a Vec<serde_json::Value>.
    let mut vec = Subject::new(
        "baseline: serde_json Vec<Value> of every line",
        std::env::current_exe().expect("exe"),
        &[],
    );
    vec.env = Some(("PERSYK_BENCH_CHILD_VEC", file.clone()));
    subjects.push(vec);

    // Rounds, each subject once per round: a machine whose load changes treats all alike.
    for _ in 0..RUNS {
        for s in subjects.iter_mut() {
            let env = s.env.as_ref().map(|(k, v)| (*k, v.as_path()));
            if let Some((secs, kib)) = run_once(&s.cmd, &s.args, env) {
                s.secs.push(secs);
                s.kibs.push(kib);
            }
        }
    }
    let _ = fs::remove_file(&script);
    let find = |what: &str| {
        subjects
            .iter()
            .find(|s| s.what == what)
            .and_then(Subject::result)
    };
    for s in &subjects {
        match s.result() {
            Some((secs, kib, fastest)) => {
                let mib = kib as f64 / 1024.0;
                println!(
                    "history: {:<46} {secs:6.2} s (fastest {fastest:5.2})  peak RSS {mib:7.1} MiB ({:.1}% of file)",
                    s.what,
                    100.0 * mib / size_mib
                );
            }
            None => println!("history: {:<46} not measured", s.what),
        }
    }
    let json = find("persyk context --json");
    let pi = find("baseline: pi SessionManager.open+buildContext");
    let previous = find("baseline: previous persyk context --json");
    let vec = find("baseline: serde_json Vec<Value> of every line");

    if let Some((s, kib, _)) = json {
        let mib = kib as f64 / 1024.0;
        println!(
            "history: peak RSS {:.2}% of the file (target < 5%)",
            100.0 * mib / size_mib
        );
        if let Some((ps, pk, _)) = pi {
            println!(
                "history: speed-up over pi {:.1}x (target >= 5x), RSS {:.1}x smaller",
                ps / s.max(0.005),
                pk as f64 / kib.max(1) as f64
            );
        }
        if let Some((bs, bk, _)) = previous {
            println!(
                "history: vs the previous persyk: {:.1}x faster, RSS {:.1}x smaller",
                bs / s.max(0.005),
                bk as f64 / kib.max(1) as f64
            );
        }
        if let Some((vs, vk, _)) = vec {
            println!(
                "history: vs Vec<Value>: {:.1}x faster, RSS {:.1}x smaller",
                vs / s.max(0.005),
                vk as f64 / kib.max(1) as f64
            );
        }
    }
}
