//! The real `persyk` binary, driven over the shared fixtures: exit codes, output formats and
//! what `check` and `context` print.
//!
//! Exit codes: 0 success, 1 a contract violation in the data, 2 the command could not run,
//! 3 an explicit leaf that does not exist.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

fn persyk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_persyk"))
        .args(args)
        .output()
        .expect("run the persyk binary")
}

fn path_arg(p: &Path) -> &str {
    p.to_str().expect("fixture paths are UTF-8")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn exit_code(out: &Output) -> i32 {
    out.status.code().expect("the binary exits normally")
}

/// Runs `persyk context <path> --json [--leaf <leaf>]` and returns the parsed output.
fn context_json(path: &Path, leaf: Option<&str>) -> (i32, Value) {
    let mut args = vec!["context", path_arg(path), "--json"];
    if let Some(leaf) = leaf {
        args.extend(["--leaf", leaf]);
    }
    let out = persyk(&args);
    let code = exit_code(&out);
    let value = if code == 0 {
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| {
            panic!(
                "context --json printed invalid JSON ({e}): {}",
                stdout(&out)
            )
        })
    } else {
        Value::Null
    };
    (code, value)
}

fn message_ids(context: &Value) -> Vec<String> {
    context["messages"]
        .as_array()
        .expect("messages is an array")
        .iter()
        .map(|m| m["id"].as_str().expect("id is a string").to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// check
// ---------------------------------------------------------------------------------------------

#[test]
fn check_accepts_a_golden_file() {
    let out = persyk(&["check", path_arg(&fixture("golden/dictation-basic.jsonl"))]);
    assert_eq!(exit_code(&out), 0, "stdout: {}", stdout(&out));
    assert_eq!(stdout(&out), "");
}

#[test]
fn check_accepts_a_session_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("s1");
    fs::create_dir(&dir).expect("mkdir s1");
    fs::copy(
        fixture("golden/branch-siblings.jsonl"),
        dir.join("session.jsonl"),
    )
    .expect("copy golden");
    let out = persyk(&["check", path_arg(&dir)]);
    assert_eq!(exit_code(&out), 0, "stdout: {}", stdout(&out));

    // Several paths at once: still 0 when all are valid.
    let out = persyk(&[
        "check",
        path_arg(&dir),
        path_arg(&fixture("user-only.jsonl")),
    ]);
    assert_eq!(exit_code(&out), 0, "stdout: {}", stdout(&out));
}

#[test]
fn check_reports_a_reject_as_path_line_code_message() {
    let path = fixture("reject/entry.parent-missing--forward-ref.jsonl");
    let shown = path_arg(&path);
    let out = persyk(&["check", shown]);
    assert_eq!(exit_code(&out), 1);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(!lines.is_empty(), "check printed nothing for a reject");
    for line in &lines {
        let rest = line
            .strip_prefix(shown)
            .and_then(|r| r.strip_prefix(':'))
            .unwrap_or_else(|| panic!("line does not start with the path: {line}"));
        let (line_no, rest) = rest.split_once(": ").expect("path:line: …");
        line_no.parse::<u64>().expect("a line number");
        let (code, message) = rest.split_once(": ").expect("…: code: message");
        assert!(
            persyk::session::Code::parse(code).is_some(),
            "unknown code {code}"
        );
        assert!(!message.is_empty());
    }
    assert!(
        lines.iter().any(|l| l.ends_with(&format!(
            ":2: entry.parent-missing: {}",
            persyk::session::Code::EntryParentMissing.describe()
        ))),
        "no entry.parent-missing on line 2 in:\n{text}"
    );
    assert!(!text.contains("PLANTED") && !text.contains("sk-proj"));
}

#[test]
fn check_exit_code_is_one_when_any_path_is_invalid() {
    let out = persyk(&[
        "check",
        path_arg(&fixture("golden/dictation-basic.jsonl")),
        path_arg(&fixture("reject/header.unsupported-version.jsonl")),
    ]);
    assert_eq!(exit_code(&out), 1);
    assert!(stdout(&out).contains("header.unsupported-version"));
}

#[test]
fn check_missing_path_exits_two() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("no-such-session.jsonl");
    let out = persyk(&["check", path_arg(&missing)]);
    assert_eq!(exit_code(&out), 2);

    // A directory without a session.jsonl is just as unreadable.
    let out = persyk(&["check", path_arg(tmp.path())]);
    assert_eq!(exit_code(&out), 2);
}

