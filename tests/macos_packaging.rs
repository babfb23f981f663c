//! The Mac build, packaging and release scripts, checked from any OS without a Mac.
//!
//! - `scripts/setup` takes the macOS branch when `uname -s` says Darwin: run with stub
//!   `uname`, `xcode-select`, `brew`, `rustup` and `python3` first on `PATH`, each logging its
//!   arguments, so the test sees every command setup would run and nothing is installed.
//!   `sudo`, `apt-get` and `dpkg-query` stubs make any Debian step on a Mac visible. The
//!   Linux branch is checked the same way.
//! - `bundle/Persyk.entitlements` parses (plistlib) and grants the microphone, and
//!   `scripts/bundle-macos --dry-run` signs with the hardened runtime, a timestamp and those
//!   entitlements exactly when `PERSYK_SIGN_IDENTITY` is set, and builds whisper.cpp for a
//!   fixed CPU baseline per architecture (`GGML_NATIVE=OFF` and the `GGML_*` feature options).
//! - `scripts/make-dmg --dry-run`: drag-to-Applications layout, volume icon, compressed image,
//!   signing and notarization order; `scripts/notarize-macos --dry-run`: the notarytool and
//!   stapler calls, with the password never printed.
//! - `scripts/fill-cask` fills the Homebrew cask template and refuses bad input.
//! - `scripts/lint-workflows` (actionlint) accepts the repository's workflows and rejects a
//!   broken one, so CI's lint step cannot pass vacuously.
//!
//! Dry-run output is one shell-quoted command per line; `commands` splits it back into argv
//! with Python's `shlex`, the inverse of bash's `printf %q` for these arguments.

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};

use support::{repo, show};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Each line of a dry run's stdout as the argv it stands for.
fn commands(out: &Output) -> Vec<Vec<String>> {
    let split = Command::new("python3")
        .arg("-c")
        .arg("import json, shlex, sys\nfor line in sys.stdin:\n    print(json.dumps(shlex.split(line)))")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(&out.stdout)?;
            child.wait_with_output()
        })
        .expect("run python3 shlex");
    assert!(split.status.success(), "shlex split:\n{}", show(&split));
    stdout(&split)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON array of strings"))
        .collect()
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// The commands whose program (the first word, without its directory) is `name`.
fn calls<'a>(cmds: &'a [Vec<String>], name: &str) -> Vec<&'a Vec<String>> {
    cmds.iter()
        .filter(|c| {
            c.first()
                .is_some_and(|p| p.rsplit('/').next() == Some(name))
        })
        .collect()
}

