//! The provider API key: read from the OS secret store, or `OPENAI_API_KEY`.
//!
//! The secret store ([`storage`]): the Keychain on macOS; on Linux the Secret Service
//! (GNOME Keyring, KWallet, … over the session bus; with the `app` feature) where the
//! session bus offers one, else the kernel keyring (keyutils), which forgets the key at
//! reboot and after about three days unused — the Settings page says so plainly.
//!
//! Invariants:
//! - The key never goes into a file, a session, a log or an error message; errors carry codes.
//! - The secret store wins over the environment, so a key set in Settings is the one used.
//! - On Linux a key stored in the kernel keyring before a Secret Service appeared is still
//!   read (after the Secret Service's own); storing writes the Secret Service only and
//!   removes that older copy.
//! - The clean-up server's key is kept per server: its account is the server's origin
//!   (`https://api.groq.com`, [`crate::endpoint::origin`]), so a key is only ever read for
//!   the server it was saved for ([`KeyEntry::cleanup_for`]); typing another server's address
//!   never sends it elsewhere.
//! - Tests never touch Persyk's own entry ([`KeyEntry::app`], which the free functions use):
//!   they use [`KeyEntry::for_tests`], a service name of their own
//!   (`tests/credentials.rs::issue25_05_…` checks every test source for it).

/// Secret-store service name.
pub const SERVICE: &str = "app.persyk.Persyk";
/// Secret-store account name (of the OpenAI key).
pub const ACCOUNT: &str = "openai-api-key";
/// Secret-store service name of the clean-up model server's key (issue #27).
pub const CLEANUP_SERVICE: &str = "app.persyk.Persyk.cleanup";
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

#[cfg(all(target_os = "linux", feature = "app"))]
mod secret_service;

/// Where the key is kept on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStorage {
    /// The macOS Keychain.
    Keychain,
    /// The freedesktop.org Secret Service (GNOME Keyring, KWallet, …): kept across reboots.
    SecretService,
    /// The Linux kernel keyring: forgotten at reboot (and after about 3 days unused).
    KernelKeyring,
    /// Another system's credential store (through the `keyring` crate).
    Other,
}

impl KeyStorage {
    /// Whether a stored key survives a reboot.
    pub fn survives_reboot(self) -> bool {
        !matches!(self, KeyStorage::KernelKeyring)
    }

    /// One sentence for the Settings page.
    pub fn describe(self) -> &'static str {
        match self {
            KeyStorage::Keychain => "The key is kept in the macOS Keychain.",
            KeyStorage::SecretService => {
                "The key is kept in the system's secret store (Secret Service), across restarts."
            }
            KeyStorage::KernelKeyring => {
                "No secret store (Secret Service, such as GNOME Keyring or KWallet) is running, \
                 so the key is kept in the kernel keyring only until you restart the computer \
                 (or leave it unused for about 3 days). Set OPENAI_API_KEY, or start a secret \
                 store, to keep it."
            }
            KeyStorage::Other => "The key is kept in the system's credential store.",
        }
    }
}

/// Where [`store_key`] puts the key on this machine (on Linux this asks the session bus).
pub fn storage() -> KeyStorage {
    #[cfg(target_os = "macos")]
    {
        KeyStorage::Keychain
    }
    #[cfg(all(target_os = "linux", feature = "app"))]
    {
        if secret_service::available() {
            KeyStorage::SecretService
        } else {
            KeyStorage::KernelKeyring
        }
    }
    #[cfg(all(target_os = "linux", not(feature = "app")))]
    {
        KeyStorage::KernelKeyring
    }
    #[cfg(not(any(target_os = "macos", target_os = "linux")))]
    {
        KeyStorage::Other
    }
}

/// One entry of the secret store: the service name and account the key is kept under.
///
/// [`KeyEntry::app`] is Persyk's own ([`SERVICE`], [`ACCOUNT`]), the one the app and the CLI
/// use through the free functions below. Tests never use it: [`KeyEntry::for_tests`] names a
/// service of their own, so running the tests can neither read, replace nor delete the key a
/// developer saved (nor wait on a Keychain prompt for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEntry {
    service: std::borrow::Cow<'static, str>,
    account: std::borrow::Cow<'static, str>,
}

impl KeyEntry {
    /// Persyk's entry: service [`SERVICE`], account [`ACCOUNT`].
    pub const fn app() -> KeyEntry {
        KeyEntry {
            service: std::borrow::Cow::Borrowed(SERVICE),
            account: std::borrow::Cow::Borrowed(ACCOUNT),
        }
    }

    /// The key of the clean-up model server at `origin` (`scheme://host[:port]`, see
    /// [`crate::endpoint::origin`]): service [`CLEANUP_SERVICE`], the origin as the account.
    /// Read with [`KeyEntry::stored_key`] only: `OPENAI_API_KEY` is never sent to another
    /// server, and no server's key to another.
    pub fn cleanup_for(origin: &str) -> KeyEntry {
        KeyEntry {
            service: std::borrow::Cow::Borrowed(CLEANUP_SERVICE),
            account: origin.to_owned().into(),
        }
    }

    /// The one clean-up key versions before keys were kept per server stored (account
    /// [`ACCOUNT`]): never read as anyone's key, only deleted.
    pub const fn cleanup_unbound() -> KeyEntry {
        KeyEntry {
            service: std::borrow::Cow::Borrowed(CLEANUP_SERVICE),
            account: std::borrow::Cow::Borrowed(ACCOUNT),
        }
    }

