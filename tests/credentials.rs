//! The API key: secret store first, then OPENAI_API_KEY; never in an error message.

use persyk::credentials::{self, CredentialError, KeySource};

#[test]
fn secret_store_wins_over_the_environment_and_errors_never_carry_the_key() {
    const ENV_KEY: &str = "sk-env-0123456789abcdefghijklmnop";
    const STORED_KEY: &str = "sk-stored-0123456789abcdefghijkl";
    // The only test in this binary, so changing the environment races with nothing.
    unsafe { std::env::set_var(credentials::ENV_VAR, ENV_KEY) };
    let _ = credentials::delete_key();
    assert_eq!(
        credentials::api_key().expect("env key"),
        (ENV_KEY.to_string(), KeySource::Environment)
    );
    match credentials::store_key(STORED_KEY) {
        Ok(()) => {
            assert_eq!(
                credentials::api_key().expect("stored key"),
                (STORED_KEY.to_string(), KeySource::SecretStore)
            );
            credentials::delete_key().expect("delete");
            assert_eq!(credentials::stored_key().expect("read"), None);
        }
        // A machine without a usable secret store (e.g. a container without a session
        // keyring) must say so with the code, and the environment must still work.
        Err(e) => assert_eq!(e, CredentialError::StoreUnavailable),
    }
    unsafe { std::env::remove_var(credentials::ENV_VAR) };
    let err = credentials::api_key().expect_err("no key anywhere");
    assert_eq!(err.code(), "credentials.no-key");
    assert!(!err.to_string().contains("sk-"));
    assert_eq!(credentials::store_key(""), Err(CredentialError::EmptyKey));
}
