//! Search figures beside ripgrep, measured in the same run over the same files (warm cache):
//!
//! - a generated corpus of `PERSYK_BENCH_SEARCH_SESSIONS` sessions (default 2000) averaging
//!   `PERSYK_BENCH_SEARCH_KB` KiB (default 200, so ~400 MB): realistic dictation text plus
//!   realtime events and WAV references, in two roots;
//! - queries: a rare word (planted in 1% of the sessions), a common word, a missing word and
//!   a rare non-ASCII word (0.5%), each as the first page (`limit` 50, what the app asks for) and
//!   exhaustively (every page at `limit` 500 — every file is read);
//! - baseline: `rg --fixed-strings --ignore-case --count-matches WORD ROOTS…` (all cores);
//! - peak RSS of a child process that discovers and searches every page (`VmHWM`);
//! - the app's search-as-you-type (issue #15): one `SearchCache` warmed by a first query, then
//!   a *second* query of each word, every page, beside the same ripgrep run.
//!
//! Run: `scripts/bench-search` or `cargo bench --bench search`. Nothing is asserted.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use persyk::session::discover::{self, RootSpec};
use persyk::session::search::{self, Page, PageRequest, Query};
use persyk::session::search_cache::{self, RACY_WINDOW, SearchCache};
use rayon::prelude::*;

mod support;
use support::{SessionSpec, vm_hwm_kib, write_session_in};

const RARE: &str = "zeppelin";
const RARE_NON_ASCII: &str = "Größenwahn";
const COMMON: &str = "meeting";
const MISSING: &str = "xylophone";

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The corpus directory with its two roots, generated once per size and reused.
fn corpus(sessions: u64, avg_kib: u64) -> (PathBuf, Vec<PathBuf>) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-search-{sessions}x{avg_kib}k"));
    let roots = vec![dir.join("root-a"), dir.join("root-b")];
    let done = dir.join("complete");
    if done.exists() {
        return (dir, roots);
    }
    let _ = fs::remove_dir_all(&dir);
    let t = Instant::now();
    (0..sessions).into_par_iter().for_each(|i| {
        let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        x ^= x >> 29;
        // Sizes from 20% to 180% of the average: a few long dictations, many short ones.
        let bytes = avg_kib * 1024 * (20 + x % 161) / 100;
        let rare = i % 100 == 37;
        let planted: Vec<&str> = match (rare, i % 200 == 71) {
            (true, _) => vec![RARE],
            (_, true) => vec![RARE_NON_ASCII],
            _ => vec![],
        };
        let id = format!(
            "019b{i:08x}-0000-7000-8000-{x:012x}",
            x = x & 0xFFFF_FFFF_FFFF
        );
        let created = format!(
            "2026-{:02}-{:02}T{:02}:{:02}:00.000Z",
            1 + i / 200 % 12,
            1 + i / 7 % 28,
            i % 24,
            i % 60
        );
        let root = &roots[(i % 2) as usize];
        write_session_in(
            &root.join(&id),
            &SessionSpec {
                id: &id,
                created: &created,
                bytes,
                seed: x,
                planted: &planted,
            },
        );
    });
    fs::write(&done, b"").expect("marker");
    println!(
        "search: generated the corpus in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    (dir, roots)
}

fn specs(roots: &[PathBuf]) -> Vec<RootSpec> {
    roots
        .iter()
        .map(|r| RootSpec::explicit(r.clone()))
        .collect()
}

/// Discovery plus one page, or every page; returns the number of hits.
fn ours(roots: &[PathBuf], word: &str, every_page: bool) -> usize {
    let d = discover::discover(&specs(roots));
    let q = Query::new(word).expect("query");
    let mut req = PageRequest {
        limit: if every_page { 500 } else { 50 },
        cursor: None,
    };
    let mut n = 0;
    loop {
        let Page { rows, next, .. } = search::search(&d, &q, &req);
        n += rows.len();
        match next {
            Some(c) if every_page => req.cursor = Some(c),
            _ => return n,
        }
    }
}

/// Like [`ours`], through the app's per-file cache.
fn cached(roots: &[PathBuf], word: &str, every_page: bool, cache: &SearchCache) -> usize {
    let d = discover::discover(&specs(roots));
    let q = Query::new(word).expect("query");
    let mut req = PageRequest {
        limit: if every_page { 500 } else { 50 },
        cursor: None,
    };
    let mut n = 0;
    loop {
        let Page { rows, next, .. } = search_cache::search(&d, &q, &req, cache);
        n += rows.len();
        match next {
            Some(c) if every_page => req.cursor = Some(c),
            _ => return n,
        }
    }
}

/// ripgrep's wall time (process start to exit) and the number of files with a match.
fn rg(roots: &[PathBuf], word: &str) -> (Duration, usize) {
    let t = Instant::now();
    let out = Command::new("rg")
        .args(["--fixed-strings", "--ignore-case", "--count-matches", word])
        .args(roots)
        .stderr(Stdio::null())
        .output()
        .expect("ripgrep (`apt-get install ripgrep`)");
    (
        t.elapsed(),
        out.stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count(),
    )
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        let v = std::hint::black_box(f());
        best = best.min(t.elapsed());
        out = Some(v);
    }
    (best, out.expect("at least one run"))
}

fn corpus_bytes(roots: &[PathBuf]) -> (u64, usize) {
    let mut total = (0u64, 0usize);
    for r in roots {
        for e in fs::read_dir(r).expect("root").flatten() {
            if let Ok(m) = fs::metadata(e.path().join("session.jsonl")) {
                total.0 += m.len();
                total.1 += 1;
            }
        }
    }
    total
}