    /// An entry for tests: service `app.persyk.Persyk.test.<name>.<process id>`, never
    /// [`SERVICE`]. `name` should say which test owns it; the process id keeps test runs in
    /// parallel (two checkouts, two test binaries) apart.
    pub fn for_tests(name: &str) -> KeyEntry {
        KeyEntry {
            service: format!("{SERVICE}.test.{name}.{}", std::process::id()).into(),
            account: std::borrow::Cow::Borrowed(ACCOUNT),
        }
    }

    /// This entry with another account (a test's per-server entries).
    pub fn with_account(self, account: &str) -> KeyEntry {
        KeyEntry {
            account: account.to_owned().into(),
            ..self
        }
    }

    /// The service name the key is kept under.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The account name the key is kept under.
    pub fn account(&self) -> &str {
        &self.account
    }

    #[cfg(all(target_os = "linux", feature = "app"))]
    fn attributes(&self) -> std::collections::HashMap<&str, &str> {
        [("service", self.service()), ("username", self.account())].into()
    }

    fn native(&self) -> Result<keyring::Entry, CredentialError> {
        keyring::Entry::new(self.service(), self.account())
            .map_err(|_| CredentialError::StoreUnavailable)
    }

    /// The key from the secret store, if one is stored there.
    pub fn stored_key(&self) -> Result<Option<String>, CredentialError> {
        #[cfg(all(target_os = "linux", feature = "app"))]
        if storage() == KeyStorage::SecretService {
            match secret_service::get(&self.attributes()) {
                Ok(Some(k)) if !k.is_empty() => {
                    return String::from_utf8(k)
                        .map(Some)
                        .map_err(|_| CredentialError::StoreUnavailable);
                }
                // Not there: an older copy in the kernel keyring still counts.
                Ok(_) => {}
                Err(secret_service::Failed) => return Err(CredentialError::StoreUnavailable),
            }
        }
        self.kernel_or_native_key()
    }

    fn kernel_or_native_key(&self) -> Result<Option<String>, CredentialError> {
        match self.native()?.get_password() {
            Ok(k) if !k.is_empty() => Ok(Some(k)),
            Ok(_) | Err(keyring::Error::NoEntry) => Ok(None),
            Err(_) => Err(CredentialError::StoreUnavailable),
        }
    }

    /// The key to use: the secret store's, else `OPENAI_API_KEY`'s.
    pub fn api_key(&self) -> Result<(String, KeySource), CredentialError> {
        if let Ok(Some(k)) = self.stored_key() {
            return Ok((k, KeySource::SecretStore));
        }
        match std::env::var(ENV_VAR) {
            Ok(k) if !k.is_empty() => Ok((k, KeySource::Environment)),
            _ => Err(CredentialError::NoKey),
        }
    }

    /// Stores `key` in the secret store.
    pub fn store_key(&self, key: &str) -> Result<(), CredentialError> {
        if key.is_empty() {
            return Err(CredentialError::EmptyKey);
        }
        #[cfg(all(target_os = "linux", feature = "app"))]
        if storage() == KeyStorage::SecretService {
            let label = if self.service() == CLEANUP_SERVICE {
                format!("Persyk: clean-up key for {}", self.account())
            } else {
                "Persyk: OpenAI API key".to_owned()
            };
            secret_service::set(&label, &self.attributes(), key.as_bytes())
                .map_err(|_| CredentialError::StoreUnavailable)?;
            // One key: drop a copy an earlier version left in the kernel keyring.
            if let Ok(e) = self.native() {
                let _ = e.delete_credential();
            }
            return Ok(());
        }
        self.native()?
            .set_password(key)
            .map_err(|_| CredentialError::StoreUnavailable)
    }

    /// Removes the key from the secret store (absent is fine).
    pub fn delete_key(&self) -> Result<(), CredentialError> {
        #[cfg(all(target_os = "linux", feature = "app"))]
        if storage() == KeyStorage::SecretService {
            secret_service::delete(&self.attributes())
                .map_err(|_| CredentialError::StoreUnavailable)?;
        }
        match self.native()?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(_) => Err(CredentialError::StoreUnavailable),
        }
    }
}

/// The key from Persyk's entry in the secret store ([`KeyEntry::app`]), if one is stored.
pub fn stored_key() -> Result<Option<String>, CredentialError> {
    KeyEntry::app().stored_key()
}

/// The key to use: Persyk's entry in the secret store, else `OPENAI_API_KEY`'s.
pub fn api_key() -> Result<(String, KeySource), CredentialError> {
    KeyEntry::app().api_key()
}

/// Stores `key` in Persyk's entry of the secret store.
pub fn store_key(key: &str) -> Result<(), CredentialError> {
    KeyEntry::app().store_key(key)
}

/// Removes the key from Persyk's entry of the secret store (absent is fine).
pub fn delete_key() -> Result<(), CredentialError> {
    KeyEntry::app().delete_key()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persyks_entry_is_the_service_and_a_tests_entry_never_is() {
        assert_eq!(KeyEntry::app().service(), SERVICE);
        let test = KeyEntry::for_tests("unit");
        assert_ne!(test.service(), SERVICE);
        assert!(test.service().starts_with("app.persyk.Persyk.test.unit."));
    }

    #[test]
    fn each_clean_up_server_has_its_own_account() {
        let groq = KeyEntry::cleanup_for("https://api.groq.com");
        let local = KeyEntry::cleanup_for("http://127.0.0.1:11434");
        assert_eq!(groq.service(), CLEANUP_SERVICE);
        assert_eq!(groq.account(), "https://api.groq.com");
        assert_ne!(groq, local);
        assert_ne!(groq, KeyEntry::cleanup_unbound());
        assert_eq!(KeyEntry::app().account(), ACCOUNT);
    }
}
