//! Store figures, each beside a baseline measured in the same run on the same file system:
//!
//! 1. Durable single-record append latency (p50/p99) vs raw `write` + `fdatasync` of the same
//!    bytes to a plain file.
//! 2. Batches of 256 records (one fsync per batch): records/s vs raw write + one fdatasync.
//! 3. Open + index of a generated session (default 1 GiB; `PERSYK_BENCH_STORE_MB`), audio in
//!    assets: wall time and peak RSS of a child process that only opens it, beside the time
//!    to read the same file with `cat`-like plain reads.
//!
//! Run: `cargo bench --bench store`. Nothing is asserted.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use persyk::session::format::{Block, Entry, EntryBody, Message, Role};
use persyk::session::store::{Roots, new_id, now_iso};
use persyk::session::{LeafSelector, Store};

mod support;
use support::{generate_in, vm_hwm_kib, write_assets};

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn record(parent: Option<String>, i: usize) -> String {
    let text = format!(
        "Dictated note {i}: remember to send the quarterly numbers to Zoë before Friday, \
         and book the café for the team lunch — about twelve people, vegetarian options."
    );
    Entry {
        id: new_id(),
        parent_id: parent,
        timestamp: now_iso(),
        body: EntryBody::Message(Message::new(
            Role::User,
            vec![Block::text(text)],
            1_772_000_000_000,
        )),
    }
    .to_line()
}

fn bench_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-store");
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).expect("bench dir");
    d
}

