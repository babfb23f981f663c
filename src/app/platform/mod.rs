//! Platform glue below the shell and the tray: window-level OS calls that belong to no
//! service. Only macOS has any ([`macos`]); elsewhere winit and the tray crate cover it.

#[cfg(target_os = "macos")]
pub mod macos;
