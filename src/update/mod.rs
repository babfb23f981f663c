//! The update check: is there a newer Persyk? It owns the release feed's client, the
//! signature check and the version comparison; it never downloads or installs anything (the
//! window offers the DMG's link, the browser downloads it, the user installs it).
//!
//! The feed is a small JSON file published with each release by the macOS workflow
//! (`scripts/update-feed`), with its minisign signature beside it (`<feed>.minisig`):
//! `{"version", "notesUrl", "dmgUrl", "dmgSha256", "dmgBytes", "minimumMacos"?}`.
//!
//! Invariants:
//! - The feed's exact bytes are verified with an Ed25519 (minisign) public key before any of
//!   them is parsed ([`feed::read_verified`]); what is offered comes only from a verified feed.
//! - A release build verifies with [`RELEASE_PUBLIC_KEY`] and nothing else: no setting or
//!   environment variable can supply a key. Tests pass their key as a parameter
//!   ([`Source::new`]); a development build (`debug_assertions`) alone also reads
//!   `PERSYK_UPDATE_TEST_KEY` ([`Source::from_env`]), code a release build does not contain.
//! - `http://` only to a loopback host (the rule of [`crate::endpoint`]); `https://` with the
//!   platform's roots. A redirect (GitHub's "latest" takes two) is followed only to a URL
//!   the same rule accepts, never from `https` to `http`, at most
//!   [`crate::endpoint::MAX_REDIRECTS`] times (`update.bad-redirect` otherwise); a loopback
//!   feed is never fetched through a proxy. Every request has a connect and a total deadline,
//!   and a body over [`MAX_FEED_BYTES`] / [`MAX_SIGNATURE_BYTES`] is refused, not truncated.
//! - The feed expires: its signed `expires` time is part of the bytes the signature covers,
//!   a feed past it is `update.expired` and a feed without one `update.no-expiry`, both
//!   "could not check" — so an old feed replayed (by a mirror, a proxy or a captive portal)
//!   cannot keep saying "up to date" after its time. The release workflow re-signs the
//!   latest feed with a fresh expiry twice a week (`packaging/README.md`).
//! - Errors carry stable codes ([`UpdateError::code`]) and never any text of the feed or the
//!   URL.
//! - Only a strictly newer version is offered; the same is "up to date"; an older one (an old
//!   feed replayed, or a build ahead of the release) is `update.older`.

pub mod feed;

use std::io::Read;
use std::time::Duration;

pub use feed::{Checked, FeedKey, Release, compare, fresh, read_verified};

/// The public key of the release feed's signing key (minisign's base64 line). Its secret half
/// is the release workflow's `PERSYK_UPDATE_SECRET_KEY` secret (packaging/README.md).
pub const RELEASE_PUBLIC_KEY: &str = "RWQeE0mJ9S9Nr1tzh0jjWDrYFCbfm5yFQS0ReYdRnMPxCcdhD8dkapmU";

/// The feed's file name among a release's assets.
pub const FEED_FILE: &str = "persyk-update.json";
/// Appended to the feed's URL for its signature.
pub const SIGNATURE_SUFFIX: &str = ".minisig";
/// The largest feed read (a real one is about 400 bytes).
pub const MAX_FEED_BYTES: u64 = 64 * 1024;
/// The largest signature read (a real one is about 300 bytes).
pub const MAX_SIGNATURE_BYTES: u64 = 4 * 1024;
/// This build's version, the one a feed is compared with.
pub const CURRENT_VERSION: &str = env!("CARGO_PKG_VERSION");
/// Replaces the feed's URL (`off`: no checks at all). Any build; the key stays the compiled one.
pub const FEED_ENV: &str = "PERSYK_UPDATE_FEED";
/// A development build's test key (base64); never read by a release build.
pub const TEST_KEY_ENV: &str = "PERSYK_UPDATE_TEST_KEY";

