//! The app's read-only view of a long session (issue #15, item 2): what opening a session
//! from the search panel costs, through `PersykUi` and the real backend, as the app does it.
//!
//! For a chain of 2,000 messages (≈ 3 MB) and one of 150,000 (≈ 240 MB), each in its own
//! child process of this bench (so one figure never carries the other's memory):
//! - RSS above idle: the process's `VmRSS` with the search panel listing the session (idle)
//!   and again after the opened view's first paint and after scrolling;
//! - first paint: from the click on "Open" to the first frame that shows the first
//!   message (frames are stepped back to back, as a window does while it waits for its
//!   backend);
//! - frame time while scrolling: 400 frames, each with a 600-point wheel scroll (about a
//!   screenful a frame, a fast fling); median and 95th percentile of the frame, which is a
//!   full egui pass of `PersykUi::ui` plus the AccessKit update (egui_kittest's `step`), not
//!   the GPU side; also p99 and max, the max of the frames where a page of messages arrived
//!   and of the others, and the five slowest frames with what happened in them (pages
//!   arrived, rows laid out with text and waiting for theirs, text layouts cached, font
//!   atlas fill).
//!
//! Targets (issue #15): 2k: < 16 MB above idle; 150k: first paint < 300 ms, < 64 MB above
//! idle, frame < 2 ms while scrolling. Run: `cargo bench --bench app_history`
//! (`PERSYK_BENCH_MESSAGES=2000,150000` by default). Nothing is asserted.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use eframe::egui;
use eframe::egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use persyk::app::ui::PersykUi;
use persyk::settings::Settings;
use support::app::ui_with;

const SCROLL_FRAMES: usize = 400;
const SCROLL_POINTS: f32 = 600.0;
const WAIT: Duration = Duration::from_secs(300);

/// The root (one session folder in it) for `messages` messages.
fn root_for(messages: u64) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("bench-data")
        .join(format!("app-history-{messages}"));
    support::chain_session(&root.join("long-session"), messages);
    root
}

fn harness(root: &Path) -> Harness<'static, PersykUi> {
    let mut settings = Settings::default();
    settings.sessions.directory = Some(root.to_path_buf());
    let ui = ui_with(settings);
    // The generated text has emoji the test fonts lack: draw them as boxes, as a window
    // without an emoji font would.
    Harness::builder()
        .with_size(egui::vec2(520.0, 600.0))
        .allow_missing_glyphs()
        .build_ui_state(|ui, state: &mut PersykUi| state.ui(ui), ui)
}

