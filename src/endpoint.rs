//! Where Persyk's network clients may go: the one rule for provider URLs, shared by the CLI,
//! the app's settings validation, the engine's connect path, the clean-up client, the model
//! downloads and the update check ([`is_loopback_host`]); and the HTTP set-up those plain
//! HTTP clients share — TLS roots, the proxy choice, and redirects checked hop by hop
//! ([`get_following_redirects`]).
//!
//! Invariants:
//! - The API key travels in the `Authorization` header of the websocket upgrade, so an
//!   unencrypted connection is allowed only where nothing leaves the machine: `ws://` (or
//!   `http://`, which becomes `ws://`) only to a loopback IP literal (`127.0.0.0/8`, `::1`)
//!   or the name `localhost`. Every other host needs `wss://` (or `https://`).
//! - No URL carries a user name or password (`https://user:pw@host`): the HTTP client would
//!   send it as Basic authentication and the settings file would keep it
//!   (`provider.credentials-in-url`).
//! - The check runs before any session is created or connection is made; a refusal has a
//!   stable code and never echoes the URL (it may carry credentials).
//! - A loopback target is never reached through a proxy, whatever `HTTP_PROXY`,
//!   `HTTPS_PROXY` or `ALL_PROXY` say: "on this Mac" means nothing leaves it. A remote target
//!   goes through the environment's proxy when one is set (`NO_PROXY` honoured), as a
//!   `CONNECT` tunnel: the TLS session is end to end, so the proxy sees the host name only
//!   ([`proxy_for`]).
//! - No agent follows a redirect by itself ([`http_agent_config`]). The clean-up follows
//!   none; a download or the update feed follows at most [`MAX_REDIRECTS`], each hop checked
//!   by [`check_http_url`] and never from `https` down to `http`, each with the proxy its own
//!   host gets.

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
    #[error(
        "provider.credentials-in-url: the URL carries a user name or password; put a key in its own field instead"
    )]
    Credentials,
}

impl EndpointError {
    pub fn code(&self) -> &'static str {
        match self {
            EndpointError::BadUrl => "provider.bad-url",
            EndpointError::Insecure => "provider.insecure-url",
            EndpointError::Credentials => "provider.credentials-in-url",
        }
    }
}

/// The most redirects a download or the update feed follows.
pub const MAX_REDIRECTS: usize = 8;

/// Whether `uri`'s authority has a user-info part (`user:pw@`).
fn has_user_info(uri: &Uri) -> bool {
    uri.authority().is_some_and(|a| a.as_str().contains('@'))
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
        Some("wss" | "https") => {}
        Some("ws" | "http") if is_loopback_host(host) => {}
        Some("ws" | "http") => return Err(EndpointError::Insecure),
        _ => return Err(EndpointError::BadUrl),
    }
    if has_user_info(&uri) {
        return Err(EndpointError::Credentials);
    }
    Ok(())
}

/// Checks a plain HTTP client's URL (the clean-up server, model downloads, the update feed,
/// every redirect hop): `https://` anywhere, `http://` only to a loopback host (`Insecure`
/// elsewhere), no user-info (`Credentials`); any other scheme (`ws://`, `ftp://`) is
/// `BadUrl`.
pub fn check_http_url(url: &str) -> Result<(), EndpointError> {
    let uri: Uri = url.trim().parse().map_err(|_| EndpointError::BadUrl)?;
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or(EndpointError::BadUrl)?;
    match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
        Some("https") => {}
        Some("http") if is_loopback_host(host) => {}
        Some("http") => return Err(EndpointError::Insecure),
        _ => return Err(EndpointError::BadUrl),
    }
    if has_user_info(&uri) {
        return Err(EndpointError::Credentials);
    }
    Ok(())
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

