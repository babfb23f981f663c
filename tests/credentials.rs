//! The API key: secret store first, then OPENAI_API_KEY; never in an error message; and the
//! tests' own secret-store entry, never Persyk's.

use std::path::Path;

use persyk::credentials::{self, CredentialError, KeyEntry, KeySource};

#[test]
fn secret_store_wins_over_the_environment_and_errors_never_carry_the_key() {
    const ENV_KEY: &str = "sk-env-0123456789abcdefghijklmnop";
    const STORED_KEY: &str = "sk-stored-0123456789abcdefghijkl";
    let entry = KeyEntry::for_tests("credentials");
    // The only test in this binary that reads the environment, so changing it races with
    // nothing.
    unsafe { std::env::set_var(credentials::ENV_VAR, ENV_KEY) };
    let _ = entry.delete_key();
    assert_eq!(
        entry.api_key().expect("env key"),
        (ENV_KEY.to_string(), KeySource::Environment)
    );
    match entry.store_key(STORED_KEY) {
        Ok(()) => {
            assert_eq!(
                entry.api_key().expect("stored key"),
                (STORED_KEY.to_string(), KeySource::SecretStore)
            );
            entry.delete_key().expect("delete");
            assert_eq!(entry.stored_key().expect("read"), None);
        }
        // A machine without a usable secret store (e.g. a container without a session
        // keyring) must say so with the code, and the environment must still work.
        Err(e) => assert_eq!(e, CredentialError::StoreUnavailable),
    }
    unsafe { std::env::remove_var(credentials::ENV_VAR) };
    let err = entry.api_key().expect_err("no key anywhere");
    assert_eq!(err.code(), "credentials.no-key");
    assert!(!err.to_string().contains("sk-"));
    assert_eq!(entry.store_key(""), Err(CredentialError::EmptyKey));
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Issue #25 item 5: `tests/credentials.rs` deleted and rewrote Persyk's own secret-store
/// entry (`app.persyk.Persyk`), so running the tests on a Mac wiped the developer's saved key
/// and could wait on a Keychain prompt. Tests now use an entry of their own
/// ([`KeyEntry::for_tests`]): its service name is never Persyk's, differs per test and per
/// process, and no test, bench or example reaches Persyk's entry (the free functions, which
/// the app and the CLI use, Persyk's own `KeyEntry`, or the app's key store over them).
#[test]
fn issue25_05_tests_never_touch_persyks_own_secret_store_entry() {
    let a = KeyEntry::for_tests("one");
    let b = KeyEntry::for_tests("two");
    for entry in [&a, &b] {
        assert_ne!(entry.service(), credentials::SERVICE);
        assert!(
            entry
                .service()
                .starts_with(&format!("{}.test.", credentials::SERVICE)),
            "{entry:?}"
        );
        assert!(
            entry
                .service()
                .ends_with(&format!(".{}", std::process::id())),
            "{entry:?}"
        );
    }
    assert_ne!(a, b);

    // Built from pieces so that this file does not match itself.
    let functions = ["api_key", "stored_key", "store_key", "delete_key"];
    let mut forbidden: Vec<String> = functions
        .iter()
        .map(|f| format!("{}::{f}(", "credentials"))
        .collect();
    forbidden.push(format!("{}::app(", "KeyEntry"));
    forbidden.push(format!("{}Keys", "System"));

    let mut files = Vec::new();
    for dir in ["tests", "benches", "examples", "fuzz"] {
        rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), &mut files);
    }
    assert!(files.len() > 20, "found only {files:?}");
    let mut offenders = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("read a test source");
        for (n, line) in text.lines().enumerate() {
            let by_path = forbidden.iter().any(|f| line.contains(f.as_str()));
            // `use persyk::credentials::{store_key, …}` and a bare call later.
            let imported = line.trim_start().starts_with("use persyk::credentials")
                && functions.iter().any(|f| {
                    line.split(|c: char| !c.is_alphanumeric() && c != '_')
                        .any(|w| w == *f)
                });
            if by_path || imported {
                offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "tests must use KeyEntry::for_tests, never Persyk's own entry:\n{}",
        offenders.join("\n")
    );
}
