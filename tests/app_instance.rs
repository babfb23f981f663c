//! One Persyk per user, on the real binary (issue #25 item 4): on a throw-away X11 desktop
//! (`tests/xapp`: Xvfb, a private bus with a tray-host stand-in), Persyk started `--hidden`
//! shows its window when `persyk` is started again, and the second process exits 0; a
//! `--hidden` second launch shows nothing; after the first one is killed, its socket is
//! stale and the next launch is Persyk's instance again. The window carries Persyk's own
//! icon (issue #25 item 9). A click on Persyk's notification shows the hidden window (a
//! stand-in notification server on the private bus invokes the banner's default action).
#![cfg(all(feature = "app", target_os = "linux"))]

mod xapp;

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use xapp::{Desktop, WAIT};

/// Waits for `child` to exit (a guard against hangs only).
fn exit_of(child: &mut Child, desktop: &Desktop, log: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if start.elapsed() > WAIT {
            let _ = child.kill();
            panic!(
                "the second launch did not end; its log:\n{}",
                std::fs::read_to_string(desktop.dir.path().join(log)).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait(desktop: &Desktop, what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < WAIT,
            "timed out waiting for {what}; app log:\n{}",
            desktop.app_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `(width, height)` of the first image in window `id`'s `_NET_WM_ICON`, if it has one.
fn icon_size(desktop: &Desktop, id: &str) -> Option<(u32, u32)> {
    use x11rb::connection::Connection as _;
    use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _};
    let (conn, _) = x11rb::connect(Some(&desktop.display)).expect("connect to Xvfb");
    let atom = conn
        .intern_atom(false, b"_NET_WM_ICON")
        .expect("intern")
        .reply()
        .expect("atom")
        .atom;
    let window: u32 = id.parse().expect("a window id");
    let reply = conn
        .get_property(false, window, atom, AtomEnum::CARDINAL, 0, 2)
        .expect("ask for _NET_WM_ICON")
        .reply()
        .expect("_NET_WM_ICON");
    conn.flush().ok();
    let mut values = reply.value32()?;
    Some((values.next()?, values.next()?))
}

/// Issue #25 item 4: a second `persyk` started a second app (and on macOS, opening
/// Persyk.app again did nothing at all). Now it asks the running one to show its window and
/// exits 0; the hidden window appears.
#[test]
fn issue25_04_a_second_persyk_shows_the_running_ones_window_and_exits_0() {
    let Some(desktop) = Desktop::start(xapp::RECORDINGS) else {
        return;
    };
    let mut first = desktop.launch(true, &["app", "--hidden"]);
    desktop.wait_tray();
    // Past its first frames (eframe maps a window after the first one it paints, the shell
    // unmaps it again), the window stays hidden.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(desktop.windows("Persyk").is_empty(), "shown while hidden");

    // A `--hidden` second launch (as at login) only greets the running one.
    let mut quiet = desktop.launch_logged(true, &["app", "--hidden"], "quiet.log");
    assert!(exit_of(&mut quiet, &desktop, "quiet.log").success());
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        desktop.windows("Persyk").is_empty(),
        "a hidden launch showed it"
    );

    let mut second = desktop.launch_logged(true, &["app"], "second.log");
    let status = exit_of(&mut second, &desktop, "second.log");
    assert!(status.success(), "the second launch exited with {status}");
    wait(&desktop, "the running app's window", || {
        !desktop.windows("Persyk").is_empty()
    });
    assert!(
        first.try_wait().expect("try_wait").is_none(),
        "the first app ended"
    );
    // Persyk's own icon on the window (issue #25 item 9), not none or eframe's.
    let id = desktop.windows("Persyk").pop().expect("the window");
    assert_eq!(icon_size(&desktop, &id), Some((128, 128)));

    // Killed (no clean-up), it leaves a stale socket: the next launch is the instance.
    first.kill().expect("kill");
    first.wait().expect("wait");
    let mut again = desktop.launch_logged(true, &["app", "--hidden"], "again.log");
    desktop.wait_tray();
    assert!(
        again.try_wait().expect("try_wait").is_none(),
        "the launch after a killed Persyk did not start"
    );
    let _ = again.kill();
    let _ = again.wait();
}

/// Issue #25 item 4: clicking the "Transcription copied" banner activated nothing (on Linux
/// the notification had no action, on macOS the delegate ignored the response). The
/// notification now offers its default action, and invoking it shows the hidden window.
#[test]
fn issue25_04_a_click_on_the_notification_shows_the_hidden_window() {
    let Some(desktop) = Desktop::start(xapp::RECORDINGS) else {
        return;
    };
    desktop.serve_notifications();
    let mut app = desktop.launch(true, &["app", "--hidden"]);
    let item = desktop.wait_tray();
    std::thread::sleep(Duration::from_millis(1500));
    desktop.click_tray(&item);
    wait(&desktop, "a recording", || {
        !xapp::sessions(&desktop.sessions()).is_empty()
    });
    std::thread::sleep(Duration::from_millis(800));
    desktop.click_tray(&item);
    let (id, summary, actions) = desktop.wait_notification();
    assert_eq!(summary, "Transcription copied");
    assert!(actions.iter().any(|a| a == "default"), "{actions:?}");
    assert!(
        desktop.windows("Persyk").is_empty(),
        "shown before the click"
    );
    desktop.click_notification(id);
    wait(&desktop, "the window after the click", || {
        !desktop.windows("Persyk").is_empty()
    });
    let _ = app.kill();
    let _ = app.wait();
}
