//! "Check for Updates…" in the real app on a real X server (`tests/xapp`): the binary (a
//! development build, which alone reads `PERSYK_UPDATE_TEST_KEY`) started `--hidden` with its
//! tray icon, the menu entry clicked through the tray host's dbusmenu as a panel does, and the
//! loopback feed server of `tests/support/update.rs`: a signed newer release is found (the
//! log says its version), then a feed signed by another key is refused
//! (`update.bad-signature`); started again without the test key, the compiled release key
//! refuses the test-signed feed. Nothing is fetched before the menu asks.
#![cfg(all(feature = "app", target_os = "linux"))]

#[path = "support/update.rs"]
mod update_support;
mod xapp;

use std::time::{Duration, Instant};

use update_support::{FeedServer, TEST_PUBLIC_KEY, signed};
use xapp::Desktop;

fn wait_log(desktop: &Desktop, text: &str, times: usize) {
    let start = Instant::now();
    while desktop.app_log().matches(text).count() < times {
        assert!(
            start.elapsed() < xapp::WAIT,
            "the app never logged {text:?}; log:\n{}",
            desktop.app_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn issue26_06_the_real_apps_menu_checks_the_signed_feed() {
    let Some(desktop) = Desktop::start(xapp::RECORDINGS) else {
        return;
    };
    let server = FeedServer::start();
    let (feed, sig) = signed("newer.json");
    server.publish(&feed, &sig, "persyk-update.json");
    let url = server.url("persyk-update.json");
    let mut persyk = desktop.launch_with_env(
        false,
        &["app", "--hidden"],
        &[
            ("PERSYK_UPDATE_FEED", url.as_str()),
            ("PERSYK_UPDATE_TEST_KEY", TEST_PUBLIC_KEY),
        ],
    );
    let item = desktop.wait_tray();
    // Nothing is fetched before the user asks (the daily check waits a minute).
    std::thread::sleep(Duration::from_millis(500));
    assert!(server.requests.lock().unwrap().is_empty());

    desktop.click_menu(&item, "Check for Updates…");
    wait_log(
        &desktop,
        "persyk: update check: Persyk 99.0.0 is available",
        1,
    );
    assert_eq!(
        *server.requests.lock().unwrap(),
        ["/persyk-update.json", "/persyk-update.json.minisig"]
    );

    let (feed, sig) = signed("wrong-key.json");
    server.publish(&feed, &sig, "persyk-update.json");
    desktop.click_menu(&item, "Check for Updates…");
    wait_log(&desktop, "persyk: update check: update.bad-signature", 1);
    // Never "available" for the second feed.
    assert_eq!(
        desktop
            .app_log()
            .matches("Persyk 99.0.0 is available")
            .count(),
        1
    );
    let _ = persyk.kill();
    let _ = persyk.wait();

    // The same binary without the test key: the compiled release key refuses the test feed
    // (a new launch starts a new log).
    let (feed, sig) = signed("newer.json");
    server.publish(&feed, &sig, "persyk-update.json");
    let mut persyk = desktop.launch_with_env(
        false,
        &["app", "--hidden"],
        &[("PERSYK_UPDATE_FEED", url.as_str())],
    );
    let item = desktop.wait_tray();
    desktop.click_menu(&item, "Check for Updates…");
    wait_log(&desktop, "persyk: update check: update.bad-signature", 1);
    assert!(!desktop.app_log().contains("is available"));
    let _ = persyk.kill();
    let _ = persyk.wait();
}
