//! `persyk context` on a long session, beside pi's SessionManager in the same run.
//!
//! Run: `cargo bench --bench history` (messages: `PERSYK_BENCH_MESSAGES`, default 150000,
//! about 215 MB). The session is generated once under the target dir (never committed): a
//! chain of user and assistant messages of realistic text, about 1.4 KB a line.
//!
//! Measured, each as the best of three runs of a separate process, wall time and peak RSS
//! (`/usr/bin/time -f "%e %M"`):
//! - `persyk context SESSION --json > /dev/null` (the release binary cargo built for this
//!   bench) and the human output;
//! - the baseline: pi's `SessionManager.open(file)` + `buildSessionContext()` in node (its
//!   `dist/core/session-manager.js`, imported alone so node 20 can load it), when
//!   pi is installed under `target/pi` (`npm install @earendil-works/pi-coding-agent@0.85.1`
//!   there); pi reads a copy whose header carries pi's version 3 (so it migrates nothing);
//! - a second baseline always available: every line read into a `Vec<serde_json::Value>`.
//!
//! Targets (issue #15): peak RSS < 5 % of the file; time ≥ 5× faster than pi.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use persyk::session::format::{Block, Entry, EntryBody, Header, Message, Role};

mod support;
use support::{sentences, vm_hwm_kib};

const ID: &str = "019a0000-0000-7000-8000-0000000000aa";

fn ts(i: u64) -> String {
    format!(
        "2026-03-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        1 + (i / 86_400_000) % 28,
        (i / 3_600_000) % 24,
        (i / 60_000) % 60,
        (i / 1000) % 60,
        i % 1000
    )
}

/// The session folder for `messages` messages (generated once), and pi's copy of its file.
fn generate(messages: u64) -> (PathBuf, PathBuf) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("bench-data")
        .join(format!("history-{messages}"));
    let file = dir.join("session.jsonl");
    let pi = dir.join("pi-session.jsonl");
    if file.exists() && pi.exists() {
        return (dir, pi);
    }
    fs::create_dir_all(&dir).expect("bench dir");
    let pool = sentences(509, 220, 0x5EED_0015);
    let tmp = dir.join("session.tmp");
    let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp).expect("create"));
    let header = Header {
        id: ID.into(),
        timestamp: ts(0),
    };
    writeln!(w, "{}", header.to_line()).expect("write");
    let mut parent: Option<String> = None;
    for n in 0..messages {
        let id = format!("019a{:012x}-7{:03x}-8000-{:012x}", n + 1, n % 4096, n + 1);
        let role = if n % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let text = pool[(n % pool.len() as u64) as usize].clone();
        let e = Entry {
            id: id.clone(),
            parent_id: parent.take(),
            timestamp: ts(n * 37),
            body: EntryBody::Message(Message::new(
                role,
                vec![Block::text(text)],
                1_772_000_000_000 + n,
            )),
        };
        writeln!(w, "{}", e.to_line()).expect("write");
        parent = Some(id);
    }
    w.flush().expect("flush");
    drop(w);
    fs::rename(&tmp, &file).expect("rename");
    // pi's copy: the same entries under pi's own header version.
    let mut out = BufWriter::new(File::create(&pi).expect("create pi copy"));
    let mut lines = BufReader::new(File::open(&file).expect("open")).lines();
    lines.next();
    writeln!(
        out,
        r#"{{"type":"session","version":3,"id":"{ID}","timestamp":"{}","cwd":"/tmp"}}"#,
        ts(0)
    )
    .expect("write");
    for l in lines {
        writeln!(out, "{}", l.expect("line")).expect("write");
    }
    out.flush().expect("flush");
    (dir, pi)
}

/// Best of three: (seconds, peak RSS KiB) of `cmd args…` with stdout to /dev/null.
fn measure(cmd: &str, args: &[&str]) -> Option<(f64, u64)> {
    let mut best: Option<(f64, u64)> = None;
    for _ in 0..3 {
        let out = Command::new("/usr/bin/time")
            .args(["-f", "%e %M", cmd])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "history: {cmd} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last()?;
        let mut it = last.split_whitespace();
        let secs: f64 = it.next()?.parse().ok()?;
        let kib: u64 = it.next()?.parse().ok()?;
        best = Some(match best {
            Some((s, k)) => (s.min(secs), k.min(kib)),
            None => (secs, kib),
        });
    }
    best
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
    let report = |what: &str, m: Option<(f64, u64)>| {
        if let Some((s, kib)) = m {
            let mib = kib as f64 / 1024.0;
            println!(
                "history: {what:<44} {s:6.2} s  peak RSS {mib:7.1} MiB ({:.1}% of file)",
                100.0 * mib / size_mib
            );
        } else {
            println!("history: {what:<44} not measured");
        }
        m
    };
    let json = report(
        "persyk context --json",
        measure(exe, &["context", dir_s, "--json"]),
    );
    report("persyk context (human)", measure(exe, &["context", dir_s]));

    // Baseline 1: pi 0.85 SessionManager.open + buildSessionContext.
    let pi_root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/pi");
    let pi = if pi_root
        .join("node_modules/@earendil-works/pi-coding-agent/package.json")
        .exists()
    {
        let script = pi_root.join("bench-context.cjs");
        fs::write(&script, PI_SCRIPT).expect("script");
        report(
            "baseline: pi SessionManager.open+buildContext",
            measure(
                "node",
                &[
                    script.to_str().expect("utf-8"),
                    pi_root.to_str().expect("utf-8"),
                    pi_file.to_str().expect("utf-8"),
                ],
            ),
        )
    } else {
        println!("history: baseline pi: not installed under target/pi (see the module doc)");
        None
    };
    // Baseline 2: every line into a Vec<serde_json::Value>.
    let me = std::env::current_exe().expect("exe");
    let me_s = me.to_str().expect("utf-8");
    let vec = {
        let mut best: Option<(f64, u64)> = None;
        for _ in 0..3 {
            let out = Command::new("/usr/bin/time")
                .args(["-f", "%e %M", me_s])
                .env("PERSYK_BENCH_CHILD_VEC", &file)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output()
                .expect("child");
            let err = String::from_utf8_lossy(&out.stderr);
            let mut it = err.lines().last().unwrap_or("").split_whitespace();
            if let (Some(Ok(s)), Some(Ok(k))) = (
                it.next().map(str::parse::<f64>),
                it.next().map(str::parse::<u64>),
            ) {
                best = Some(best.map_or((s, k), |(bs, bk)| (bs.min(s), bk.min(k))));
            }
        }
        best
    };
    report("baseline: serde_json Vec<Value> of every line", vec);

    if let Some((s, kib)) = json {
        let mib = kib as f64 / 1024.0;
        println!(
            "history: peak RSS {:.2}% of the file (target < 5%)",
            100.0 * mib / size_mib
        );
        if let Some((ps, pk)) = pi {
            println!(
                "history: speed-up over pi {:.1}x (target >= 5x), RSS {:.1}x smaller",
                ps / s.max(0.005),
                pk as f64 / kib.max(1) as f64
            );
        }
        if let Some((vs, vk)) = vec {
            println!(
                "history: vs Vec<Value>: {:.1}x faster, RSS {:.1}x smaller",
                vs / s.max(0.005),
                vk as f64 / kib.max(1) as f64
            );
        }
    }
}
