//! The desktop's light or dark preference on Linux, from the XDG desktop portal.
//!
//! winit reports no theme on X11, so a window that follows "the system" stays light on a dark
//! desktop. The portal (`org.freedesktop.portal.Desktop`, interface
//! `org.freedesktop.portal.Settings`) publishes the preference as
//! `org.freedesktop.appearance` / `color-scheme`: 0 no preference, 1 dark, 2 light; GNOME,
//! KDE and the other portal back ends set it. [`follow`] reads it once and then follows its
//! `SettingChanged` signal on a thread of its own, writing it into egui's fallback theme —
//! the theme egui uses for `ThemePreference::System` when the windowing system reports none.
//! A theme the user chose in Settings (Light, Dark) is a preference of its own and wins; where
//! winit does report a theme (Wayland, macOS) the fallback is never consulted.
//!
//! Invariants:
//! - Nothing here blocks the UI: the bus is read on the watcher thread, every method call has
//!   zbus's deadline, and a missing bus or portal leaves the fallback as it was (light).
//! - "No preference" (0) and values the specification does not define change nothing.

use eframe::egui::{self, Theme};
use zbus::blocking::{Connection, Proxy};
use zbus::zvariant::{OwnedValue, Value};

const DESTINATION: &str = "org.freedesktop.portal.Desktop";
const PATH: &str = "/org/freedesktop/portal/desktop";
const INTERFACE: &str = "org.freedesktop.portal.Settings";
const NAMESPACE: &str = "org.freedesktop.appearance";
const KEY: &str = "color-scheme";

/// The theme a `color-scheme` value asks for (`None`: no preference or unknown).
pub fn theme_of(color_scheme: u32) -> Option<Theme> {
    match color_scheme {
        1 => Some(Theme::Dark),
        2 => Some(Theme::Light),
        _ => None,
    }
}

/// The value inside a portal reply: `ReadOne` returns the `u32` in a variant, the older
/// `Read` a variant inside a variant.
fn scheme_in(value: &Value<'_>) -> Option<u32> {
    match value {
        Value::U32(v) => Some(*v),
        Value::Value(inner) => scheme_in(inner),
        _ => None,
    }
}

fn proxy(conn: &Connection) -> zbus::Result<Proxy<'static>> {
    Proxy::new(conn, DESTINATION, PATH, INTERFACE)
}

/// The desktop's preference now, through `conn` (`None`: no portal, no preference).
pub fn read(conn: &Connection) -> Option<Theme> {
    let proxy = proxy(conn).ok()?;
    let value: OwnedValue = proxy
        .call("ReadOne", &(NAMESPACE, KEY))
        .or_else(|_| proxy.call("Read", &(NAMESPACE, KEY)))
        .ok()?;
    theme_of(scheme_in(&value)?)
}

/// Makes `ctx`'s fallback theme follow the desktop's preference on the session bus, from a
/// thread of its own; returns at once.
pub fn follow(ctx: &egui::Context) {
    let ctx = ctx.clone();
    let spawned = std::thread::Builder::new()
        .name("persyk-theme".into())
        .spawn(move || {
            if let Ok(conn) = Connection::session() {
                follow_on(&conn, |theme| apply(&ctx, theme));
            }
        });
    if spawned.is_err() {
        eprintln!("persyk: the desktop theme is not followed (no thread)");
    }
}

/// Makes `theme` the one egui uses when following a system that reports none, and wakes
/// the UI to draw in it.
pub fn apply(ctx: &egui::Context, theme: Theme) {
    ctx.options_mut(|o| o.fallback_theme = theme);
    ctx.request_repaint();
}

/// [`follow`]'s work on `conn`, blocking: gives `to` the preference now and at every change
/// of it (nothing for "no preference" or other settings) until the connection ends.
pub fn follow_on(conn: &Connection, to: impl Fn(Theme)) {
    let Ok(proxy) = proxy(conn) else {
        return;
    };
    // Subscribed before the first read, so a change in between is not missed.
    let changes = proxy.receive_signal("SettingChanged");
    if let Some(theme) = read(conn) {
        to(theme);
    }
    let Ok(changes) = changes else {
        return;
    };
    for message in changes {
        let body = message.body();
        let Ok((namespace, key, value)) = body.deserialize::<(String, String, Value<'_>)>() else {
            continue;
        };
        if namespace == NAMESPACE
            && key == KEY
            && let Some(theme) = scheme_in(&value).and_then(theme_of)
        {
            to(theme);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specifications_values_and_nothing_else() {
        assert_eq!(theme_of(0), None);
        assert_eq!(theme_of(1), Some(Theme::Dark));
        assert_eq!(theme_of(2), Some(Theme::Light));
        assert_eq!(theme_of(3), None);
        assert_eq!(scheme_in(&Value::U32(1)), Some(1));
        assert_eq!(scheme_in(&Value::Value(Box::new(Value::U32(2)))), Some(2));
        assert_eq!(scheme_in(&Value::Str("dark".into())), None);
    }
}