fn position(cmds: &[Vec<String>], pred: impl Fn(&Vec<String>) -> bool) -> usize {
    cmds.iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no such command in {cmds:#?}"))
}

// --- scripts/setup with stubbed tools -------------------------------------------------------

/// A directory of stub programs that append `NAME ARGS…` to `log` and answer as told.
struct Stubs {
    dir: tempfile::TempDir,
}

impl Stubs {
    fn new() -> Stubs {
        let stubs = Stubs {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        fs::create_dir(stubs.dir.path().join("bin")).expect("bin dir");
        // Debian's tools must never run on a Mac; on Linux a test replaces these.
        for forbidden in ["sudo", "apt-get", "dpkg-query"] {
            stubs.add(forbidden, "exit 99");
        }
        stubs
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("log")
    }

    /// A stub `name` that logs its arguments, then runs `body` (bash, `$1`… are its arguments).
    fn add(&self, name: &str, body: &str) {
        let path = self.dir.path().join("bin").join(name);
        let script = format!(
            "#!/usr/bin/env bash\nprintf '%s' {name} >>'{log}'\nprintf ' %s' \"$@\" >>'{log}'\nprintf '\\n' >>'{log}'\n{body}\n",
            log = self.log().display()
        );
        fs::write(&path, script).expect("write stub");
        let mut perm = fs::metadata(&path).expect("stat stub").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        fs::set_permissions(&path, perm).expect("chmod stub");
    }

    fn remove(&self, name: &str) {
        fs::remove_file(self.dir.path().join("bin").join(name)).expect("remove stub");
    }

    /// Runs `script` with the stubs first on PATH.
    fn run(&self, script: &str) -> (Output, Vec<String>) {
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new(repo(script))
            .env("PATH", path)
            .current_dir(self.dir.path())
            .output()
            .expect("run the script");
        let log = fs::read_to_string(self.log()).unwrap_or_default();
        (out, log.lines().map(str::to_owned).collect())
    }

    /// A Mac: Darwin, the command line tools installed, Homebrew with `sox` but no `cmake`,
    /// rustup with the toolchain but no Mac targets, python3 with every module.
    fn mac() -> Stubs {
        let stubs = Stubs::new();
        stubs.add("uname", "echo Darwin");
        stubs.add(
            "xcode-select",
            "[ \"$1\" = -p ] && echo /Library/Developer/CommandLineTools; exit 0",
        );
        stubs.add(
            "brew",
            "if [ \"$1\" = list ]; then [ \"${*: -1}\" = sox ] && echo 'sox 14.4.2' && exit 0; exit 1; fi; exit 0",
        );
        stubs.add("rustup", "exit 0");
        stubs.add("python3", "exit 0");
        stubs
    }
}

fn has(log: &[String], line: &str) -> bool {
    log.iter().any(|l| l == line)
}

fn none_start_with(log: &[String], prefixes: &[&str]) -> bool {
    !log.iter()
        .any(|l| prefixes.iter().any(|p| l.starts_with(p)))
}

#[test]
fn setup_takes_the_macos_branch_when_uname_says_darwin() {
    let stubs = Stubs::mac();
    let (out, log) = stubs.run("scripts/setup");
    assert!(out.status.success(), "{}\nlog: {log:#?}", show(&out));

    assert!(
        has(&log, "xcode-select -p"),
        "checks the command line tools: {log:#?}"
    );
    // Homebrew is asked about each formula and installs only the missing one.
    assert!(
        has(&log, "brew list --formula --versions cmake"),
        "{log:#?}"
    );
    assert!(has(&log, "brew list --formula --versions sox"), "{log:#?}");
    assert!(
        has(&log, "brew install cmake"),
        "installs the missing formula: {log:#?}"
    );
    assert!(
        !log.iter()
            .any(|l| l.starts_with("brew install") && l.contains("sox")),
        "sox is installed already: {log:#?}"
    );
    // The pinned toolchain's pieces, and both Mac targets (for --universal).
    assert!(has(&log, "rustup component add rustfmt clippy"), "{log:#?}");
    assert!(
        has(&log, "rustup target add aarch64-apple-darwin"),
        "{log:#?}"
    );
    assert!(
        has(&log, "rustup target add x86_64-apple-darwin"),
        "{log:#?}"
    );
    // The Python side (scripts/setup-python) runs too; everything imports, so no pip.
    assert!(has(&log, "python3 -c import openai, pydantic"), "{log:#?}");
    assert!(!log.iter().any(|l| l.contains("pip install")), "{log:#?}");
    // No Debian step and no sudo on a Mac.
    assert!(
        none_start_with(&log, &["sudo", "apt-get", "dpkg-query"]),
        "Debian tools or sudo on a Mac: {log:#?}"
    );
}

#[test]
fn setup_on_a_mac_without_the_command_line_tools_opens_apples_installer_and_stops() {
    let stubs = Stubs::mac();
    stubs.add("xcode-select", "[ \"$1\" = -p ] && exit 2; exit 0");
    let (out, log) = stubs.run("scripts/setup");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(has(&log, "xcode-select --install"), "{log:#?}");
    assert!(
        stderr(&out).contains("command line tools"),
        "{}",
        show(&out)
    );
    assert!(
        none_start_with(&log, &["brew", "rustup", "sudo", "apt-get", "dpkg-query"]),
        "nothing else runs before the tools exist: {log:#?}"
    );
}

#[test]
fn setup_on_a_mac_without_homebrew_says_what_to_install_and_never_uses_sudo() {
    let stubs = Stubs::mac();
    stubs.remove("brew");
    // A real Homebrew on this machine's PATH would make this test meaningless.
    if Command::new("brew").arg("--version").output().is_ok() {
        eprintln!("skipped: this machine has Homebrew on PATH");
        return;
    }
    let (out, log) = stubs.run("scripts/setup");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = stderr(&out);
    assert!(
        err.contains("Homebrew") && err.contains("cmake"),
        "{}",
        show(&out)
    );
    assert!(
        none_start_with(&log, &["sudo", "apt-get", "dpkg-query"]),
        "{log:#?}"
    );
}

#[test]
fn setup_on_linux_keeps_the_debian_path() {
    let stubs = Stubs::new();
    stubs.add("uname", "echo Linux");
    stubs.add("dpkg-query", "printf 'install ok installed'");
    stubs.add("rustup", "exit 0");
    stubs.add("python3", "exit 0");
    stubs.add("brew", "exit 99");
    stubs.add("xcode-select", "exit 99");
    let (out, log) = stubs.run("scripts/setup");
    assert!(out.status.success(), "{}\nlog: {log:#?}", show(&out));
    for pkg in ["libasound2-dev", "xvfb", "shellcheck", "pulseaudio"] {
        assert!(
            has(&log, &format!("dpkg-query -W -f=${{Status}} {pkg}")),
            "asks dpkg about {pkg}: {log:#?}"
        );
    }
    assert!(
        has(&log, "rustup target add aarch64-apple-darwin"),
        "{log:#?}"
    );
    assert!(
        !log.iter().any(|l| l.contains("x86_64-apple-darwin")),
        "{log:#?}"
    );
    assert!(
        none_start_with(&log, &["brew", "xcode-select", "sudo", "apt-get"]),
        "everything installed, nothing Mac: {log:#?}"
    );
}

// --- entitlements and scripts/bundle-macos --------------------------------------------------

const ID: &str = "Developer ID Application: Test Person (ABCDE12345)";

#[test]
fn entitlements_grant_the_microphone_and_nothing_else() {
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import json, plistlib, sys\n\
             with open(sys.argv[1], 'rb') as f:\n    print(json.dumps(plistlib.load(f), sort_keys=True))",
        )
        .arg(repo("bundle/Persyk.entitlements"))
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "the entitlements must parse:\n{}",
        show(&out)
    );
    assert_eq!(
        stdout(&out).trim(),
        r#"{"com.apple.security.device.audio-input": true}"#
    );
}

fn bundle_dry_run(identity: Option<&str>, extra: &[&str]) -> Output {
    let mut cmd = Command::new(repo("scripts/bundle-macos"));
    cmd.arg("--dry-run").args(extra).current_dir(repo(""));
    match identity {
        Some(id) => cmd.env("PERSYK_SIGN_IDENTITY", id),
        None => cmd.env_remove("PERSYK_SIGN_IDENTITY"),
    };
    let out = cmd.output().expect("run scripts/bundle-macos --dry-run");
    assert!(out.status.success(), "{}", show(&out));
    out
}