/// Why a check gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UpdateError {
    #[error(
        "update.bad-url: the update feed's URL is not an https:// URL (http:// only on this machine)"
    )]
    BadUrl,
    #[error("update.no-feed: this build has no update feed")]
    NoFeed,
    #[error("update.off: update checks are turned off here")]
    Off,
    #[error("update.tls: no trusted root certificates to check the feed's server with")]
    Tls,
    #[error("update.unreachable: the update feed could not be reached")]
    Unreachable,
    #[error("update.http-status: the update feed's server answered HTTP {status}")]
    HttpStatus { status: u16 },
    #[error("update.too-large: the update feed or its signature is larger than any real one")]
    TooLarge,
    #[error("update.bad-signature: the update feed's signature did not verify; nothing is offered")]
    BadSignature,
    #[error("update.malformed: the signed update feed is not one this version reads")]
    Malformed,
    #[error("update.older: the feed names a version older than this one; nothing is offered")]
    Older,
    #[error("update.bad-key: the update feed's public key is not a minisign Ed25519 key")]
    BadKey,
    #[error(
        "update.bad-redirect: the update feed's server redirected to an address that is not allowed"
    )]
    BadRedirect,
    #[error("update.expired: the update feed is past its signed expiry; nothing is offered")]
    Expired,
    #[error("update.no-expiry: the update feed has no signed expiry; nothing is offered")]
    NoExpiry,
    #[error("update.bad-version: this build's version is not a semantic version")]
    BadCurrentVersion,
}

impl UpdateError {
    pub fn code(&self) -> &'static str {
        match self {
            UpdateError::BadUrl => "update.bad-url",
            UpdateError::NoFeed => "update.no-feed",
            UpdateError::Off => "update.off",
            UpdateError::Tls => "update.tls",
            UpdateError::Unreachable => "update.unreachable",
            UpdateError::HttpStatus { .. } => "update.http-status",
            UpdateError::TooLarge => "update.too-large",
            UpdateError::BadSignature => "update.bad-signature",
            UpdateError::Malformed => "update.malformed",
            UpdateError::Older => "update.older",
            UpdateError::BadKey => "update.bad-key",
            UpdateError::BadRedirect => "update.bad-redirect",
            UpdateError::Expired => "update.expired",
            UpdateError::NoExpiry => "update.no-expiry",
            UpdateError::BadCurrentVersion => "update.bad-version",
        }
    }
}

/// How long a check may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// To connect (and resolve).
    pub connect: Duration,
    /// For each request as a whole (both files are two requests).
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(10),
            total: Duration::from_secs(30),
        }
    }
}

/// Where the feed is and the key it must be signed with.
#[derive(Debug, Clone)]
pub struct Source {
    feed_url: String,
    key: FeedKey,
    pub timeouts: Timeouts,
}

impl Source {
    /// A feed at `feed_url` (its signature at `feed_url` + [`SIGNATURE_SUFFIX`]) signed with
    /// `key`. The URL is checked here: `update.bad-url` for anything but `https://` or a
    /// loopback `http://`.
    pub fn new(feed_url: &str, key: FeedKey) -> Result<Source, UpdateError> {
        check_url(feed_url)?;
        Ok(Source {
            feed_url: feed_url.trim().to_owned(),
            key,
            timeouts: Timeouts::default(),
        })
    }

    /// The release feed of the GitHub repository this build was released from: the latest
    /// release's [`FEED_FILE`]. The repository is `PERSYK_RELEASE_REPOSITORY` at build time
    /// (the release workflow sets it); a build without it has no default feed.
    pub fn default_feed_url() -> Option<String> {
        option_env!("PERSYK_RELEASE_REPOSITORY")
            .filter(|r| !r.is_empty())
            .map(|repo| format!("https://github.com/{repo}/releases/latest/download/{FEED_FILE}"))
    }

    /// The app's source: [`FEED_ENV`] or the default feed URL, with the compiled release key
    /// — or, in a development build only, [`TEST_KEY_ENV`]'s key. `update.off`: checks are
    /// off (`PERSYK_UPDATE_FEED=off`); `update.no-feed`: this build has no feed.
    pub fn from_env() -> Result<Source, UpdateError> {
        let url = match std::env::var(FEED_ENV) {
            Ok(v) if v.trim() == "off" => return Err(UpdateError::Off),
            Ok(v) if !v.trim().is_empty() => v,
            _ => Source::default_feed_url().ok_or(UpdateError::NoFeed)?,
        };
        Source::new(&url, env_key()?)
    }

