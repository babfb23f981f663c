//! The macOS bundle sources and the icons, checked from any OS.
//!
//! - `bundle/Info.plist` parses (Python's `plistlib`, the same XML reader semantics as
//!   macOS's) and carries the keys the app relies on: bundle id, executable `persyk`,
//!   `LSUIElement`, a microphone and a Documents usage sentence, an icon file, and both
//!   version keys equal to the crate's version.
//! - Every PNG in `assets/tray/` and `bundle/icon/persyk-1024.png` is a well-formed PNG
//!   (signature, chunk CRCs, IHDR, IDAT, IEND) of the right size, 8-bit RGBA.
//! - `scripts/make-icons --check`: the committed PNGs are exactly what the script draws;
//!   `scripts/make-sounds --check` the same for the start/stop cues.
//! - `scripts/bundle-macos` is valid bash, and off macOS it refuses with exit code 2.

mod support;

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::process::Command;

const TRAY_ICONS: [&str; 5] = ["idle", "connecting", "recording", "finishing", "error"];

use support::{repo, show};

// --- Info.plist -----------------------------------------------------------------------------

/// Prints each requested key of a plist as `KEY JSON`, one per line (`null` when absent).
/// Any parse error makes plistlib raise, so python3 exits non-zero.
const PLIST_DUMP: &str = r#"
import json, plistlib, sys
with open(sys.argv[1], "rb") as f:
    d = plistlib.load(f)
if not isinstance(d, dict):
    sys.exit("the top level of the plist is not a dictionary")
for key in sys.argv[2:]:
    print(key, json.dumps(d.get(key)))
"#;

/// The JSON text (as Python's `json.dumps` writes it) of each key, or python's stderr.
fn plist_keys(path: &Path, keys: &[&str]) -> Result<HashMap<String, String>, String> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(PLIST_DUMP)
        .arg(path)
        .args(keys)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !out.status.success() {
        return Err(show(&out));
    }
    let text = String::from_utf8(out.stdout).map_err(|e| format!("non-UTF-8 output: {e}"))?;
    let mut map = HashMap::new();
    for line in text.lines() {
        let (key, json) = line
            .split_once(' ')
            .ok_or_else(|| format!("unexpected line {line:?}"))?;
        map.insert(key.to_owned(), json.to_owned());
    }
    Ok(map)
}

/// `s` as a JSON string literal; only for plain ASCII values, which need no escaping.
fn json_str(s: &str) -> String {
    assert!(
        s.bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'),
        "json_str is only for plain ASCII: {s:?}"
    );
    format!("\"{s}\"")
}

const PLIST_KEYS: [&str; 19] = [
    "CFBundleIdentifier",
    "CFBundleName",
    "CFBundleDisplayName",
    "CFBundleExecutable",
    "CFBundlePackageType",
    "CFBundleIconFile",
    "CFBundleShortVersionString",
    "CFBundleVersion",
    "CFBundleInfoDictionaryVersion",
    "LSUIElement",
    "LSMinimumSystemVersion",
    "NSHighResolutionCapable",
    "NSMicrophoneUsageDescription",
    "NSDocumentsFolderUsageDescription",
    "NSDesktopFolderUsageDescription",
    "NSDownloadsFolderUsageDescription",
    "NSRemovableVolumesUsageDescription",
    "NSNetworkVolumesUsageDescription",
    "NoSuchKey",
];

