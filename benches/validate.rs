//! Validate + index a generated session file and print throughput beside the baseline
//! measured in the same run: `serde_json::from_slice::<Value>` on every line, no validation.
//!
//! Run: `cargo bench --bench validate` (size: `PERSYK_BENCH_MB`, default 200).
//! Peak memory is measured in child processes (one scan each) at several file sizes, so the
//! figure belongs to the scan alone: `VmHWM` from /proc/self/status.
//!
//! The file mixes what a dictation session really holds: realtime events (deltas, audio
//! appends whose bytes live in the WAV asset, completions), user and assistant messages with
//! realistic text (accents, emoji, quotes), labels, custom state, recording lifecycle.

use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

mod support;
use support::{generate, vm_hwm_kib};

/// The baseline: read lines and parse each into a `serde_json::Value`, nothing else.
fn baseline(path: &Path) -> usize {
    let mut r = BufReader::with_capacity(256 * 1024, File::open(path).expect("open"));
    let mut line = Vec::new();
    let mut n = 0;
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).expect("read") == 0 {
            break;
        }
        let v: Value = serde_json::from_slice(&line).expect("baseline parse");
        n += usize::from(v.is_object());
    }
    n
}

fn best_of<F: FnMut() -> usize>(runs: usize, mut f: F) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut out = 0;
    for _ in 0..runs {
        let t = Instant::now();
        out = std::hint::black_box(f());
        best = best.min(t.elapsed());
    }
    (best, out)
}

fn main() {
    // Child mode: one scan or one baseline pass, then print peak RSS.
    if let Ok(path) = std::env::var("PERSYK_BENCH_CHILD_SCAN") {
        let index = persyk::session::scan_path(Path::new(&path)).expect("scan");
        assert!(index.is_valid());
        println!("{} {}", index.entries().len(), vm_hwm_kib());
        return;
    }
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --benches` smoke: nothing to measure.
    }
    let mb: u64 = std::env::var("PERSYK_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let path = generate(mb);
    let size = fs::metadata(&path).expect("metadata").len();
    let mib = size as f64 / (1024.0 * 1024.0);
    // Warm the page cache.
    baseline(&path);

    let (t_base, lines) = best_of(3, || baseline(&path));
    let (t_scan, entries) = best_of(3, || {
        let index = persyk::session::scan_path(&path).expect("scan");
        assert!(
            index.is_valid(),
            "generated file must validate: {:?}",
            &index.diagnostics()[..index.diagnostics().len().min(3)]
        );
        index.entries().len()
    });
    let base_mbs = mib / t_base.as_secs_f64();
    let scan_mbs = mib / t_scan.as_secs_f64();
    println!("validate: file {mib:.1} MiB, {lines} lines, {entries} entries indexed");
    println!(
        "validate: baseline serde_json::from_slice::<Value> per line  {base_mbs:8.1} MiB/s  ({:.3} s)",
        t_base.as_secs_f64()
    );
    println!(
        "validate: persyk scan (validate + index)                     {scan_mbs:8.1} MiB/s  ({:.3} s)",
        t_scan.as_secs_f64()
    );
    println!(
        "validate: ratio scan/baseline throughput = {:.2}x (target >= 0.70x)",
        scan_mbs / base_mbs
    );

    // Peak RSS of a scan alone, at growing file sizes.
    let exe = std::env::current_exe().expect("exe");
    let sizes = [mb / 4, mb / 2, mb];
    for s in sizes {
        let p = generate(s.max(1));
        let out = Command::new(&exe)
            .env("PERSYK_BENCH_CHILD_SCAN", &p)
            .output()
            .expect("child");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text.split_whitespace();
        let (n, kib): (u64, u64) = (
            it.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            it.next().and_then(|v| v.parse().ok()).unwrap_or(0),
        );
        let file_mib = fs::metadata(&p).map(|m| m.len()).unwrap_or(0) as f64 / 1048576.0;
        println!(
            "validate: peak RSS scanning {file_mib:7.1} MiB ({n} entries): {:7.1} MiB  ({:.1}% of file, {:.0} B/entry)",
            kib as f64 / 1024.0,
            100.0 * kib as f64 / 1024.0 / file_mib,
            kib as f64 * 1024.0 / n.max(1) as f64
        );
    }
}