fn wait_until(
    h: &mut Harness<'static, PersykUi>,
    what: &str,
    done: impl Fn(&Harness<'static, PersykUi>) -> bool,
) {
    let start = Instant::now();
    loop {
        h.step();
        if done(h) {
            return;
        }
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn has(h: &Harness<'static, PersykUi>, text: &str) -> bool {
    h.query_all_by_label_contains(text).next().is_some()
}

/// One measurement, in this (child) process; prints one `RESULT` line.
fn child(messages: u64) {
    let root = root_for(messages);
    let first_words: String = support::chain_text(0).chars().take(24).collect();
    let mut h = harness(&root);
    h.step();
    let fresh_kib = support::vm_rss_kib();
    h.get_by_role_and_label(Role::Button, "Search").click();
    wait_until(&mut h, "the session in the list", |h| {
        h.query_all_by_role_and_label(Role::Button, "Open")
            .next()
            .is_some()
    });
    for _ in 0..10 {
        h.step();
    }
    let idle_kib = support::vm_rss_kib();

    h.get_by_role_and_label(Role::Button, "Open").click();
    let start = Instant::now();
    loop {
        h.step();
        if has(&h, "Read-only: the session as it was") && has(&h, &first_words) {
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "timed out waiting for the first paint"
        );
    }
    let first_paint = start.elapsed();
    let open_kib = support::vm_rss_kib();

    h.event(egui::Event::PointerMoved(egui::pos2(260.0, 400.0)));
    h.step();
    let mut frames = Vec::with_capacity(SCROLL_FRAMES);
    for _ in 0..SCROLL_FRAMES {
        h.event(egui::Event::MouseWheel {
            unit: egui::MouseWheelUnit::Point,
            delta: egui::vec2(0.0, -SCROLL_POINTS),
            phase: egui::TouchPhase::Move,
            source: egui::MouseWheelSource::Unknown,
            modifiers: egui::Modifiers::default(),
        });
        let pages_before = h.state().pages_received();
        let (t, cpu, sw) = (
            Instant::now(),
            support::thread_cpu(),
            support::thread_switches(),
        );
        h.step();
        let elapsed = t.elapsed();
        let cpu = support::thread_cpu().saturating_sub(cpu);
        let sw_after = support::thread_switches();
        let switches = (sw_after.0 - sw.0, sw_after.1 - sw.1);
        // What the frame did, looked at after it was timed.
        frames.push(Frame {
            elapsed,
            cpu,
            switches,
            pages: h.state().pages_received() - pages_before,
            rows: h.query_all_by_role_and_label(Role::Button, "Copy").count(),
            waiting_rows: h.query_all_by_label("…").count(),
            galleys: h.ctx.fonts(|f| f.num_galleys_in_cache()),
            atlas: h.ctx.fonts(|f| f.font_atlas_fill_ratio()),
        });
    }
    // Let the last pages arrive, then one more look at memory.
    for _ in 0..20 {
        h.step();
        std::thread::sleep(Duration::from_millis(5));
    }
    let scrolled_kib = support::vm_rss_kib();
    // The view moved: the first message is out of it.
    let still_at_top = has(&h, &first_words);
    eprintln!("scrolled: the first message still shown: {still_at_top}");
    let hwm_kib = support::vm_hwm_kib();
    let mut times: Vec<Duration> = frames.iter().map(|f| f.elapsed).collect();
    times.sort();
    let mut cpus: Vec<Duration> = frames.iter().map(|f| f.cpu).collect();
    cpus.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let max_where = |page: bool| {
        frames
            .iter()
            .filter(|f| (f.pages > 0) == page)
            .map(|f| us(f.elapsed))
            .fold(0.0, f64::max)
    };
    println!(
        "RESULT {} {} {} {} {} {} {:.1} {:.1} {:.1} {:.1} {:.1} {:.1} {} {:.1} {:.1}",
        fresh_kib,
        idle_kib,
        open_kib,
        scrolled_kib,
        hwm_kib,
        first_paint.as_micros(),
        us(times[times.len() / 2]),
        us(times[times.len() * 95 / 100]),
        us(times[times.len() * 99 / 100]),
        us(times[times.len() - 1]),
        max_where(false),
        max_where(true),
        frames.iter().filter(|f| f.pages > 0).count(),
        us(cpus[cpus.len() * 99 / 100]),
        us(cpus[cpus.len() - 1]),
    );
    // Frame time by the number of rows laid out with their text.
    let most = frames.iter().map(|f| f.rows).max().unwrap_or(0);
    for rows in 0..=most {
        let mut t: Vec<f64> = frames
            .iter()
            .filter(|f| f.rows == rows)
            .map(|f| us(f.elapsed))
            .collect();
        if t.is_empty() {
            continue;
        }
        t.sort_by(f64::total_cmp);
        println!(
            "SLOW   {} frames with {rows} rows of text: median {:.0} µs, max {:.0} µs",
            t.len(),
            t[t.len() / 2],
            t[t.len() - 1]
        );
    }
    // The slowest frames and what happened in them.
    let mut slowest: Vec<(usize, &Frame)> = frames.iter().enumerate().collect();
    slowest.sort_by_key(|(_, f)| std::cmp::Reverse(f.elapsed));
    for (i, f) in slowest.iter().take(5) {
        let before = i.checked_sub(1).map(|p| &frames[p]);
        println!(
            "SLOW frame {i}: {:.0} µs (CPU {:.0} µs; {} waits, {} preemptions); pages arrived {}; rows with text {} (before {}), rows waiting {} (before {}); galleys in cache {} (before {}); font atlas {:.1}% (before {:.1}%)",
            us(f.elapsed),
            us(f.cpu),
            f.switches.0,
            f.switches.1,
            f.pages,
            f.rows,
            before.map_or(0, |b| b.rows),
            f.waiting_rows,
            before.map_or(0, |b| b.waiting_rows),
            f.galleys,
            before.map_or(0, |b| b.galleys),
            f.atlas * 100.0,
            before.map_or(0.0, |b| b.atlas * 100.0),
        );
    }
}

/// One scroll frame: its time and what it did.
struct Frame {
    elapsed: Duration,
    /// CPU time of the UI thread in the frame (wall time minus time spent waiting for a core).
    cpu: Duration,
    /// The UI thread's (voluntary: waited, involuntary: preempted) context switches.
    switches: (i64, i64),
    /// Pages of messages that arrived from the backend in this frame.
    pages: u64,
    /// Rows laid out with their text (each has a Copy button).
    rows: usize,
    /// Rows laid out as "…" (their page not loaded yet).
    waiting_rows: usize,
    /// Text layouts in egui's cache after the frame (the last frame's and this one's).
    galleys: usize,
    /// How full the font atlas is (a full one is cleared and refilled).
    atlas: f32,
}

fn main() {
    if let Ok(m) = std::env::var("PERSYK_BENCH_APP_HISTORY_CHILD") {
        child(m.parse().expect("messages"));
        return;
    }
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --benches` smoke: nothing to measure.
    }
    let sizes: Vec<u64> = std::env::var("PERSYK_BENCH_MESSAGES")
        .unwrap_or_else(|_| "2000,150000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let me = std::env::current_exe().expect("exe");
    println!(
        "app history view (520x600 pt window, real backend; RSS in MiB; {SCROLL_FRAMES} scroll frames of {SCROLL_POINTS} pt)"
    );
    for messages in sizes {
        let file = root_for(messages).join("long-session/session.jsonl");
        let size_mib = std::fs::metadata(&file).expect("session").len() as f64 / 1048576.0;
        // Warm the page cache, as for a session read recently.
        let _ = std::fs::read(&file);
        let out = Command::new(&me)
            .env("PERSYK_BENCH_APP_HISTORY_CHILD", messages.to_string())
            .output()
            .expect("child");
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(line) = text.lines().find_map(|l| l.strip_prefix("RESULT ")) else {
            println!(
                "  {messages} messages: child failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            continue;
        };
        let v: Vec<f64> = line
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let mib = |kib: f64| kib / 1024.0;
        let (fresh, idle, open, scrolled, hwm) = (v[0], v[1], v[2], v[3], v[4]);
        println!("  {messages} messages ({size_mib:.1} MiB file):");
        println!(
            "    RSS: window {:.1}, search panel (idle) {:.1}, opened {:.1} (+{:.1} above idle), after scrolling {:.1} (+{:.1}), peak {:.1} (+{:.1})",
            mib(fresh),
            mib(idle),
            mib(open),
            mib(open - idle),
            mib(scrolled),
            mib(scrolled - idle),
            mib(hwm),
            mib(hwm - idle),
        );
        println!(
            "    first paint {:.1} ms; frame while scrolling: median {:.0} µs, p95 {:.0} µs, p99 {:.0} µs, max {:.0} µs (max {:.0} µs in frames without a page arriving, {:.0} µs in the {} with)",
            v[5] / 1000.0,
            v[6],
            v[7],
            v[8],
            v[9],
            v[10],
            v[11],
            v[12]
        );
        println!(
            "    UI thread CPU per frame (wall time less waiting for a core): p99 {:.0} µs, max {:.0} µs",
            v[13], v[14]
        );
        for slow in text.lines().filter(|l| l.starts_with("SLOW ")) {
            println!("    {slow}");
        }
    }
}