fn child_rss(exe: &Path, roots: &[PathBuf], word: &str) -> (u64, u64) {
    let out = Command::new(exe)
        .env("PERSYK_BENCH_CHILD_SEARCH", word)
        .env(
            "PERSYK_BENCH_CHILD_ROOTS",
            std::env::join_paths(roots).expect("roots"),
        )
        .output()
        .expect("child");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace().map(|v| v.parse().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

fn main() {
    if let Ok(word) = std::env::var("PERSYK_BENCH_CHILD_SEARCH") {
        let roots: Vec<PathBuf> = std::env::var_os("PERSYK_BENCH_CHILD_ROOTS")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default();
        let hits = ours(&roots, &word, true);
        println!("{hits} {}", vm_hwm_kib());
        return;
    }
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --benches` smoke: nothing to measure.
    }
    let sessions = env_num("PERSYK_BENCH_SEARCH_SESSIONS", 2000);
    let avg_kib = env_num("PERSYK_BENCH_SEARCH_KB", 200);
    let runs = env_num("PERSYK_BENCH_SEARCH_RUNS", 5) as usize;
    let (_dir, roots) = corpus(sessions, avg_kib);
    let (bytes, files) = corpus_bytes(&roots);
    let mib = bytes as f64 / 1048576.0;
    println!(
        "search: corpus {files} sessions, {mib:.1} MiB, {} threads, best of {runs}",
        rayon::current_num_threads()
    );
    // Warm the page cache (twice over everything).
    rg(&roots, MISSING);
    ours(&roots, MISSING, true);

    let (t_disc, found) = best_of(runs, || discover::discover(&specs(&roots)).sessions.len());
    println!(
        "search: discovery of {found} sessions (header lines only): {:.1} ms",
        t_disc.as_secs_f64() * 1e3
    );
    let (t_list, _) = best_of(runs, || {
        let d = discover::discover(&specs(&roots));
        search::list(&d, &PageRequest::default()).rows.len()
    });
    println!(
        "search: `persyk sessions` first page (50 rows, each file read in full): {:.1} ms",
        t_list.as_secs_f64() * 1e3
    );
    let (t_scan, entries) = best_of(runs.min(3), || {
        let d = discover::discover(&specs(&roots));
        d.sessions
            .par_iter()
            .map(|s| {
                persyk::session::scan_path(&s.file())
                    .map(|i| i.len())
                    .unwrap_or(0)
            })
            .sum::<usize>()
    });
    println!(
        "search: validation floor, scan_path of every file ({entries} entries, rayon): {:.1} ms = {:.0} MiB/s",
        t_scan.as_secs_f64() * 1e3,
        mib / t_scan.as_secs_f64()
    );
    println!(
        "search: {:<28} {:>6} {:>10} {:>10} {:>6} {:>13} {:>6} {:>10}",
        "query", "hits", "page 50", "rg", "ratio", "every page", "ratio", "rg files"
    );
    let exe = std::env::current_exe().expect("exe");
    let mut rss = Vec::new();
    for (what, word) in [
        ("rare", RARE),
        ("rare, non-ASCII", RARE_NON_ASCII),
        ("common", COMMON),
        ("missing", MISSING),
    ] {
        let (t_rg, rg_files) = best_of(runs, || rg(&roots, word).1);
        let (t_page, _) = best_of(runs, || ours(&roots, word, false));
        let (t_all, hits) = best_of(runs, || ours(&roots, word, true));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "search: {:<28} {hits:>6} {:>8.1}ms {:>8.1}ms {:>5.2}x {:>11.1}ms {:>5.2}x {rg_files:>10}",
            format!("{what} ({word:?})"),
            ms(t_page),
            ms(t_rg),
            ms(t_page) / ms(t_rg),
            ms(t_all),
            ms(t_all) / ms(t_rg),
        );
        rss.push((word, child_rss(&exe, &roots, word)));
    }
    // Search-as-you-type: the first query fills the cache (files older than the racy window
    // only), every later keystroke reuses it.
    std::thread::sleep(RACY_WINDOW);
    let cache = SearchCache::new();
    let t = Instant::now();
    let first = cached(&roots, MISSING, true, &cache);
    println!(
        "search: app cache, first query (every file validated and summarized): {:.1} ms, {first} hits, {} summaries",
        t.elapsed().as_secs_f64() * 1e3,
        cache.len()
    );
    println!(
        "search: {:<28} {:>6} {:>13} {:>10} {:>6} {:>10}",
        "second query (app cache)", "hits", "every page", "rg", "ratio", "page 50"
    );
    for (what, word) in [
        ("rare", RARE),
        ("rare, non-ASCII", RARE_NON_ASCII),
        ("common", COMMON),
        ("missing", MISSING),
    ] {
        let (t_rg, _) = best_of(runs, || rg(&roots, word).1);
        let (t_all, hits) = best_of(runs, || cached(&roots, word, true, &cache));
        let (t_page, _) = best_of(runs, || cached(&roots, word, false, &cache));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "search: {:<28} {hits:>6} {:>11.1}ms {:>8.1}ms {:>5.2}x {:>8.1}ms  (target ratio <= 1.00x)",
            format!("{what} ({word:?})"),
            ms(t_all),
            ms(t_rg),
            ms(t_all) / ms(t_rg),
            ms(t_page),
        );
    }
    let stats = cache.stats();
    println!(
        "search: app cache: {} sessions answered from summaries, {} scanned",
        stats.hits, stats.scans
    );
    for (word, (hits, kib)) in rss {
        println!(
            "search: peak RSS, discover + every page for {word:?} ({hits} hits): {:.1} MiB (target < 64 MiB)",
            kib as f64 / 1024.0
        );
    }
}
