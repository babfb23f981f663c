//! The update check against a loopback feed server: a valid newer feed, a bad signature
//! (another key, a changed byte, a missing or garbled signature), an older version, the same
//! version, a malformed signed feed, an insecure DMG link, an unreachable server, a server
//! that stalls, a feed larger than the cap, an HTTP error; and the release signer
//! (`scripts/update-feed`) against the verifier.

mod support;

use std::time::{Duration, Instant};

use persyk::update::{Checked, FeedKey, Source, Timeouts, UpdateError, compare, read_verified};
use support::update::{FeedServer, Reply, fixture, signed, test_key, unreachable_url};

/// A version older than every fixture but `older.json`'s.
const CURRENT: &str = "0.1.0";

fn check(server: &FeedServer, name: &str) -> Result<Checked, UpdateError> {
    Source::new(&server.url(name), test_key())
        .unwrap()
        .check(CURRENT)
}

fn serve(fixture_name: &str) -> FeedServer {
    let server = FeedServer::start();
    let (feed, sig) = signed(fixture_name);
    server.publish(&feed, &sig, "persyk-update.json");
    server
}

#[test]
fn a_newer_signed_release_is_offered_with_its_links_and_hash() {
    let server = serve("newer.json");
    let Checked::Available(release) = check(&server, "persyk-update.json").unwrap() else {
        panic!("a newer release must be offered");
    };
    assert_eq!(release.version.to_string(), "99.0.0");
    assert_eq!(
        release.dmg_url,
        "https://github.com/persyk/persyk/releases/download/v99.0.0/Persyk-99.0.0.dmg"
    );
    assert_eq!(
        release.notes_url,
        "https://github.com/persyk/persyk/releases/tag/v99.0.0"
    );
    assert_eq!(release.dmg_sha256.len(), 64);
    assert_eq!(release.dmg_bytes, 12_345_678);
    // The feed and then its signature, nothing else.
    assert_eq!(
        *server.requests.lock().unwrap(),
        ["/persyk-update.json", "/persyk-update.json.minisig"]
    );
}

#[test]
fn a_feed_signed_by_another_key_is_refused() {
    let server = serve("wrong-key.json");
    assert_eq!(
        check(&server, "persyk-update.json"),
        Err(UpdateError::BadSignature)
    );
}

#[test]
fn one_changed_byte_of_the_feed_breaks_its_signature() {
    let (mut feed, sig) = signed("newer.json");
    // "99.0.0" -> "99.0.1": still valid JSON and still newer; only the signature says no.
    let at = feed.windows(6).position(|w| w == b"99.0.0").unwrap();
    feed[at + 5] = b'1';
    let server = FeedServer::start();
    server.publish(&feed, &sig, "persyk-update.json");
    assert_eq!(
        check(&server, "persyk-update.json"),
        Err(UpdateError::BadSignature)
    );
    // The bytes served unchanged verify: the refusal above is the change's.
    let (feed, sig) = signed("newer.json");
    assert!(read_verified(&feed, &sig, &test_key()).is_ok());
}

#[test]
fn a_missing_or_garbled_signature_is_refused_before_the_feed_is_read() {
    let server = FeedServer::start();
    server.route("/f.json", Reply::Body(fixture("newer.json")));
    assert_eq!(
        check(&server, "f.json"),
        Err(UpdateError::HttpStatus { status: 404 })
    );
    server.route(
        "/f.json.minisig",
        Reply::Body(b"untrusted comment: x\nnot base64\n".to_vec()),
    );
    assert_eq!(check(&server, "f.json"), Err(UpdateError::BadSignature));
    // A garbled feed with a garbled signature is a signature problem, never `malformed`:
    // the feed is not parsed before it verified.
    assert_eq!(
        read_verified(b"{not json", b"", &test_key()),
        Err(UpdateError::BadSignature)
    );
}

#[test]
fn an_older_release_is_not_offered() {
    let server = serve("older.json");
    assert_eq!(
        check(&server, "persyk-update.json"),
        Err(UpdateError::Older)
    );
}

#[test]
fn the_same_version_is_up_to_date() {
    let (feed, sig) = signed("newer.json");
    let release = read_verified(&feed, &sig, &test_key()).unwrap();
    assert_eq!(
        compare(release.clone(), "99.0.0"),
        Ok(Checked::UpToDate {
            current: semver::Version::new(99, 0, 0)
        })
    );
    // A pre-release of that version is older than it: the release is offered.
    assert!(matches!(
        compare(release, "99.0.0-beta.1"),
        Ok(Checked::Available(_))
    ));
}