fn main() {
    if let Ok(root) = std::env::var("PERSYK_BENCH_CHILD_OPEN") {
        let t = Instant::now();
        let store = Store::new(Roots::new(PathBuf::from(root), Vec::new()).expect("roots"));
        let h = store.open_session(0, "big").expect("open");
        let n = h.with_index(|i| i.len());
        let wall = t.elapsed();
        let c = h.continuation(&LeafSelector::Default).expect("leaf");
        assert!(c.leaf().is_some());
        println!("{n} {} {}", wall.as_micros(), vm_hwm_kib());
        return;
    }
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let dir = bench_dir();
    let root = dir.join("root");
    fs::create_dir_all(&root).expect("root");
    let store = Store::new(Roots::new(root.clone(), Vec::new()).expect("roots"));
    let handle = store.create_session().expect("session");
    let raw_path = dir.join("raw.jsonl");
    let mut raw = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&raw_path)
        .expect("raw");

    // 1. Single-record latency, interleaved so both see the same device state.
    let n: usize = std::env::var("PERSYK_BENCH_APPENDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let mut parent = None;
    let (mut t_store, mut t_raw) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let line = record(parent.clone(), i);
        let mut bytes = line.clone().into_bytes();
        bytes.push(b'\n');
        let t = Instant::now();
        raw.write_all(&bytes).expect("raw write");
        raw.sync_data().expect("raw sync");
        t_raw.push(t.elapsed());
        let t = Instant::now();
        let acks = handle
            .append(std::slice::from_ref(&line))
            .into_result()
            .expect("append");
        t_store.push(t.elapsed());
        parent = Some(acks[0].id.clone());
    }
    t_store.sort();
    t_raw.sort();
    let (s50, s99, r50, r99) = (
        pct(&t_store, 0.5),
        pct(&t_store, 0.99),
        pct(&t_raw, 0.5),
        pct(&t_raw, 0.99),
    );
    println!("store: single-record durable append, {n} samples");
    println!(
        "store:   raw write+fdatasync   p50 {:8.1} µs   p99 {:8.1} µs",
        r50.as_secs_f64() * 1e6,
        r99.as_secs_f64() * 1e6
    );
    println!(
        "store:   persyk append         p50 {:8.1} µs   p99 {:8.1} µs",
        s50.as_secs_f64() * 1e6,
        s99.as_secs_f64() * 1e6
    );
    println!(
        "store:   ratio p50 {:.2}x  p99 {:.2}x (target <= 1.3x)",
        s50.as_secs_f64() / r50.as_secs_f64(),
        s99.as_secs_f64() / r99.as_secs_f64()
    );

    // 2. Batches of 256.
    let batches = 40;
    let mut store_time = Duration::ZERO;
    let mut raw_time = Duration::ZERO;
    for b in 0..batches {
        let mut lines = Vec::with_capacity(256);
        for i in 0..256 {
            let line = record(parent.clone(), b * 256 + i);
            parent = serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| v.get("id").and_then(|x| x.as_str()).map(str::to_owned));
            lines.push(line);
        }
        let mut buf = Vec::new();
        for l in &lines {
            buf.extend_from_slice(l.as_bytes());
            buf.push(b'\n');
        }
        let t = Instant::now();
        raw.write_all(&buf).expect("raw");
        raw.sync_data().expect("sync");
        raw_time += t.elapsed();
        let t = Instant::now();
        let acks = handle.append(&lines).into_result().expect("batch");
        store_time += t.elapsed();
        assert_eq!(acks.len(), 256);
    }
    let recs = (batches * 256) as f64;
    println!("store: batches of 256 records, {batches} batches, one fsync each");
    println!(
        "store:   raw write+fdatasync   {:10.0} records/s",
        recs / raw_time.as_secs_f64()
    );
    println!(
        "store:   persyk append         {:10.0} records/s",
        recs / store_time.as_secs_f64()
    );

    // 3. Open + index a big session: `PERSYK_BENCH_STORE_MB` is the whole session folder
    //    (session.jsonl + its WAV assets), default 1 GiB. About 1/6 of a dictation session's
    //    bytes are records; the rest is the audio they reference.
    let total_mb: u64 = std::env::var("PERSYK_BENCH_STORE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let mb = (total_mb / 6).max(1);
    let data_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-data");
    let generated = generate_in(&data_dir, mb);
    let big_root = data_dir.join(format!("store-root-{mb}"));
    let big = big_root.join("big");
    fs::create_dir_all(big.join("assets")).expect("big dir");
    let target = big.join("session.jsonl");
    if !target.exists() {
        fs::hard_link(&generated, &target)
            .or_else(|_| fs::copy(&generated, &target).map(|_| ()))
            .expect("link");
    }
    let (n_assets, asset_bytes) = write_assets(&target, &big.join("assets"));
    let size = fs::metadata(&target).expect("size").len();
    let t = Instant::now();
    let mut f = File::open(&target).expect("open");
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf).expect("read") > 0 {}
    let read_time = t.elapsed();
    let exe = std::env::current_exe().expect("exe");
    let out = Command::new(&exe)
        .env("PERSYK_BENCH_CHILD_OPEN", &big_root)
        .output()
        .expect("child");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<u64> = text
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() == 3 {
        let mib = size as f64 / 1048576.0;
        let folder = (size + asset_bytes) as f64 / 1048576.0;
        let rss = v[2] as f64 / 1024.0;
        println!(
            "store: open + index a {folder:.0} MiB session folder: session.jsonl {mib:.0} MiB ({} entries) + {n_assets} WAV assets {:.0} MiB",
            v[0],
            asset_bytes as f64 / 1048576.0
        );
        println!(
            "store:   plain sequential read of session.jsonl {:8.2} s",
            read_time.as_secs_f64()
        );
        println!(
            "store:   persyk open (validate + index)         {:8.2} s",
            v[1] as f64 / 1e6
        );
        println!(
            "store:   peak RSS {rss:.1} MiB = {:.2}% of the session folder (target < 5%), {:.2}% of session.jsonl alone, {:.0} B/entry",
            100.0 * rss / folder,
            100.0 * rss / mib,
            v[2] as f64 * 1024.0 / v[0] as f64
        );
    } else {
        println!(
            "store: open child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = Path::new(&raw_path);
}