#[test]
fn bundle_signs_for_distribution_with_runtime_timestamp_and_entitlements() {
    let out = bundle_dry_run(Some(ID), &[]);
    let cmds = commands(&out);
    let app = stdout(&out)
        .lines()
        .last()
        .expect("the app path")
        .to_owned();
    assert!(app.ends_with("/bundle/Persyk.app"), "{app}");

    let sign = calls(&cmds, "codesign");
    assert_eq!(
        sign.first().map(|c| c.as_slice()),
        Some(
            argv(&[
                "codesign",
                "--force",
                "--options",
                "runtime",
                "--timestamp",
                "--entitlements",
                "bundle/Persyk.entitlements",
                "--sign",
                ID,
                &app,
            ])
            .as_slice()
        ),
        "{cmds:#?}"
    );
    assert!(
        repo("bundle/Persyk.entitlements").is_file(),
        "the file codesign is given"
    );
    // Then the signature is verified, and signing comes after everything is in place.
    assert_eq!(
        sign.get(1).map(|c| c.as_slice()),
        Some(argv(&["codesign", "--verify", "--strict", "--verbose=2", &app]).as_slice())
    );
    let signed_at = position(&cmds, |c| c.first().is_some_and(|p| p == "codesign"));
    let icon_at = position(&cmds, |c| c.first().is_some_and(|p| p == "iconutil"));
    assert!(icon_at < signed_at, "sign last: {cmds:#?}");

    // A dry run builds, copies and signs nothing.
    #[cfg(not(target_os = "macos"))]
    assert!(
        !std::path::Path::new(&app).exists(),
        "a dry run must not create {app}"
    );
}

#[test]
fn bundle_without_an_identity_signs_ad_hoc_as_before() {
    let out = bundle_dry_run(None, &[]);
    let cmds = commands(&out);
    let app = stdout(&out)
        .lines()
        .last()
        .expect("the app path")
        .to_owned();
    let sign = calls(&cmds, "codesign");
    assert_eq!(
        sign.first().map(|c| c.as_slice()),
        Some(argv(&["codesign", "--force", "--sign", "-", &app]).as_slice()),
        "{cmds:#?}"
    );
    assert!(stderr(&out).contains("ad hoc"), "{}", show(&out));
    // The plain build: one architecture's release binary, no lipo.
    assert!(calls(&cmds, "lipo").is_empty(), "{cmds:#?}");
    assert_eq!(builds(&cmds).len(), 1, "{cmds:#?}");
}

