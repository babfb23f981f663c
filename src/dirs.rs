//! Who Persyk is on the system: the project identity that names its folders.
//!
//! The settings (`settings`), the on-device models (`local::models`) and the secret store's
//! service name all derive from [`PROJECT_ID`], so they agree on one name everywhere.

/// The `directories::ProjectDirs` qualifier, organization and application. macOS names the
/// settings folder after all three joined with dots, `app.persyk.Persyk`: the same string as
/// the bundle id and the keychain service (`credentials::SERVICE`). Linux uses the application
/// alone, lowercased (`persyk`).
pub const PROJECT_ID: [&str; 3] = ["app", "persyk", "Persyk"];

/// The platform's folders for Persyk, when the system has a home directory.
pub fn project_dirs() -> Option<directories::ProjectDirs> {
    let [qualifier, organization, application] = PROJECT_ID;
    directories::ProjectDirs::from(qualifier, organization, application)
}
