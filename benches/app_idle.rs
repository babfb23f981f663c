//! CPU use of the real app while nothing happens and while a recording shows the indicator,
//! side by side, measured in the same run on the same throw-away desktop (`tests/xapp`:
//! Xvfb, a private session bus with a tray host stand-in, a PulseAudio sine source as the
//! microphone, `persyk fake-provider`).
//!
//! Figures (process CPU time, user + system of all threads, from `/proc/PID/stat`, over
//! `PERSYK_BENCH_IDLE_SECS` seconds each, default 20; as % of one core):
//! 1. idle: `persyk app --hidden`, the window in the tray, no recording, indicator hidden;
//! 2. recording, indicator shown (started with the hotkey);
//! 3. recording, `feedback.indicator: false`: the baseline that figure 2 is read against —
//!    capture, websocket and the tray cost the same in both.
//!
//! Each figure runs its own app process on a fresh desktop (the PulseAudio sine source gives
//! nothing to a second stream); a recording that ends by itself before the measurement is
//! over (a starved test microphone on a loaded machine) is tried again, at most three times.
//!
//! Run: `cargo bench --bench app_idle` (needs what `scripts/setup` installs). Nothing is
//! asserted. Note: on X11 eframe treats a hidden main window as visible (no occlusion
//! events), so the main window's ui also runs while recording; that is in both 2 and 3.

#[cfg(target_os = "linux")]
#[path = "../tests/xapp/mod.rs"]
mod xapp;

#[cfg(target_os = "linux")]
use linux::run;

#[cfg(not(target_os = "linux"))]
fn run() {
    println!("app_idle: the throw-away desktop (Xvfb, D-Bus, PulseAudio) is Linux only");
}

fn main() {
    run();
}

#[cfg(target_os = "linux")]
mod linux {
    use std::process::Child;
    use std::time::{Duration, Instant};

    use super::xapp::{self, Desktop, INDICATOR_TITLE, WAIT};

    /// Time given to start-up before measuring.
    const SETTLE_SECS: u64 = 3;

    fn measure_secs() -> u64 {
        std::env::var("PERSYK_BENCH_IDLE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(20)
    }

    /// CPU time of `app` over `secs` seconds, as % of one core.
    fn cpu_percent(app: &Child, secs: u64) -> f64 {
        let cpu0 = xapp::cpu_time(app.id());
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        let cpu = xapp::cpu_time(app.id()) - cpu0;
        100.0 * cpu.as_secs_f64() / t0.elapsed().as_secs_f64()
    }

    fn wait(what: &str, done: impl Fn() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// How many recordings in `desktop` have ended.
    fn ended(desktop: &Desktop) -> usize {
        xapp::sessions(&desktop.sessions())
            .iter()
            .filter(|s| s.contains("\"recording.finished\""))
            .count()
    }

    /// Starts a recording with the hotkey, measures, stops it; `None` when the recording ended
    /// by itself meanwhile (a starved test microphone), which would make the figure meaningless.
    fn recording_percent(
        desktop: &Desktop,
        app: &Child,
        indicator: bool,
        secs: u64,
    ) -> Option<f64> {
        let before = ended(desktop);
        let started = xapp::sessions(&desktop.sessions()).len();
        assert!(desktop.xdotool(&["key", "alt+space"]).status.success());
        wait("the recording to start", || {
            xapp::sessions(&desktop.sessions()).len() > started
        });
        if indicator {
            wait("the indicator", || {
                !desktop.windows(INDICATOR_TITLE).is_empty()
            });
        }
        // Let connecting and the first turn settle.
        std::thread::sleep(Duration::from_secs(1));
        let percent = cpu_percent(app, secs);
        let still_running = ended(desktop) == before;
        assert!(desktop.xdotool(&["key", "alt+space"]).status.success());
        wait("the recording to end", || ended(desktop) > before);
        still_running.then_some(percent)
    }

    fn show(label: &str, percent: Option<f64>) {
        match percent {
            Some(p) => println!("{label:<46} {p:>7.2} % of one core"),
            None => println!("{label:<46}     n/a (every recording ended early: see stderr)"),
        }
    }

    /// Why the last recording on `desktop` ended, for stderr.
    fn how_it_ended(desktop: &Desktop) -> String {
        xapp::sessions(&desktop.sessions())
            .iter()
            .filter_map(|s| s.lines().find(|l| l.contains("\"recording.finished\"")))
            .map(|l| l.chars().skip(l.find("durationMs").unwrap_or(0)).collect())
            .next_back()
            .unwrap_or_default()
    }

    /// Figure 2 or 3: the app with `feedback.indicator` as given, recording. Each attempt runs
    /// on a fresh desktop (the sine source serves one stream); up to three attempts, since on a
    /// loaded machine the test microphone can stall for the 2 s that end a recording as silent.
    fn recording_figure(indicator: bool, secs: u64) -> Option<f64> {
        for attempt in 1..=3 {
            let desktop = Desktop::start(xapp::RECORDINGS).expect("the same tools as before");
            let mut app = desktop.launch(indicator, &["app", "--hidden"]);
            desktop.wait_tray();
            std::thread::sleep(Duration::from_secs(SETTLE_SECS));
            let percent = recording_percent(&desktop, &app, indicator, secs);
            let _ = app.kill();
            let _ = app.wait();
            if percent.is_some() {
                return percent;
            }
            eprintln!(
                "attempt {attempt} (indicator {indicator}): the recording ended early: {}",
                how_it_ended(&desktop)
            );
        }
        None
    }

    pub fn run() {
        let secs = measure_secs();
        let Some(desktop) = Desktop::start(xapp::RECORDINGS) else {
            return;
        };
        println!("app_idle: persyk app --hidden on Xvfb, CPU over {secs} s per figure");
        let mut app = desktop.launch(true, &["app", "--hidden"]);
        desktop.wait_tray();
        std::thread::sleep(Duration::from_secs(SETTLE_SECS)); // start-up done
        let idle = cpu_percent(&app, secs);
        let _ = app.kill();
        let _ = app.wait();
        drop(desktop);

        let shown = recording_figure(true, secs);
        let without = recording_figure(false, secs);

        show("idle (indicator hidden)", Some(idle));
        show("recording, indicator shown", shown);
        show("recording, indicator off (baseline)", without);
        if let (Some(a), Some(b)) = (shown, without) {
            println!(
                "{:<46} {:>7.2} % of one core",
                "the indicator's own share",
                a - b
            );
        }
    }
}
