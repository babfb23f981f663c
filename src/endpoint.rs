//! Where the provider may be reached: the one rule for provider URLs, shared by the CLI, the
//! app's settings validation, the engine's connect path and the model downloads
//! ([`is_loopback_host`]).
//!
//! Invariants:
//! - The API key travels in the `Authorization` header of the websocket upgrade, so an
//!   unencrypted connection is allowed only where nothing leaves the machine: `ws://` (or
//!   `http://`, which becomes `ws://`) only to a loopback IP literal (`127.0.0.0/8`, `::1`)
//!   or the name `localhost`. Every other host needs `wss://` (or `https://`).
//! - The check runs before any session is created or connection is made; a refusal has a
//!   stable code and never echoes the URL (it may carry credentials).

use std::net::IpAddr;

use tokio_tungstenite::tungstenite::http::Uri;

/// Why a provider URL is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    #[error(
        "provider.bad-url: the provider URL must be a ws://, wss://, http:// or https:// URL with a host"
    )]
    BadUrl,
    #[error(
        "provider.insecure-url: an unencrypted provider URL (ws:// or http://) is allowed only for loopback hosts; use wss://"
    )]
    Insecure,
}

impl EndpointError {
    pub fn code(&self) -> &'static str {
        match self {
            EndpointError::BadUrl => "provider.bad-url",
            EndpointError::Insecure => "provider.insecure-url",
        }
    }
}

/// Checks a provider URL (base URL or full websocket URL): encrypted schemes go anywhere,
/// unencrypted ones only to a loopback host (see the module invariants).
pub fn check_provider_url(url: &str) -> Result<(), EndpointError> {
    let uri: Uri = url.trim().parse().map_err(|_| EndpointError::BadUrl)?;
    let scheme = uri.scheme_str().map(str::to_ascii_lowercase);
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or(EndpointError::BadUrl)?;
    match scheme.as_deref() {
        Some("wss" | "https") => Ok(()),
        Some("ws" | "http") if is_loopback_host(host) => Ok(()),
        Some("ws" | "http") => Err(EndpointError::Insecure),
        _ => Err(EndpointError::BadUrl),
    }
}

/// Checks a plain HTTP client's URL (model downloads, the update feed): `https://` anywhere,
/// `http://` only to a loopback host (`Insecure` elsewhere); any other scheme is `BadUrl`.
pub fn check_http_url(url: &str) -> Result<(), EndpointError> {
    let uri: Uri = url.trim().parse().map_err(|_| EndpointError::BadUrl)?;
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or(EndpointError::BadUrl)?;
    match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
        Some("https") => Ok(()),
        Some("http") if is_loopback_host(host) => Ok(()),
        Some("http") => Err(EndpointError::Insecure),
        _ => Err(EndpointError::BadUrl),
    }
}

/// Whether `host` (as in a URL; IPv6 in brackets or not) names this machine: an IPv4
/// address in `127.0.0.0/8`, `::1`, or `localhost` (any case).
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => v4.octets()[0] == 127,
        Ok(IpAddr::V6(v6)) => v6.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

/// The TLS set-up of Persyk's HTTP clients (model downloads, clean-up servers): rustls with
/// the ring provider and the platform's root certificates. `None` for an `https` client when
/// the platform has no trusted roots (nothing could be verified); a plain-HTTP client loads
/// none.
pub fn tls_config(https: bool) -> Option<ureq::tls::TlsConfig> {
    use std::sync::Arc;
    use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};
    let roots: Vec<Certificate<'static>> = if https {
        rustls_native_certs::load_native_certs()
            .certs
            .iter()
            .map(|c| Certificate::from_der(c.as_ref()).to_owned())
            .collect()
    } else {
        Vec::new()
    };
    if https && roots.is_empty() {
        return None;
    }
    Some(
        TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .root_certs(RootCerts::Specific(Arc::new(roots)))
            .build(),
    )
}

/// The HTTP agent set-up Persyk's clients share (model downloads, clean-up, updates): rustls
/// with [`tls_config`], `https_only` for an `https` client (a redirect never leaves it),
/// statuses as answers rather than errors, and Persyk's user agent. Each client adds its own
/// deadlines. `None` where [`tls_config`] is.
pub fn http_agent_config(
    https: bool,
) -> Option<ureq::config::ConfigBuilder<ureq::typestate::AgentScope>> {
    Some(
        ureq::Agent::config_builder()
            .tls_config(tls_config(https)?)
            .https_only(https)
            .http_status_as_error(false)
            .user_agent(concat!("persyk/", env!("CARGO_PKG_VERSION"))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_for_plain_schemes() {
        assert!(check_provider_url("ws://127.0.0.1:1/v1").is_ok());
        assert!(check_provider_url("http://localhost/v1").is_ok());
        assert!(check_provider_url("wss://example.com/v1").is_ok());
        assert_eq!(
            check_provider_url("ws://example.com/v1"),
            Err(EndpointError::Insecure)
        );
        assert_eq!(
            check_provider_url("ws://0.0.0.0/v1"),
            Err(EndpointError::Insecure)
        );
        assert_eq!(check_provider_url("ws://"), Err(EndpointError::BadUrl));
        assert_eq!(check_provider_url("nonsense"), Err(EndpointError::BadUrl));
    }
}
