//! The provider API key: read from the OS secret store, or `OPENAI_API_KEY`.
//!
//! Invariants:
//! - The key never goes into a file, a session, a log or an error message; errors carry codes.
//! - The secret store wins over the environment, so a key set in Settings is the one used.

/// Secret-store service name.
pub const SERVICE: &str = "app.persyk.Persyk";
/// Secret-store account name.
pub const ACCOUNT: &str = "openai-api-key";
/// Environment variable read when the secret store has no key.
pub const ENV_VAR: &str = "OPENAI_API_KEY";

/// Where the key came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    SecretStore,
    Environment,
}

/// Why no key could be read or stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    #[error("credentials.no-key: no API key in the secret store or OPENAI_API_KEY")]
    NoKey,
    #[error("credentials.store-unavailable: the OS secret store could not be used")]
    StoreUnavailable,
    #[error("credentials.empty-key: the API key is empty")]
    EmptyKey,
}

impl CredentialError {
    pub fn code(&self) -> &'static str {
        match self {
            CredentialError::NoKey => "credentials.no-key",
            CredentialError::StoreUnavailable => "credentials.store-unavailable",
            CredentialError::EmptyKey => "credentials.empty-key",
        }
    }
}

fn entry() -> Result<keyring::Entry, CredentialError> {
    keyring::Entry::new(SERVICE, ACCOUNT).map_err(|_| CredentialError::StoreUnavailable)
}

/// The key from the secret store, if one is stored there.
pub fn stored_key() -> Result<Option<String>, CredentialError> {
    match entry()?.get_password() {
        Ok(k) if !k.is_empty() => Ok(Some(k)),
        Ok(_) | Err(keyring::Error::NoEntry) => Ok(None),
        Err(_) => Err(CredentialError::StoreUnavailable),
    }
}

/// The key to use: the secret store's, else `OPENAI_API_KEY`'s.
pub fn api_key() -> Result<(String, KeySource), CredentialError> {
    if let Ok(Some(k)) = stored_key() {
        return Ok((k, KeySource::SecretStore));
    }
    match std::env::var(ENV_VAR) {
        Ok(k) if !k.is_empty() => Ok((k, KeySource::Environment)),
        _ => Err(CredentialError::NoKey),
    }
}

/// Stores `key` in the secret store.
pub fn store_key(key: &str) -> Result<(), CredentialError> {
    if key.is_empty() {
        return Err(CredentialError::EmptyKey);
    }
    entry()?
        .set_password(key)
        .map_err(|_| CredentialError::StoreUnavailable)
}

/// Removes the key from the secret store (absent is fine).
pub fn delete_key() -> Result<(), CredentialError> {
    match entry()?.delete_credential() {
        Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
        Err(_) => Err(CredentialError::StoreUnavailable),
    }
}