#[test]
fn a_signed_but_malformed_feed_is_refused() {
    let server = serve("malformed.json");
    assert_eq!(
        check(&server, "persyk-update.json"),
        Err(UpdateError::Malformed)
    );
    // Signed, well-formed JSON, but the DMG link is plain http: never offered.
    let server = serve("insecure-dmg.json");
    assert_eq!(
        check(&server, "persyk-update.json"),
        Err(UpdateError::Malformed)
    );
}

#[test]
fn an_unreachable_feed_is_said_quickly() {
    let started = Instant::now();
    let result = Source::new(&unreachable_url(), test_key())
        .unwrap()
        .check(CURRENT);
    assert_eq!(result, Err(UpdateError::Unreachable));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_stalled_server_meets_the_deadline() {
    let server = FeedServer::start();
    server.route("/persyk-update.json", Reply::Stall);
    let mut source = Source::new(&server.url("persyk-update.json"), test_key()).unwrap();
    source.timeouts = Timeouts {
        connect: Duration::from_secs(1),
        total: Duration::from_millis(800),
    };
    let started = Instant::now();
    assert_eq!(source.check(CURRENT), Err(UpdateError::Unreachable));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_feed_over_the_cap_is_refused_not_truncated() {
    let server = FeedServer::start();
    server.route("/persyk-update.json", Reply::Endless);
    assert_eq!(
        check(&server, "persyk-update.json"),
        Err(UpdateError::TooLarge)
    );
}

#[test]
fn an_http_error_is_its_status() {
    let server = FeedServer::start();
    server.route("/persyk-update.json", Reply::Status(503));
    assert_eq!(
        check(&server, "persyk-update.json"),
        Err(UpdateError::HttpStatus { status: 503 })
    );
}

#[test]
fn diagnostics_never_carry_feed_text_or_the_url() {
    let errors = [
        UpdateError::BadUrl,
        UpdateError::Unreachable,
        UpdateError::BadSignature,
        UpdateError::Malformed,
        UpdateError::Older,
        UpdateError::TooLarge,
        UpdateError::HttpStatus { status: 404 },
    ];
    for e in errors {
        let text = e.to_string();
        assert!(text.starts_with(e.code()), "{text}");
        for feed_word in ["github.com", "99.0.0", "Persyk-", "127.0.0.1"] {
            assert!(!text.contains(feed_word), "{text}");
        }
    }
}

#[test]
fn the_release_signer_and_the_verifier_agree() {
    // scripts/update-feed makes and signs a feed for a DMG, exactly as the release workflow
    // runs it; the Rust verifier reads it with the key it prints.
    let dir = tempfile::tempdir().unwrap();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/update-feed");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&script)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "update-feed {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let public = run(&["keygen", "release.secret"]);
    std::fs::write(
        dir.path().join("Persyk-7.0.0.dmg"),
        b"not really a disk image",
    )
    .unwrap();
    run(&[
        "make",
        "--version",
        "7.0.0",
        "--dmg",
        "Persyk-7.0.0.dmg",
        "--dmg-url",
        "https://github.com/o/r/releases/download/v7.0.0/Persyk-7.0.0.dmg",
        "--notes-url",
        "https://github.com/o/r/releases/tag/v7.0.0",
        "--out",
        "persyk-update.json",
    ]);
    run(&["sign", "--key", "release.secret", "persyk-update.json"]);
    let feed = std::fs::read(dir.path().join("persyk-update.json")).unwrap();
    let sig = std::fs::read(dir.path().join("persyk-update.json.minisig")).unwrap();
    let key = FeedKey::from_base64(&public).unwrap();
    let release = read_verified(&feed, &sig, &key).unwrap();
    assert_eq!(release.version.to_string(), "7.0.0");
    use sha2::Digest;
    let expected = sha2::Sha256::digest(b"not really a disk image");
    let hex: String = expected.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(release.dmg_sha256, hex);
    assert_eq!(release.dmg_bytes, 23);
    // The committed test key does not verify it: a key is not interchangeable.
    assert_eq!(
        read_verified(&feed, &sig, &test_key()),
        Err(UpdateError::BadSignature)
    );
}

/// Issue #39 item 9: an old feed replayed keeps its valid signature, but past its signed
/// expiry it offers nothing and says why; a signed feed without an expiry (every feed before
/// the field existed) is refused the same way: "could not check", never "up to date".
#[test]
fn issue39_09_a_replayed_feed_past_its_expiry_says_could_not_check() {
    let server = serve("expired.json");
    assert_eq!(
        check(&server, "persyk-update.json"),
        Err(UpdateError::Expired)
    );
    let server = serve("no-expiry.json");
    assert_eq!(
        check(&server, "persyk-update.json"),
        Err(UpdateError::NoExpiry)
    );
    // The expired one is genuinely signed and readable: only its date refuses it.
    let (feed, sig) = signed("expired.json");
    assert!(read_verified(&feed, &sig, &test_key()).is_ok());
}