/// `scripts/bundle-macos --dry-run` with a stub `security` first on `PATH` that lists
/// `identities` as `security find-identity -p codesigning` does, and `PERSYK_SIGN_IDENTITY`
/// as given.
fn bundle_dry_run_with_keychain(identities: &str, sign_identity: Option<&str>) -> Output {
    let stubs = Stubs::new();
    let listing = stubs.dir.path().join("identities.txt");
    fs::write(&listing, identities).expect("write the listing");
    stubs.add(
        "security",
        &format!(
            "[ \"$1\" = find-identity ] && cat '{}'; exit 0",
            listing.display()
        ),
    );
    let path = format!(
        "{}:{}",
        stubs.dir.path().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(repo("scripts/bundle-macos"));
    cmd.arg("--dry-run")
        .current_dir(repo(""))
        .env("PATH", path)
        .env_remove("PERSYK_DEV_IDENTITY");
    match sign_identity {
        Some(id) => cmd.env("PERSYK_SIGN_IDENTITY", id),
        None => cmd.env_remove("PERSYK_SIGN_IDENTITY"),
    };
    let out = cmd.output().expect("run scripts/bundle-macos --dry-run");
    assert!(out.status.success(), "{}", show(&out));
    out
}

/// Issue #25 item 7: every `scripts/run` re-signed Persyk.app ad hoc, and macOS binds the
/// permissions (Accessibility, the microphone) and the Keychain to an ad-hoc signature's
/// exact code hash, so each rebuild lost them. With the stable self-signed "Persyk
/// Development" identity in the keychain, dev builds are signed with it (by its hash);
/// without one, or with `PERSYK_SIGN_IDENTITY=-`, ad hoc as before; a distribution identity
/// still wins.
#[test]
fn issue25_07_dev_builds_sign_with_the_stable_identity_when_one_exists() {
    const DEV: &str = "0123456789ABCDEF0123456789ABCDEF01234567";
    let listing = format!(
        "\nPolicy: Code Signing\n  Matching identities\n  1) FEDCBA9876543210FEDCBA9876543210FEDCBA98 \"Apple Development: Someone Else (ABC)\"\n  2) {DEV} \"Persyk Development\" (CSSMERR_TP_NOT_TRUSTED)\n     2 identities found\n\n  Valid identities only\n  1) FEDCBA9876543210FEDCBA9876543210FEDCBA98 \"Apple Development: Someone Else (ABC)\"\n     1 valid identities found\n"
    );
    let signs = |out: &Output| -> Vec<String> {
        let cmds = commands(out);
        calls(&cmds, "codesign")
            .first()
            .map(|c| (*c).clone())
            .unwrap_or_else(|| panic!("no codesign in {cmds:#?}"))
    };
    let app = |out: &Output| stdout(out).lines().last().expect("app path").to_owned();

    let out = bundle_dry_run_with_keychain(&listing, None);
    assert_eq!(
        signs(&out),
        argv(&["codesign", "--force", "--sign", DEV, &app(&out)]),
        "{}",
        show(&out)
    );
    assert!(
        stderr(&out).contains("Persyk Development"),
        "{}",
        show(&out)
    );

    // Forced ad hoc, or no such identity: ad hoc.
    let out = bundle_dry_run_with_keychain(&listing, Some("-"));
    assert_eq!(
        signs(&out),
        argv(&["codesign", "--force", "--sign", "-", &app(&out)])
    );
    let others = listing.replace("Persyk Development", "Persyk Development 2");
    let out = bundle_dry_run_with_keychain(&others, None);
    assert_eq!(
        signs(&out),
        argv(&["codesign", "--force", "--sign", "-", &app(&out)])
    );
    assert!(stderr(&out).contains("ad hoc"), "{}", show(&out));

    // A distribution identity is used as before, the development one ignored.
    let out = bundle_dry_run_with_keychain(&listing, Some(ID));
    let sign = signs(&out);
    assert_eq!(
        sign.iter().rev().nth(1).map(String::as_str),
        Some(ID),
        "{sign:?}"
    );
    assert!(sign.contains(&"runtime".to_owned()), "{sign:?}");
}

#[test]
fn bundle_universal_joins_both_mac_architectures_with_lipo() {
    let out = bundle_dry_run(None, &["--universal"]);
    let cmds = commands(&out);
    let targets: Vec<String> = builds(&cmds).into_iter().map(|b| b.target).collect();
    assert_eq!(targets, ["aarch64-apple-darwin", "x86_64-apple-darwin"]);
    let lipo = calls(&cmds, "lipo");
    let create = lipo.first().expect("lipo -create");
    assert_eq!(&create[1..3], &argv(&["-create", "-output"])[..]);
    let universal = &create[3];
    assert!(universal.ends_with("/universal/persyk"), "{create:?}");
    assert!(create[4].ends_with("/aarch64-apple-darwin/release/persyk"));
    assert!(create[5].ends_with("/x86_64-apple-darwin/release/persyk"));
    // The universal binary is what goes into the bundle.
    assert!(
        cmds.iter().any(|c| c.first().is_some_and(|p| p == "cp")
            && c.get(1) == Some(universal)
            && c.get(2)
                .is_some_and(|d| d.ends_with("Contents/MacOS/persyk"))),
        "{cmds:#?}"
    );
}

/// One `cargo build` of a bundle dry run: its target and the variables `env` sets for it.
#[derive(Debug)]
struct Build {
    target: String,
    vars: BTreeMap<String, String>,
    /// The variables `env -u` removes.
    unset: Vec<String>,
    /// Where the build stands among the dry run's commands.
    at: usize,
}

/// Every `env [-u VAR]… [VAR=VALUE]… cargo build --release --locked --target T` of a dry
/// run. A `cargo build` without `env` in front fails the test: each build states its baseline.
fn builds(cmds: &[Vec<String>]) -> Vec<Build> {
    let mut found = Vec::new();
    for (at, c) in cmds.iter().enumerate() {
        let Some(cargo) = c.iter().position(|w| w == "cargo") else {
            continue;
        };
        if c.get(cargo + 1).map(String::as_str) != Some("build") {
            continue;
        }
        assert_eq!(c[0], "env", "a build without its baseline: {c:?}");
        let (mut vars, mut unset) = (BTreeMap::new(), Vec::new());
        let mut words = c[1..cargo].iter();
        while let Some(w) = words.next() {
            if w == "-u" {
                unset.push(words.next().expect("env -u VAR").clone());
            } else {
                let (k, v) = w.split_once('=').expect("VAR=VALUE");
                vars.insert(k.to_owned(), v.to_owned());
            }
        }
        assert_eq!(
            c[cargo..cargo + 5],
            argv(&["cargo", "build", "--release", "--locked", "--target"])[..],
            "{c:?}"
        );
        found.push(Build {
            target: c[cargo + 5].clone(),
            vars,
            unset,
            at,
        });
    }
    found
}

fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Issue #25 item 2: whisper.cpp was built with `GGML_NATIVE` on (ggml's default unless CMake
/// cross-compiles), so a release built on an M2–M4 used i8mm/SVE/SME and crashed an M1 with
/// an illegal instruction, and the Intel half cross-built on an arm64 Mac got no AVX at all.
/// Every build of the bundle now passes `GGML_NATIVE=OFF` and one fixed baseline per
/// architecture (whisper-rs-sys forwards `GGML_*` variables to CMake as `-D`), removes any
/// `GGML_*` the caller's environment had, and cleans whisper-rs-sys first when the last build
/// in that target directory used other flags (its build script does not watch them).
#[test]
fn issue25_02_bundle_builds_whisper_for_a_fixed_cpu_baseline_per_architecture() {
    let m1 = vars(&[
        ("MACOSX_DEPLOYMENT_TARGET", "11.0"),
        ("GGML_NATIVE", "OFF"),
        ("GGML_CPU_ARM_ARCH", "armv8.4-a+fp16+dotprod"),
    ]);
    // Issue #36 item 8: the Intel baseline is the Ivy Bridge set (SSE4.2, AVX, F16C) of the
    // oldest Macs macOS 11 runs on; AVX2, FMA and BMI2 crashed a 2013 Mac Pro.
    let intel = vars(&[
        ("MACOSX_DEPLOYMENT_TARGET", "11.0"),
        ("GGML_NATIVE", "OFF"),
        ("GGML_SSE42", "ON"),
        ("GGML_AVX", "ON"),
        ("GGML_AVX2", "OFF"),
        ("GGML_FMA", "OFF"),
        ("GGML_F16C", "ON"),
        ("GGML_BMI2", "OFF"),
        ("GGML_AVX_VNNI", "OFF"),
        ("GGML_AVX512", "OFF"),
        ("GGML_AVX512_VBMI", "OFF"),
        ("GGML_AVX512_VNNI", "OFF"),
        ("GGML_AVX512_BF16", "OFF"),
        ("GGML_AMX_TILE", "OFF"),
        ("GGML_AMX_INT8", "OFF"),
        ("GGML_AMX_BF16", "OFF"),
    ]);
    let expect = |target: &str| match target {
        "aarch64-apple-darwin" => &m1,
        "x86_64-apple-darwin" => &intel,
        other => panic!("a build for {other}"),
    };

    let check = |extra: &[&str], targets: &[&str]| {
        let mut cmd = Command::new(repo("scripts/bundle-macos"));
        cmd.arg("--dry-run")
            .args(extra)
            .current_dir(repo(""))
            .env_remove("PERSYK_SIGN_IDENTITY")
            // An inherited variable would reach CMake too: the script removes it.
            .env("GGML_NATIVE", "ON")
            .env("GGML_CPU_ARM_ARCH", "native")
            .env("MACOSX_DEPLOYMENT_TARGET", "15.0");
        let out = cmd.output().expect("run scripts/bundle-macos --dry-run");
        assert!(out.status.success(), "{}", show(&out));
        let cmds = commands(&out);
        let found = builds(&cmds);
        assert_eq!(
            found.iter().map(|b| b.target.as_str()).collect::<Vec<_>>(),
            targets,
            "{cmds:#?}"
        );
        for b in &found {
            assert_eq!(&b.vars, expect(&b.target), "{}: {cmds:#?}", b.target);
            let mut unset = b.unset.clone();
            unset.sort();
            assert_eq!(
                unset,
                [
                    "GGML_CPU_ARM_ARCH",
                    "GGML_NATIVE",
                    "MACOSX_DEPLOYMENT_TARGET"
                ],
                "{b:?}"
            );
            // whisper-rs-sys is rebuilt first (no stamp of these flags exists here).
            let clean = argv(&[
                "cargo",
                "clean",
                "--release",
                "--locked",
                "--target",
                &b.target,
                "-p",
                "whisper-rs-sys",
            ]);
            let cleaned = position(&cmds, |c| *c == clean);
            assert!(cleaned < b.at, "clean before the build: {cmds:#?}");
        }
    };
    check(
        &["--universal"],
        &["aarch64-apple-darwin", "x86_64-apple-darwin"],
    );
    check(&["--arch", "arm64"], &["aarch64-apple-darwin"]);
    check(&["--arch", "x86_64"], &["x86_64-apple-darwin"]);
}

#[test]
fn bundle_rejects_unknown_arguments() {
    let out = Command::new(repo("scripts/bundle-macos"))
        .arg("--sign")
        .output()
        .expect("run scripts/bundle-macos");
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(stdout(&out).is_empty(), "{}", show(&out));
    for args in [
        &["--dry-run", "--universal", "--arch", "arm64"][..],
        &["--dry-run", "--arch", "ppc"],
        &["--dry-run", "--arch"],
    ] {
        let out = Command::new(repo("scripts/bundle-macos"))
            .args(args)
            .output()
            .expect("run scripts/bundle-macos");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", show(&out));
        assert!(
            calls(&commands(&out), "cargo").is_empty(),
            "{args:?}: {}",
            show(&out)
        );
    }
}

// --- scripts/make-dmg and scripts/notarize-macos --------------------------------------------

fn dmg_dry_run(env: &[(&str, &str)], extra: &[&str]) -> Output {
    let mut cmd = Command::new(repo("scripts/make-dmg"));
    cmd.arg("--dry-run")
        .args(extra)
        .args(["target/bundle/Persyk.app", "target/dist/Persyk-1.2.3.dmg"]);
    for var in [
        "PERSYK_SIGN_IDENTITY",
        "PERSYK_NOTARY_PROFILE",
        "APPLE_ID",
        "APPLE_TEAM_ID",
        "APPLE_APP_PASSWORD",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("run scripts/make-dmg --dry-run")
}

#[test]
fn dmg_has_the_app_an_applications_link_and_a_volume_icon() {
    let out = dmg_dry_run(&[], &[]);
    assert!(out.status.success(), "{}", show(&out));
    let cmds = commands(&out);
    assert_eq!(
        stdout(&out).lines().last(),
        Some("target/dist/Persyk-1.2.3.dmg")
    );

    let stage_of = |c: &Vec<String>, suffix: &str| -> Option<String> {
        c.last()?.strip_suffix(suffix).map(str::to_owned)
    };
    let ditto = calls(&cmds, "ditto");
    let stage = stage_of(ditto.first().expect("ditto the app"), "/Persyk.app").expect("stage");
    assert_eq!(ditto[0][1], "target/bundle/Persyk.app");
    assert!(
        cmds.contains(&argv(&[
            "ln",
            "-s",
            "/Applications",
            &format!("{stage}/Applications")
        ])),
        "drag-to-Applications link: {cmds:#?}"
    );
    assert!(
        cmds.contains(&argv(&[
            "cp",
            "target/bundle/Persyk.app/Contents/Resources/Persyk.icns",
            &format!("{stage}/.VolumeIcon.icns")
        ])),
        "volume icon: {cmds:#?}"
    );

    let hdiutil = calls(&cmds, "hdiutil");
    let verbs: Vec<&str> = hdiutil.iter().map(|c| c[1].as_str()).collect();
    assert_eq!(verbs, ["create", "attach", "detach", "convert", "verify"]);
    let create = hdiutil[0];
    assert!(
        create.windows(2).any(|w| w == ["-volname", "Persyk"]),
        "{create:?}"
    );
    assert!(
        create
            .windows(2)
            .any(|w| w[0] == "-srcfolder" && w[1] == stage)
    );
    // The custom-icon flag is set on the mounted volume, between attach and detach.
    let mount = hdiutil[1].last().expect("attach's image").clone();
    let mnt_at = hdiutil[1]
        .iter()
        .position(|a| a == "-mountpoint")
        .map(|i| hdiutil[1][i + 1].clone())
        .expect("-mountpoint");
    assert!(mount.ends_with("rw.dmg"));
    assert!(
        cmds.contains(&argv(&["SetFile", "-a", "C", &mnt_at])),
        "{cmds:#?}"
    );
    let convert = hdiutil[3];
    assert!(
        convert.windows(2).any(|w| w == ["-format", "UDZO"]),
        "{convert:?}"
    );
    assert_eq!(
        convert.last().map(String::as_str),
        Some("target/dist/Persyk-1.2.3.dmg")
    );

    // No identity: no signature on the DMG, no notarization, and the script says so.
    assert!(calls(&cmds, "codesign").is_empty(), "{cmds:#?}");
    assert!(calls(&cmds, "notarize-macos").is_empty(), "{cmds:#?}");
    assert!(stderr(&out).contains("ad hoc"), "{}", show(&out));
    // The checksum file, named as `shasum -c` expects.
    assert!(
        stdout(&out)
            .contains("cd target/dist && shasum -a 256 Persyk-1.2.3.dmg > Persyk-1.2.3.dmg.sha256"),
        "{}",
        show(&out)
    );
}

#[test]
fn dmg_release_signs_and_notarizes_the_app_first_then_the_image() {
    let out = dmg_dry_run(&[("PERSYK_SIGN_IDENTITY", ID)], &["--notarize"]);
    assert!(out.status.success(), "{}", show(&out));
    let cmds = commands(&out);
    let notarized: Vec<&str> = calls(&cmds, "notarize-macos")
        .iter()
        .map(|c| c[1].as_str())
        .collect();
    assert_eq!(
        notarized,
        ["target/bundle/Persyk.app", "target/dist/Persyk-1.2.3.dmg"]
    );
    let app_notarized = position(&cmds, |c| {
        c.last().is_some_and(|a| a == "target/bundle/Persyk.app")
            && c[0].ends_with("notarize-macos")
    });
    let copied = position(&cmds, |c| c[0] == "ditto");
    assert!(
        app_notarized < copied,
        "staple the app before it is copied: {cmds:#?}"
    );
    let signed = position(&cmds, |c| c[0] == "codesign");
    assert_eq!(
        cmds[signed],
        argv(&[
            "codesign",
            "--force",
            "--timestamp",
            "--sign",
            ID,
            "target/dist/Persyk-1.2.3.dmg"
        ])
    );
    let converted = position(&cmds, |c| c[0] == "hdiutil" && c[1] == "convert");
    let dmg_notarized = position(&cmds, |c| {
        c.last().is_some_and(|a| a.ends_with(".dmg")) && c[0].ends_with("notarize-macos")
    });
    assert!(converted < signed && signed < dmg_notarized, "{cmds:#?}");
}

#[test]
fn dmg_notarize_needs_an_identity_and_bad_arguments_are_refused() {
    let out = dmg_dry_run(&[], &["--notarize"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr(&out).contains("PERSYK_SIGN_IDENTITY"),
        "{}",
        show(&out)
    );

    let out = Command::new(repo("scripts/make-dmg"))
        .args(["--dry-run", "Persyk.app", "Persyk.zip"])
        .output()
        .expect("run scripts/make-dmg");
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
}

fn notarize_dry_run(env: &[(&str, &str)], path: &str) -> Output {
    let mut cmd = Command::new(repo("scripts/notarize-macos"));
    cmd.args(["--dry-run", path]);
    for var in [
        "PERSYK_NOTARY_PROFILE",
        "APPLE_ID",
        "APPLE_TEAM_ID",
        "APPLE_APP_PASSWORD",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("run scripts/notarize-macos --dry-run")
}

#[test]
fn notarize_submits_waits_and_staples_without_printing_the_password() {
    const PASSWORD: &str = "abcd-efgh-ijkl-mnop";
    let env = [
        ("APPLE_ID", "dev@example.com"),
        ("APPLE_TEAM_ID", "ABCDE12345"),
        ("APPLE_APP_PASSWORD", PASSWORD),
    ];
    let out = notarize_dry_run(&env, "target/bundle/Persyk.app");
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        !stdout(&out).contains(PASSWORD) && !stderr(&out).contains(PASSWORD),
        "the password leaked:\n{}",
        show(&out)
    );
    let cmds = commands(&out);
    // An app goes up as a zip made by ditto, and the ticket is stapled to the app.
    let zip = calls(&cmds, "ditto")
        .first()
        .map(|c| c.last().expect("zip path").clone())
        .expect("ditto -c -k");
    assert!(zip.ends_with("/Persyk.zip"), "{zip}");
    assert_eq!(
        calls(&cmds, "xcrun")
            .iter()
            .map(|c| c.as_slice())
            .collect::<Vec<_>>(),
        [
            argv(&[
                "xcrun",
                "notarytool",
                "submit",
                &zip,
                "--apple-id",
                "dev@example.com",
                "--team-id",
                "ABCDE12345",
                "--password",
                "***",
                "--wait",
                "--output-format",
                "json"
            ])
            .as_slice(),
            argv(&["xcrun", "stapler", "staple", "target/bundle/Persyk.app"]).as_slice(),
            argv(&["xcrun", "stapler", "validate", "target/bundle/Persyk.app"]).as_slice(),
        ]
    );

    // A DMG goes up as it is; a keychain profile replaces the Apple ID.
    let out = notarize_dry_run(
        &[("PERSYK_NOTARY_PROFILE", "persyk")],
        "dist/Persyk-1.2.3.dmg",
    );
    assert!(out.status.success(), "{}", show(&out));
    let cmds = commands(&out);
    assert!(calls(&cmds, "ditto").is_empty());
    assert_eq!(
        calls(&cmds, "xcrun")[0],
        &argv(&[
            "xcrun",
            "notarytool",
            "submit",
            "dist/Persyk-1.2.3.dmg",
            "--keychain-profile",
            "persyk",
            "--wait",
            "--output-format",
            "json"
        ])
    );
}

#[test]
fn notarize_without_credentials_exits_3() {
    let out = notarize_dry_run(&[("APPLE_ID", "dev@example.com")], "Persyk.app");
    assert_eq!(out.status.code(), Some(3), "{}", show(&out));
    assert!(
        stderr(&out).contains("APPLE_APP_PASSWORD"),
        "{}",
        show(&out)
    );
    assert!(stdout(&out).is_empty(), "{}", show(&out));
}

// --- scripts/fill-cask ----------------------------------------------------------------------

const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn fill_cask(args: &[&str]) -> Output {
    Command::new(repo("scripts/fill-cask"))
        .args(args)
        .output()
        .expect("run scripts/fill-cask")
}

#[test]
fn fill_cask_writes_version_checksum_and_urls() {
    let out = fill_cask(&[
        "--version",
        "v1.2.3",
        "--sha256",
        SHA,
        "--repo",
        "acme/persyk",
    ]);
    assert!(out.status.success(), "{}", show(&out));
    let cask = stdout(&out);
    for line in [
        "cask \"persyk\" do",
        "  version \"1.2.3\"",
        &format!("  sha256 \"{SHA}\""),
        "  url \"https://github.com/acme/persyk/releases/download/v#{version}/Persyk-#{version}.dmg\"",
        "  homepage \"https://github.com/acme/persyk\"",
        "  app \"Persyk.app\"",
        // Issue #25 item 9: the CLI on PATH.
        "  binary \"#{appdir}/Persyk.app/Contents/MacOS/persyk\"",
        "  uninstall quit: \"app.persyk.Persyk\"",
    ] {
        assert!(
            cask.lines().any(|l| l == line),
            "missing {line:?} in:\n{cask}"
        );
    }
    assert!(!cask.contains('@'), "a placeholder is left:\n{cask}");
    // Only the placeholders change: the template minus its comment, filled by hand, is the same.
    let template = fs::read_to_string(repo("packaging/homebrew/persyk.rb")).expect("template");
    let body: String = template
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let expected = body
        .replace("@VERSION@", "1.2.3")
        .replace("@SHA256@", SHA)
        .replace("@REPOSITORY@", "acme/persyk");
    let filled_body: String = cask
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(filled_body, expected);
    // The zap list never touches the user's sessions.
    assert!(
        !cask
            .lines()
            .any(|l| l.trim_start().starts_with('"') && l.contains("Documents")),
        "{cask}"
    );
}

#[test]
fn fill_cask_reads_the_checksum_file_make_dmg_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sum = dir.path().join("Persyk-1.2.3.dmg.sha256");
    fs::write(&sum, format!("{SHA}  Persyk-1.2.3.dmg\n")).expect("write sum");
    let output = dir.path().join("out/persyk.rb");
    let out = fill_cask(&[
        "--version",
        "1.2.3",
        "--sha256-file",
        sum.to_str().expect("utf-8 path"),
        "--repo",
        "acme/persyk",
        "--output",
        output.to_str().expect("utf-8 path"),
    ]);
    assert!(out.status.success(), "{}", show(&out));
    let cask = fs::read_to_string(&output).expect("the written cask");
    assert!(cask.contains(&format!("sha256 \"{SHA}\"")), "{cask}");

    // A checksum of another version's DMG is refused.
    fs::write(&sum, format!("{SHA}  Persyk-1.2.2.dmg\n")).expect("write sum");
    let out = fill_cask(&[
        "--version",
        "1.2.3",
        "--sha256-file",
        sum.to_str().expect("utf-8 path"),
        "--repo",
        "acme/persyk",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(stdout(&out).is_empty());
}

#[test]
fn fill_cask_refuses_bad_input() {
    for args in [
        ["--version", "1.2", "--sha256", SHA, "--repo", "acme/persyk"],
        [
            "--version",
            "1.2.3\"; system(\"x",
            "--sha256",
            SHA,
            "--repo",
            "acme/persyk",
        ],
        [
            "--version",
            "1.2.3",
            "--sha256",
            &SHA[1..],
            "--repo",
            "acme/persyk",
        ],
        [
            "--version",
            "1.2.3",
            "--sha256",
            &SHA.replace('0', "g"),
            "--repo",
            "acme/persyk",
        ],
        ["--version", "1.2.3", "--sha256", SHA, "--repo", "acme"],
    ] {
        let out = fill_cask(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}:\n{}", show(&out));
        assert!(stdout(&out).is_empty(), "{args:?}:\n{}", show(&out));
    }
}

// --- scripts/lint-workflows -----------------------------------------------------------------

#[test]
fn workflows_pass_actionlint_and_a_broken_one_does_not() {
    let out = Command::new(repo("scripts/lint-workflows"))
        .output()
        .expect("run scripts/lint-workflows");
    assert!(
        out.status.success(),
        "the workflows fail actionlint (or it is missing: run scripts/setup-python):\n{}",
        show(&out)
    );
    assert!(stdout(&out).contains("workflows ok"), "{}", show(&out));

    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.yml");
    // `runs-on` missing and an unknown context: two things actionlint must catch.
    fs::write(
        &bad,
        "name: bad\non: push\njobs:\n  a:\n    steps:\n      - run: echo ${{ nonsense.value }}\n",
    )
    .expect("write the broken workflow");
    let out = Command::new(repo("scripts/lint-workflows"))
        .arg("-no-color")
        .arg(&bad)
        .output()
        .expect("run scripts/lint-workflows on a broken workflow");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(stdout(&out).contains("runs-on"), "{}", show(&out));
}

/// Writes a Mach-O with these slices (`None` for a thin file) whose LC_BUILD_VERSION names
/// each `minos`, built byte by byte in Python the way the linker lays it out.
fn macho(path: &std::path::Path, minos: &[&str], fat: bool, old_style: bool) {
    let script = r#"
import struct, sys
path, fat, old = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
def packed(v):
    p = [int(x) for x in v.split(".")] + [0, 0]
    return (p[0] << 16) | (p[1] << 8) | p[2]
def thin(v):
    if old:
        cmd = struct.pack("<IIII", 0x24, 16, packed(v), packed(v))
    else:
        cmd = struct.pack("<IIIIII", 0x32, 24, 1, packed(v), packed(v), 0)
    seg = struct.pack("<II", 0x19, 72) + bytes(64)
    cmds = seg + cmd
    header = struct.pack("<IiiIIIII", 0xFEEDFACF, 0x0100000C, 0, 2, 2, len(cmds), 0, 0)
    return header + cmds + bytes(64)
slices = [thin(v) for v in sys.argv[4:]]
if not fat:
    data = slices[0]
else:
    out = struct.pack(">II", 0xCAFEBABE, len(slices))
    offset = 4096
    body = b""
    for i, s in enumerate(slices):
        out += struct.pack(">iiIII", 0x0100000C if i == 0 else 0x01000007, 0, offset + len(body), len(s), 12)
        body += s + bytes((-len(s)) % 4096)
    data = out + bytes(offset - len(out)) + body
open(path, "wb").write(data)
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(path)
        .arg(if fat { "1" } else { "0" })
        .arg(if old_style { "1" } else { "0" })
        .args(minos)
        .output()
        .expect("python3");
    assert!(out.status.success(), "{}", show(&out));
}

fn check_minos(minimum: &str, paths: &[&std::path::Path], log: Option<&std::path::Path>) -> Output {
    let mut cmd = Command::new(repo("scripts/check-macho-minos"));
    cmd.arg(minimum).args(paths);
    if let Some(log) = log {
        cmd.arg("--log").arg(log);
    }
    cmd.output().expect("run scripts/check-macho-minos")
}

/// Issue #36 item 1: the workflow's deployment-target check would fail on a wrong `minos` —
/// a thin binary or one slice of a universal one built for macOS 15 while the declared
/// minimum is 11.0, an old-style LC_VERSION_MIN_MACOSX too new, a linker warning in the
/// build log — and passes a bundle built right. Files that are not Mach-O are skipped.
#[test]
fn issue36_01_the_macho_check_fails_a_binary_newer_than_the_declared_minimum() {
    let tmp = tempfile::tempdir().expect("tmp");
    let minimum = stdout(
        &Command::new(repo("scripts/macos-minimum"))
            .output()
            .expect("scripts/macos-minimum"),
    );
    assert_eq!(
        minimum.trim(),
        "11.0",
        "the one declared minimum (bundle/Info.plist)"
    );
    let app = tmp.path().join("Persyk.app/Contents");
    fs::create_dir_all(app.join("MacOS")).expect("mkdir");
    fs::write(app.join("Info.plist"), "<plist/>").expect("plist");
    let binary = app.join("MacOS/persyk");
    macho(&binary, &["11.0", "11.0"], true, false);
    let good = check_minos("11.0", &[&tmp.path().join("Persyk.app")], None);
    assert!(good.status.success(), "{}", show(&good));
    assert!(stdout(&good).contains("minos 11.0"), "{}", show(&good));

    for (slices, fat, old) in [
        (vec!["15.0"], false, false),
        (vec!["11.0", "15.0"], true, false),
        (vec!["14.2"], false, true),
    ] {
        macho(&binary, &slices, fat, old);
        let bad = check_minos("11.0", &[&tmp.path().join("Persyk.app")], None);
        assert_eq!(bad.status.code(), Some(1), "{slices:?}: {}", show(&bad));
        assert!(
            stdout(&bad).contains("is newer than 11.0"),
            "{}",
            show(&bad)
        );
    }

    macho(&binary, &["11.0"], false, false);
    let log = tmp.path().join("bundle.log");
    fs::write(
        &log,
        "ld: warning: object file (libwhisper.a[3](ggml-metal.m.o)) was built for newer macOS version (15.0) than being linked (11.0)\n",
    )
    .expect("log");
    let warned = check_minos("11.0", &[&tmp.path().join("Persyk.app")], Some(&log));
    assert_eq!(warned.status.code(), Some(1), "{}", show(&warned));
    // Nothing to check is a failure, not a pass.
    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).expect("mkdir");
    assert_eq!(check_minos("11.0", &[&empty], None).status.code(), Some(1));
}

/// Issue #36 item 1: the bundle is built for the declared minimum and checked with it.
#[test]
fn issue36_01_bundle_builds_for_the_declared_minimum_and_checks_every_macho() {
    let out = bundle_dry_run(None, &["--arch", "arm64"]);
    assert!(out.status.success(), "{}", show(&out));
    let cmds = commands(&out);
    let check = position(&cmds, |c| {
        c.first().is_some_and(|w| w == "scripts/check-macho-minos")
            && c.get(1).is_some_and(|m| m == "11.0")
    });
    let sign = position(&cmds, |c| c.first().is_some_and(|w| w == "codesign"));
    assert!(sign < check, "{cmds:#?}");
}

/// Issue #36 item 1: the bundle's log is piped into `tee` for the Mach-O check, and a step's
/// pipeline fails only under pipefail, which GitHub sets only for a named shell. The lint
/// fails a workflow that pipes without naming it, and passes it once it does.
#[test]
fn issue36_01_a_piped_bundle_step_must_fail_when_the_bundle_fails() {
    let dir = tempfile::tempdir().expect("temp dir");
    let steps = "jobs:\n  a:\n    runs-on: macos-15\n    steps:\n      - run: scripts/bundle-macos 2>&1 | tee bundle.log\n      - run: test -f a || test -f b\n";
    let unnamed = dir.path().join("unnamed.yml");
    fs::write(&unnamed, format!("name: a\non: push\n{steps}")).expect("write");
    let out = Command::new(repo("scripts/lint-workflows"))
        .arg("-no-color")
        .arg(&unnamed)
        .output()
        .expect("run scripts/lint-workflows");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let said = stdout(&out);
    assert!(said.contains("unnamed.yml:7:"), "{}", show(&out));
    assert!(said.contains("pipefail"), "{}", show(&out));
    assert!(!said.contains(":8:"), "`||` is no pipe: {}", show(&out));
    let named = dir.path().join("named.yml");
    fs::write(
        &named,
        format!("name: a\non: push\ndefaults:\n  run:\n    shell: bash\n{steps}"),
    )
    .expect("write");
    let out = Command::new(repo("scripts/lint-workflows"))
        .arg("-no-color")
        .arg(&named)
        .output()
        .expect("run scripts/lint-workflows");
    assert!(out.status.success(), "{}", show(&out));
}
