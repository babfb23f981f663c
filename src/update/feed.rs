//! The release feed's bytes to a [`Checked`] answer: signature first, then the JSON, then the
//! version. Pure: no I/O, so every case is tested on bytes.
//!
//! Invariants:
//! - Nothing of the feed is parsed before its minisign signature verified against the key
//!   given; [`read_verified`] is the only way in, and `parse` is private.
//! - Only the prehashed (`ED`) algorithm is accepted: legacy signatures are refused.
//! - A verified feed is still checked field by field (a semver version, `https://` URLs with
//!   a host, a 64-digit lowercase SHA-256, a size, an RFC 3339 expiry); anything else is
//!   `update.malformed`.
//! - The expiry is read only from the signed feed itself (`expires`): a feed without one is
//!   `update.no-expiry` (the feeds before it was added, and any whose expiry sits only in
//!   the signature's untrusted comment), and [`fresh`] refuses one past it
//!   (`update.expired`).
//! - Errors carry no text of the feed.

use semver::Version;
use serde::Deserialize;

use super::UpdateError;

/// A minisign public key the feed must be signed with.
#[derive(Clone)]
pub struct FeedKey(minisign_verify::PublicKey);

impl std::fmt::Debug for FeedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FeedKey(..)")
    }
}

impl FeedKey {
    /// The key from its base64 line (the second line of a `minisign.pub` file).
    pub fn from_base64(key: &str) -> Result<FeedKey, UpdateError> {
        minisign_verify::PublicKey::from_base64(key.trim())
            .map(FeedKey)
            .map_err(|_| UpdateError::BadKey)
    }

    /// The release key compiled into this binary ([`super::RELEASE_PUBLIC_KEY`]); a
    /// constant the `the_release_key_parses` test reads, so `update.bad-key` here would mean
    /// a broken build, and it refuses every feed rather than accepting one.
    pub fn release() -> Result<FeedKey, UpdateError> {
        FeedKey::from_base64(super::RELEASE_PUBLIC_KEY)
    }
}

/// A release the feed offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub version: Version,
    /// "What's new": the release's page.
    pub notes_url: String,
    /// The DMG, as the release workflow uploaded it.
    pub dmg_url: String,
    /// The DMG's SHA-256, lowercase hex (what `shasum -a 256` prints).
    pub dmg_sha256: String,
    pub dmg_bytes: u64,
    /// The oldest macOS the release runs on, when the feed says.
    pub minimum_macos: Option<String>,
    /// Past this time the feed is not believed ([`fresh`]).
    pub expires: time::OffsetDateTime,
}

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// The feed names this version.
    UpToDate { current: Version },
    /// The feed names a newer version.
    Available(Box<Release>),
}

/// The feed's JSON, as published by `scripts/update-feed make`. Unknown keys are ignored (a
/// later feed may add some); every named one is checked in [`parse`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FeedJson {
    version: String,
    notes_url: String,
    dmg_url: String,
    dmg_sha256: String,
    dmg_bytes: u64,
    #[serde(default)]
    minimum_macos: Option<String>,
    /// RFC 3339 (`2026-12-31T00:00:00Z`).
    #[serde(default)]
    expires: Option<String>,
}

/// Verifies `signature` (a `.minisig` file's bytes) over the exact `feed` bytes with `key`,
/// then reads the feed. The only way to a [`Release`].
pub fn read_verified(feed: &[u8], signature: &[u8], key: &FeedKey) -> Result<Release, UpdateError> {
    let text = std::str::from_utf8(signature).map_err(|_| UpdateError::BadSignature)?;
    let sig = minisign_verify::Signature::decode(text).map_err(|_| UpdateError::BadSignature)?;
    key.0
        .verify(feed, &sig, false)
        .map_err(|_| UpdateError::BadSignature)?;
    parse(feed)
}

/// The verified feed's fields, each checked.
fn parse(feed: &[u8]) -> Result<Release, UpdateError> {
    let json: FeedJson = serde_json::from_slice(feed).map_err(|_| UpdateError::Malformed)?;
    let version = Version::parse(&json.version).map_err(|_| UpdateError::Malformed)?;
    let sha_ok = json.dmg_sha256.len() == 64
        && json
            .dmg_sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !sha_ok || json.dmg_bytes == 0 || !is_https(&json.notes_url) || !is_https(&json.dmg_url) {
        return Err(UpdateError::Malformed);
    }
    if json.minimum_macos.as_deref().is_some_and(|m| {
        m.is_empty() || m.len() > 16 || !m.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    }) {
        return Err(UpdateError::Malformed);
    }
    let expires = json.expires.ok_or(UpdateError::NoExpiry)?;
    let expires =
        time::OffsetDateTime::parse(&expires, &time::format_description::well_known::Rfc3339)
            .map_err(|_| UpdateError::Malformed)?;
    Ok(Release {
        version,
        notes_url: json.notes_url,
        dmg_url: json.dmg_url,
        dmg_sha256: json.dmg_sha256,
        dmg_bytes: json.dmg_bytes,
        minimum_macos: json.minimum_macos,
        expires,
    })
}

/// `release` if its feed has not expired at `now`; `update.expired` from its expiry on.
pub fn fresh(release: Release, now: time::OffsetDateTime) -> Result<Release, UpdateError> {
    if now < release.expires {
        Ok(release)
    } else {
        Err(UpdateError::Expired)
    }
}

/// An `https://` URL with a host, no user-info, at most 2 KiB, and nothing a browser would
/// read differently (no whitespace or control characters): what the window may open.
fn is_https(url: &str) -> bool {
    if url.len() > 2048
        || url
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return false;
    }
    let Ok(uri) = url.parse::<ureq::http::Uri>() else {
        return false;
    };
    uri.scheme_str() == Some("https")
        && uri.host().is_some_and(|h| !h.is_empty())
        && uri.authority().is_some_and(|a| !a.as_str().contains('@'))
}

/// Compares a verified release with `current` (this build's version): newer is
/// [`Checked::Available`], the same is [`Checked::UpToDate`], older is `update.older` (a
/// replayed old feed, or a build ahead of the last release: nothing is offered either way).
pub fn compare(release: Release, current: &str) -> Result<Checked, UpdateError> {
    let current = Version::parse(current).map_err(|_| UpdateError::BadCurrentVersion)?;
    match release.version.cmp(&current) {
        std::cmp::Ordering::Greater => Ok(Checked::Available(Box::new(release))),
        std::cmp::Ordering::Equal => Ok(Checked::UpToDate { current }),
        std::cmp::Ordering::Less => Err(UpdateError::Older),
    }
}