    /// Whether the feed's URL was given by [`FEED_ENV`] (a development run checks daily
    /// only then).
    pub fn feed_url_in_env() -> bool {
        std::env::var(FEED_ENV).is_ok_and(|v| !v.trim().is_empty() && v.trim() != "off")
    }

    /// Fetches the feed and its signature, verifies, reads, checks the expiry against this
    /// machine's clock and compares with `current`. Blocking (at most about twice
    /// [`Timeouts::total`] per hop); run it off the UI thread.
    pub fn check(&self, current: &str) -> Result<Checked, UpdateError> {
        let feed = get(&self.feed_url, MAX_FEED_BYTES, self.timeouts)?;
        let signature = get(
            &format!("{}{SIGNATURE_SUFFIX}", self.feed_url),
            MAX_SIGNATURE_BYTES,
            self.timeouts,
        )?;
        let release = read_verified(&feed, &signature, &self.key)?;
        let release = fresh(release, time::OffsetDateTime::now_utc())?;
        compare(release, current)
    }
}

/// The compiled release key; in a development build, [`TEST_KEY_ENV`] when set.
fn env_key() -> Result<FeedKey, UpdateError> {
    #[cfg(debug_assertions)]
    if let Ok(k) = std::env::var(TEST_KEY_ENV)
        && !k.trim().is_empty()
    {
        return FeedKey::from_base64(&k);
    }
    FeedKey::release()
}

/// `https://` anywhere; `http://` only to a loopback host.
fn check_url(url: &str) -> Result<(), UpdateError> {
    crate::endpoint::check_http_url(url).map_err(|_| UpdateError::BadUrl)
}

/// The body of a `200` answer at `url` (redirects followed hop by hop, each checked; see
/// [`crate::endpoint::get_following_redirects`]), at most `limit` bytes (more is
/// `update.too-large`).
fn get(url: &str, limit: u64, timeouts: Timeouts) -> Result<Vec<u8>, UpdateError> {
    use crate::endpoint::{FetchError, get_following_redirects};
    let tune: crate::endpoint::Tune<'_> = &|config| {
        config
            .timeout_connect(Some(timeouts.connect))
            .timeout_global(Some(timeouts.total))
    };
    let response = get_following_redirects(url, &[], tune).map_err(|e| match e {
        FetchError::Redirect => UpdateError::BadRedirect,
        FetchError::Tls => UpdateError::Tls,
        FetchError::Transport(e) => transport_error(e),
    })?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(UpdateError::HttpStatus { status });
    }
    let mut body = Vec::new();
    response
        .into_body()
        .into_reader()
        .take(limit + 1)
        .read_to_end(&mut body)
        .map_err(|e| transport_error(ureq::Error::Io(e)))?;
    if body.len() as u64 > limit {
        return Err(UpdateError::TooLarge);
    }
    Ok(body)
}

fn transport_error(e: ureq::Error) -> UpdateError {
    match e {
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => UpdateError::Tls,
        ureq::Error::BodyExceedsLimit(_) => UpdateError::TooLarge,
        _ => UpdateError::Unreachable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_key_parses() {
        assert!(FeedKey::release().is_ok());
    }

    #[test]
    fn plain_http_only_on_loopback() {
        let key = FeedKey::release().unwrap();
        assert!(Source::new("https://example.com/f.json", key.clone()).is_ok());
        assert!(Source::new("http://127.0.0.1:9/f.json", key.clone()).is_ok());
        assert_eq!(
            Source::new("http://example.com/f.json", key.clone()).err(),
            Some(UpdateError::BadUrl)
        );
        assert_eq!(
            Source::new("ftp://example.com/f.json", key).err(),
            Some(UpdateError::BadUrl)
        );
    }
}