#[test]
fn check_json_is_an_array_of_path_line_code_message() {
    let path = fixture("reject/removal.target-not-ancestor.jsonl");
    let out = persyk(&["check", "--json", path_arg(&path)]);
    assert_eq!(exit_code(&out), 1);
    let rows: Value = serde_json::from_str(&stdout(&out)).expect("--json prints JSON");
    let rows = rows.as_array().expect("an array");
    assert!(!rows.is_empty());
    for row in rows {
        let obj = row.as_object().expect("each row is an object");
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["code", "line", "message", "path"]);
        assert_eq!(obj["path"], path_arg(&path));
        assert!(obj["line"].is_u64());
        assert!(obj["message"].is_string());
        let code = obj["code"].as_str().expect("code is a string");
        assert!(persyk::session::Code::parse(code).is_some(), "{code}");
    }
    assert!(
        rows.iter()
            .any(|r| r["code"] == "removal.target-not-ancestor" && r["line"] == 5),
        "{rows:?}"
    );

    let out = persyk(&["check", "--json", path_arg(&fixture("golden/labels.jsonl"))]);
    assert_eq!(exit_code(&out), 0);
    let rows: Value = serde_json::from_str(&stdout(&out)).expect("--json prints JSON");
    assert_eq!(rows, Value::Array(Vec::new()));
}