/// The origin of a URL, `scheme://host[:port]` in lower case with a default port (80 for
/// `http`, 443 for `https`) left out: what a key is kept for (`credentials::KeyEntry::
/// cleanup_for`), so `https://API.groq.com:443/openai/v1` and `https://api.groq.com/v1` are
/// one server and `http://127.0.0.1:11434` and `http://127.0.0.1:8080` two. `None` for
/// anything but an `http`/`https` URL with a host.
pub fn origin(url: &str) -> Option<String> {
    let uri: Uri = url.trim().parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let host = uri.host().filter(|h| !h.is_empty())?.to_ascii_lowercase();
    Some(match uri.port_u16() {
        Some(port) if port != default_port => format!("{scheme}://{host}:{port}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// The proxy a request to `target` goes through: none for a loopback host (nothing leaves
/// the machine, whatever the environment says); for any other host the environment's, as
/// curl reads it (`ALL_PROXY`, `HTTPS_PROXY`, `HTTP_PROXY`, lower-case too, and `NO_PROXY`),
/// so a user behind a corporate proxy reaches a cloud server and the model downloads.
/// Remote targets are `https://` only, so the proxy carries a `CONNECT` tunnel and sees the
/// host name, never the request.
pub fn proxy_for(target: &Uri) -> Option<ureq::Proxy> {
    match target.host() {
        Some(host) if !is_loopback_host(host) => ureq::Proxy::try_from_env(),
        _ => None,
    }
}

/// The agent set-up for requests to `target` that Persyk's HTTP clients share (clean-up,
/// model downloads, updates): rustls with [`tls_config`] (roots for an `https` target),
/// `https_only` for an `https` target, the proxy [`proxy_for`] chooses, no redirects
/// followed by the agent (see [`get_following_redirects`]), statuses as answers rather than
/// errors, and Persyk's user agent. Each client adds its own deadlines. `None` where
/// [`tls_config`] is.
pub fn http_agent_config(
    target: &Uri,
) -> Option<ureq::config::ConfigBuilder<ureq::typestate::AgentScope>> {
    let https = target
        .scheme_str()
        .is_some_and(|s| s.eq_ignore_ascii_case("https"));
    Some(
        ureq::Agent::config_builder()
            .tls_config(tls_config(https)?)
            .https_only(https)
            .proxy(proxy_for(target))
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(concat!("persyk/", env!("CARGO_PKG_VERSION"))),
    )
}

/// Why [`get_following_redirects`] has no answer.
#[derive(Debug)]
pub enum FetchError {
    /// A redirect to a URL the rule refuses ([`check_http_url`]), from `https` down to
    /// `http`, without a usable `Location`, or one too many.
    Redirect,
    /// No trusted roots for an `https` hop.
    Tls,
    /// The request failed.
    Transport(ureq::Error),
}

/// A caller's finishing touches to each hop's agent (its deadlines).
pub type Tune<'a> = &'a dyn Fn(
    ureq::config::ConfigBuilder<ureq::typestate::AgentScope>,
) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope>;

/// GETs `url` (already checked by [`check_http_url`]) with `headers`, following at most
/// [`MAX_REDIRECTS`] redirects: every hop must pass [`check_http_url`] and never go from
/// `https` to `http`, and each hop gets its own agent ([`http_agent_config`] for its host,
/// then `tune`), so a redirect to a loopback host is never proxied and one to a remote host
/// is. The answer that is not a redirect is returned whatever its status.
pub fn get_following_redirects(
    url: &str,
    headers: &[(&str, &str)],
    tune: Tune<'_>,
) -> Result<ureq::http::Response<ureq::Body>, FetchError> {
    let mut at: Uri = url.trim().parse().map_err(|_| FetchError::Redirect)?;
    let mut hops = 0;
    loop {
        let config = http_agent_config(&at).ok_or(FetchError::Tls)?;
        let agent = tune(config).build().new_agent();
        let mut request = agent.get(at.clone());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.call().map_err(FetchError::Transport)?;
        if !matches!(response.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
            return Ok(response);
        }
        hops += 1;
        if hops > MAX_REDIRECTS {
            return Err(FetchError::Redirect);
        }
        let next = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .and_then(|l| resolve_location(&at, l))
            .ok_or(FetchError::Redirect)?;
        check_http_url(&next).map_err(|_| FetchError::Redirect)?;
        let next: Uri = next.parse().map_err(|_| FetchError::Redirect)?;
        let was_https = at.scheme_str() == Some("https");
        if was_https
            && !next
                .scheme_str()
                .is_some_and(|s| s.eq_ignore_ascii_case("https"))
        {
            return Err(FetchError::Redirect);
        }
        at = next;
    }
}

/// A `Location` header's target, resolved against the URL that answered: absolute
/// (`https://host/…`), scheme-relative (`//host/…`), absolute-path (`/…`) or relative to the
/// answering URL's folder. `None` when it cannot be read.
pub fn resolve_location(base: &Uri, location: &str) -> Option<String> {
    let location = location.trim();
    if location.is_empty() || location.bytes().any(|b| b.is_ascii_control()) {
        return None;
    }
    let scheme = base.scheme_str()?;
    let authority = base.authority()?.as_str();
    if let Ok(uri) = location.parse::<Uri>()
        && uri.scheme().is_some()
    {
        return Some(location.to_owned());
    }
    if let Some(rest) = location.strip_prefix("//") {
        return Some(format!("{scheme}://{rest}"));
    }
    if location.starts_with('/') {
        return Some(format!("{scheme}://{authority}{location}"));
    }
    let path = base.path();
    let folder = &path[..path.rfind('/').map_or(0, |i| i + 1)];
    let folder = if folder.is_empty() { "/" } else { folder };
    Some(format!("{scheme}://{authority}{folder}{location}"))
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
        assert_eq!(
            check_provider_url("wss://user:pw@example.com/v1"),
            Err(EndpointError::Credentials)
        );
    }

    #[test]
    fn plain_http_clients_take_https_or_loopback_http_without_user_info() {
        assert!(check_http_url("https://example.com/v1").is_ok());
        assert!(check_http_url("http://[::1]:8080/v1").is_ok());
        assert_eq!(
            check_http_url("http://example.com/v1"),
            Err(EndpointError::Insecure)
        );
        for scheme in ["ws", "wss", "ftp"] {
            assert_eq!(
                check_http_url(&format!("{scheme}://127.0.0.1:1/v1")),
                Err(EndpointError::BadUrl),
                "{scheme}"
            );
        }
        for with_user in [
            "http://user:pw@127.0.0.1:1/v1",
            "https://user@example.com/v1",
            "https://:pw@example.com/v1",
        ] {
            assert_eq!(
                check_http_url(with_user),
                Err(EndpointError::Credentials),
                "{with_user}"
            );
        }
    }

    #[test]
    fn locations_resolve_against_the_answering_url() {
        let base: Uri = "https://example.com/a/b/file.json?x=1".parse().unwrap();
        let r = |l: &str| resolve_location(&base, l);
        assert_eq!(
            r("https://cdn.example.net/f").as_deref(),
            Some("https://cdn.example.net/f")
        );
        assert_eq!(
            r("//cdn.example.net/f").as_deref(),
            Some("https://cdn.example.net/f")
        );
        assert_eq!(r("/root").as_deref(), Some("https://example.com/root"));
        assert_eq!(
            r("other.json").as_deref(),
            Some("https://example.com/a/b/other.json")
        );
        assert_eq!(r(""), None);
        assert_eq!(r("/a\r\nx"), None);
    }

    #[test]
    fn an_origin_is_scheme_host_and_port() {
        assert_eq!(
            origin("https://API.Groq.com:443/openai/v1").as_deref(),
            Some("https://api.groq.com")
        );
        assert_eq!(
            origin("http://127.0.0.1:11434/v1").as_deref(),
            Some("http://127.0.0.1:11434")
        );
        assert_eq!(
            origin("http://localhost/v1").as_deref(),
            Some("http://localhost")
        );
        assert_eq!(
            origin("http://[::1]:8080/v1").as_deref(),
            Some("http://[::1]:8080")
        );
        assert_ne!(
            origin("https://a.example/v1"),
            origin("https://b.example/v1")
        );
        assert_ne!(
            origin("http://127.0.0.1:1/v1"),
            origin("http://127.0.0.1:2/v1")
        );
        assert_ne!(
            origin("http://127.0.0.1/v1"),
            origin("https://127.0.0.1/v1")
        );
        assert_eq!(origin("ws://127.0.0.1/v1"), None);
        assert_eq!(origin("not a url"), None);
    }

    #[test]
    fn loopback_targets_never_get_a_proxy() {
        // Whatever the environment says (the variables themselves are tested in a child
        // process, tests/regression/hardening.rs): a loopback host has none.
        for url in [
            "http://127.0.0.1:1/v1",
            "http://localhost/v1",
            "https://[::1]/v1",
        ] {
            assert!(proxy_for(&url.parse().unwrap()).is_none(), "{url}");
        }
    }
}
