//! Regressions in how Persyk is bundled and launched on macOS (`Persyk.app`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn show(out: &Output) -> String {
    format!(
        "status: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Issue #11, item 2: Finder / LaunchServices may start `Persyk.app` with a `-psn_0_NNN`
/// argument. clap rejected it, the process exited 2, and with `LSUIElement` the user saw
/// nothing at all. The argument must be ignored wherever it appears.
#[test]
fn issue11_02_finder_psn_argument_is_ignored() {
    let bin = env!("CARGO_BIN_EXE_persyk");

    let out = Command::new(bin)
        .args(["-psn_0_4242", "--version"])
        .output()
        .expect("run persyk -psn_0_4242 --version");
    assert!(out.status.success(), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.trim(),
        format!("persyk {}", env!("CARGO_PKG_VERSION")),
        "{}",
        show(&out)
    );

    // A real command after the Finder argument runs as if it were not there.
    let out = Command::new(bin)
        .arg("-psn_0_4242")
        .arg("check")
        .arg(repo("fixtures/user-only.jsonl"))
        .output()
        .expect("run persyk -psn_0_4242 check");
    assert!(out.status.success(), "{}", show(&out));
}

/// The bundle id in `bundle/Info.plist`, read with Python's `plistlib`.
fn plist_bundle_id() -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import plistlib, sys\n\
             with open(sys.argv[1], 'rb') as f:\n    print(plistlib.load(f)['CFBundleIdentifier'])",
        )
        .arg(repo("bundle/Info.plist"))
        .output()
        .expect("run python3");
    assert!(out.status.success(), "{}", show(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Issue #11, item 7: the bundle id and the keychain service were `app.persyk.Persyk`, but the
/// settings folder on macOS was `app.Persyk.Persyk` (`ProjectDirs::from("app", "Persyk",
/// "Persyk")`; the `directories` crate joins the three parts with dots on macOS). One
/// spelling everywhere; Linux keeps `~/.config/persyk/`.
#[test]
fn issue11_07_one_identifier_for_bundle_keychain_and_settings() {
    const ID: &str = "app.persyk.Persyk";
    assert_eq!(
        plist_bundle_id(),
        ID,
        "CFBundleIdentifier in bundle/Info.plist"
    );
    assert_eq!(persyk::credentials::SERVICE, ID, "keychain service");
    assert_eq!(
        persyk::dirs::PROJECT_ID.join("."),
        ID,
        "the macOS settings folder (directories: qualifier.organization.application)"
    );

    // What the settings path really is on this platform (unless PERSYK_CONFIG overrides it).
    if std::env::var_os("PERSYK_CONFIG").is_none() {
        let config = directories::BaseDirs::new()
            .expect("a home directory")
            .config_dir()
            .to_path_buf();
        let folder = if cfg!(target_os = "macos") {
            ID
        } else {
            "persyk"
        };
        if cfg!(any(target_os = "macos", target_os = "linux")) {
            assert_eq!(
                persyk::settings::settings_path(),
                Some(config.join(folder).join("settings.json"))
            );
        }
    }
}