#[test]
fn check_output_never_echoes_planted_content() {
    for name in [
        "record.too-large.jsonl",
        "entry.invalid-value--endpoint-secret.jsonl",
        "realtime.media-invalid--pointer-not-null.jsonl",
        "block.not-allowed.jsonl",
    ] {
        for json in [false, true] {
            let path = fixture(&format!("reject/{name}"));
            let mut args = vec!["check", path_arg(&path)];
            if json {
                args.push("--json");
            }
            let out = persyk(&args);
            assert_eq!(exit_code(&out), 1, "{name}");
            let all = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
            assert!(
                !all.contains("PLANTED") && !all.contains("sk-proj"),
                "{name}: output echoes content:\n{all}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// context
// ---------------------------------------------------------------------------------------------

#[test]
fn context_prints_the_user_only_conversation() {
    let path = fixture("user-only.jsonl");
    let (code, ctx) = context_json(&path, None);
    assert_eq!(code, 0);
    let obj = ctx.as_object().expect("an object");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["leaf", "messages", "name"]);
    assert_eq!(ctx["leaf"], "user-message-1");
    assert_eq!(ctx["name"], Value::Null);
    let messages = ctx["messages"].as_array().expect("an array");
    assert_eq!(messages.len(), 1);
    let m = messages[0].as_object().expect("an object");
    let mut keys: Vec<&str> = m.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["entry", "id"]);
    assert_eq!(m["id"], "user-message-1");

    let text = fs::read_to_string(&path).expect("read user-only.jsonl");
    let line: Value = serde_json::from_str(text.lines().nth(1).expect("line 2")).expect("JSON");
    assert_eq!(m["entry"], line);
}

#[test]
fn context_leaf_null_is_empty_and_a_missing_leaf_exits_three() {
    let path = fixture("user-only.jsonl");
    let (code, ctx) = context_json(&path, Some("null"));
    assert_eq!(code, 0);
    assert_eq!(ctx["leaf"], Value::Null);
    assert_eq!(ctx["messages"], Value::Array(Vec::new()));

    let out = persyk(&[
        "context",
        path_arg(&path),
        "--json",
        "--leaf",
        "does-not-exist",
    ]);
    assert_eq!(exit_code(&out), 3);
    assert_eq!(stdout(&out), "");
}

#[test]
fn context_follows_an_explicit_leaf_and_global_name() {
    let path = fixture("golden/session-info.jsonl");
    let (code, ctx) = context_json(&path, Some("si-b"));
    assert_eq!(code, 0);
    assert_eq!(ctx["leaf"], "si-b");
    assert_eq!(message_ids(&ctx), ["m1"]);
    // The name is global: the sibling branch still sees the latest name in file order.
    assert_eq!(ctx["name"], "Morning notes – dentist & groceries");

    let path = fixture("golden/removal-one-branch.jsonl");
    let (code, ctx) = context_json(&path, Some("a2b"));
    assert_eq!(code, 0);
    assert_eq!(message_ids(&ctx), ["u1", "a1", "u2", "a2b"]);
    let (code, ctx) = context_json(&path, None);
    assert_eq!(code, 0);
    assert_eq!(message_ids(&ctx), ["u1", "u3", "u4"]);
}

/// Every golden's default conversation, printed by the binary, matches its expectation and
/// each printed entry is the JSON of its line.
#[test]
fn context_matches_every_golden_expectation() {
    let mut failures = Vec::new();
    let dir = fixture("golden");
    let mut goldens: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("list goldens")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    goldens.sort();
    for path in goldens {
        let name = path.file_stem().and_then(|s| s.to_str()).expect("UTF-8");
        let expected: Value = serde_json::from_str(
            &fs::read_to_string(dir.join(format!("{name}.expected.json"))).expect("expectation"),
        )
        .expect("expectation is JSON");
        let out = persyk(&["context", path_arg(&path), "--json"]);
        if exit_code(&out) != 0 {
            failures.push(format!(
                "{name}: exit {} ({})",
                exit_code(&out),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            continue;
        }
        let mut de = serde_json::Deserializer::from_str(std::str::from_utf8(&out.stdout).unwrap());
        de.disable_recursion_limit();
        let ctx: Value = serde::Deserialize::deserialize(&mut de).expect("JSON output");
        let want: Vec<String> = expected["default"]["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|v| v.as_str().expect("id").to_owned())
            .collect();
        if message_ids(&ctx) != want {
            failures.push(format!(
                "{name}: messages {:?}, want {want:?}",
                message_ids(&ctx)
            ));
        }
        if ctx["leaf"] != expected["default"]["leaf"] || ctx["name"] != expected["name"] {
            failures.push(format!("{name}: leaf/name differ: {}", ctx));
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden(s) failed:\n  - {}",
        failures.len(),
        failures.join("\n  - ")
    );
}

#[test]
fn context_refuses_a_reject_with_exit_one() {
    for name in [
        "entry.parent-missing--forward-ref.jsonl",
        "entry.unknown-type.jsonl",
        "removal.target-not-ancestor.jsonl",
    ] {
        let out = persyk(&["context", path_arg(&fixture(&format!("reject/{name}")))]);
        assert_eq!(exit_code(&out), 1, "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("PLANTED") && !err.contains("sk-proj"),
            "{name}: {err}"
        );
    }
}

#[test]
fn incomplete_tail_projects_its_committed_part_but_fails_check() {
    let path = fixture("reject/file.incomplete-tail.jsonl");
    let (code, ctx) = context_json(&path, None);
    assert_eq!(code, 0);
    assert_eq!(ctx["leaf"], "m1");
    assert_eq!(message_ids(&ctx), ["m1"]);

    let out = persyk(&["check", path_arg(&path)]);
    assert_eq!(exit_code(&out), 1);
    assert!(stdout(&out).contains(":3: file.incomplete-tail: "));
}

#[test]
fn context_on_a_missing_path_exits_two() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = persyk(&["context", path_arg(&tmp.path().join("nope.jsonl"))]);
    assert_eq!(exit_code(&out), 2);
}