#[test]
fn info_plist_has_the_keys_the_app_needs() {
    let path = repo("bundle/Info.plist");
    let text = fs::read_to_string(&path).expect("read bundle/Info.plist");
    assert!(
        text.starts_with("<?xml"),
        "bundle/Info.plist should stay an XML plist (readable in review)"
    );
    let keys = plist_keys(&path, &PLIST_KEYS)
        .unwrap_or_else(|e| panic!("bundle/Info.plist does not parse:\n{e}"));
    let get = |k: &str| keys.get(k).map(String::as_str).unwrap_or("<not printed>");

    assert_eq!(get("NoSuchKey"), "null", "the dump must report absent keys");

    let version = json_str(env!("CARGO_PKG_VERSION"));
    let expected = [
        ("CFBundleIdentifier", json_str("app.persyk.Persyk")),
        ("CFBundleName", json_str("Persyk")),
        ("CFBundleDisplayName", json_str("Persyk")),
        ("CFBundleExecutable", json_str("persyk")),
        ("CFBundlePackageType", json_str("APPL")),
        ("CFBundleIconFile", json_str("Persyk")),
        ("CFBundleShortVersionString", version.clone()),
        ("CFBundleVersion", version),
        ("CFBundleInfoDictionaryVersion", json_str("6.0")),
        ("LSUIElement", "true".to_owned()),
        ("LSMinimumSystemVersion", json_str("11.0")),
        ("NSHighResolutionCapable", "true".to_owned()),
    ];
    for (key, want) in expected {
        assert_eq!(get(key), want, "Info.plist key {key}");
    }

    // The executable named in the plist is the binary cargo builds.
    let bin = Path::new(env!("CARGO_BIN_EXE_persyk"));
    assert_eq!(
        bin.file_stem().and_then(|s| s.to_str()),
        Some("persyk"),
        "CFBundleExecutable must name the crate's binary"
    );

    // The sentences macOS shows when it asks for the microphone, and for Documents (where
    // the default session root is).
    // Issue #25 item 9: a session folder on the Desktop, in Downloads or on a removable or
    // network volume needs its own sentence, or macOS refuses access without asking.
    for key in [
        "NSMicrophoneUsageDescription",
        "NSDocumentsFolderUsageDescription",
        "NSDesktopFolderUsageDescription",
        "NSDownloadsFolderUsageDescription",
        "NSRemovableVolumesUsageDescription",
        "NSNetworkVolumesUsageDescription",
    ] {
        let sentence = get(key);
        assert!(
            sentence.starts_with('"') && sentence.ends_with('"') && sentence.len() > 20,
            "{key} must be a real sentence, got {sentence}"
        );
    }
}

/// Issue #38 item 1: Finder's Open With lists Persyk for audio and video files (document
/// types), as a viewer that never becomes the default app for them (rank Alternate: opening
/// a song still plays it in Music), and the types cover every container the decoder reads.
#[test]
fn issue38_01_open_with_offers_persyk_for_audio_and_video_and_never_as_the_default() {
    let path = repo("bundle/Info.plist");
    let keys = plist_keys(&path, &["CFBundleDocumentTypes"])
        .unwrap_or_else(|e| panic!("bundle/Info.plist does not parse:\n{e}"));
    let types: serde_json::Value =
        serde_json::from_str(&keys["CFBundleDocumentTypes"]).expect("JSON from the dump");
    let types = types.as_array().expect("an array of document types");
    assert_eq!(types.len(), 1, "{types:?}");
    let t = &types[0];
    assert_eq!(
        t["CFBundleTypeRole"], "Viewer",
        "Persyk reads files, never edits them"
    );
    assert_eq!(
        t["LSHandlerRank"], "Alternate",
        "never the default app for a file"
    );
    assert!(
        t["CFBundleTypeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty()),
        "the kind Finder shows"
    );
    let utis: Vec<&str> = t["LSItemContentTypes"]
        .as_array()
        .expect("content types")
        .iter()
        .filter_map(|u| u.as_str())
        .collect();
    // The parents every audio and video type conforms to, then the decoder's containers.
    for uti in [
        "public.audio",
        "public.movie",
        "public.mp3",
        "public.mpeg-4-audio",
        "com.apple.m4a-audio",
        "public.aiff-audio",
        "com.microsoft.waveform-audio",
        "org.xiph.flac",
        "public.mpeg-4",
        "com.apple.quicktime-movie",
    ] {
        assert!(utis.contains(&uti), "{uti} missing from {utis:?}");
    }
    assert!(
        !t.as_object()
            .expect("a dictionary")
            .contains_key("CFBundleTypeExtensions"),
        "content types (UTIs), not the extensions macOS deprecated"
    );
}

#[test]
fn a_malformed_plist_is_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("Info.plist");
    // An unclosed <dict>: the shape of a botched hand edit.
    fs::write(
        &path,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\">\n<dict>\n\
         <key>CFBundleIdentifier</key>\n<string>app.persyk.Persyk</string>\n</plist>\n",
    )
    .expect("write the broken plist");
    let err =
        plist_keys(&path, &["CFBundleIdentifier"]).expect_err("a malformed plist must not load");
    assert!(
        err.contains("stderr:"),
        "the failure should show python's stderr: {err}"
    );
}

// --- PNGs -----------------------------------------------------------------------------------

/// The CRC-32 PNG chunks carry (ISO-HDLC polynomial, reflected), bit by bit.
fn crc32(parts: &[&[u8]]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for part in parts {
        for &byte in *part {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                let mask = (crc & 1).wrapping_neg();
                crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
            }
        }
    }
    !crc
}

fn be32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

/// Checks the structure of the PNG at `rel` and that it is `size`×`size`, 8-bit RGBA.
fn check_png(rel: &str, size: u32) {
    let bytes = fs::read(repo(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"));
    assert_eq!(
        bytes.get(..8),
        Some(&b"\x89PNG\r\n\x1a\n"[..]),
        "{rel}: PNG signature"
    );

    // IHDR comes first: length 13, then width, height, bit depth, color type, compression,
    // filter method and interlace method.
    assert!(bytes.len() >= 33, "{rel}: too short for an IHDR");
    assert_eq!(be32(&bytes, 8), 13, "{rel}: IHDR length");
    assert_eq!(&bytes[12..16], b"IHDR", "{rel}: first chunk must be IHDR");
    let ihdr = &bytes[16..29];
    assert_eq!(be32(ihdr, 0), size, "{rel}: width");
    assert_eq!(be32(ihdr, 4), size, "{rel}: height");
    assert_eq!(ihdr[8], 8, "{rel}: bit depth");
    assert_eq!(ihdr[9], 6, "{rel}: color type (6 = RGBA)");
    assert_eq!(
        &ihdr[10..13],
        &[0, 0, 0],
        "{rel}: compression, filter, interlace"
    );

    // Every chunk's CRC holds, there is image data, and IEND ends the file.
    let mut at = 8;
    let mut kinds = Vec::new();
    while at < bytes.len() {
        assert!(
            at + 12 <= bytes.len(),
            "{rel}: truncated chunk at byte {at}"
        );
        let len = be32(&bytes, at) as usize;
        let end = at + 8 + len;
        assert!(
            end + 4 <= bytes.len(),
            "{rel}: chunk at byte {at} runs past the end"
        );
        let kind = &bytes[at + 4..at + 8];
        let data = &bytes[at + 8..end];
        assert_eq!(
            be32(&bytes, end),
            crc32(&[kind, data]),
            "{rel}: CRC of the {} chunk",
            String::from_utf8_lossy(kind)
        );
        kinds.push(kind.to_vec());
        at = end + 4;
    }
    assert!(kinds.iter().any(|k| k == b"IDAT"), "{rel}: no IDAT chunk");
    assert_eq!(
        kinds.last().map(Vec::as_slice),
        Some(&b"IEND"[..]),
        "{rel}: last chunk"
    );
}

#[test]
fn crc32_matches_the_reference_value() {
    // The standard check value of CRC-32/ISO-HDLC.
    assert_eq!(crc32(&[b"123456789"]), 0xCBF4_3926);
}

#[test]
fn tray_icons_are_44px_rgba_pngs() {
    let dir = repo("assets/tray");
    let mut found: Vec<String> = fs::read_dir(&dir)
        .expect("read assets/tray")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".png"))
        .collect();
    found.sort();
    let mut expected: Vec<String> = TRAY_ICONS.iter().map(|n| format!("{n}.png")).collect();
    expected.sort();
    assert_eq!(found, expected, "assets/tray holds one PNG per tray state");
    for name in &found {
        check_png(&format!("assets/tray/{name}"), 44);
    }
}

#[test]
fn app_icon_is_a_1024px_rgba_png() {
    check_png("bundle/icon/persyk-1024.png", 1024);
}

#[test]
fn committed_icons_match_make_icons() {
    let out = Command::new(repo("scripts/make-icons"))
        .arg("--check")
        .current_dir(repo(""))
        .output()
        .expect("run scripts/make-icons --check");
    assert!(
        out.status.success(),
        "the committed icons differ from what scripts/make-icons draws; rerun it:\n{}",
        show(&out)
    );
}

#[test]
fn committed_sounds_match_make_sounds() {
    let out = Command::new(repo("scripts/make-sounds"))
        .arg("--check")
        .current_dir(repo(""))
        .output()
        .expect("run scripts/make-sounds --check");
    assert!(
        out.status.success(),
        "the committed cues differ from what scripts/make-sounds synthesizes; rerun it:\n{}",
        show(&out)
    );
}

// --- scripts/bundle-macos -------------------------------------------------------------------

#[test]
fn bundle_script_is_valid_bash() {
    let out = Command::new("bash")
        .arg("-n")
        .arg(repo("scripts/bundle-macos"))
        .output()
        .expect("run bash -n");
    assert!(
        out.status.success(),
        "bash -n scripts/bundle-macos:\n{}",
        show(&out)
    );
}

#[cfg(not(target_os = "macos"))]
#[test]
fn bundle_script_refuses_off_macos() {
    let out = Command::new(repo("scripts/bundle-macos"))
        .current_dir(repo(""))
        .output()
        .expect("run scripts/bundle-macos");
    assert_eq!(
        out.status.code(),
        Some(2),
        "exit code off macOS:\n{}",
        show(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("macOS"),
        "the refusal should say why:\n{}",
        show(&out)
    );
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout (it is for the app path):\n{}",
        show(&out)
    );
}
