//! Persyk: menu-bar dictation whose history is plain, self-contained session files.
//!
//! This library is everything but the shell: the session file format v1 ([`session`]) —
//! validation, projection, the durable store, discovery and search ([`session`]), the
//! realtime engine ([`realtime`]), capture ([`capture`]), on-device recognition ([`local`],
//! whisper.cpp with the `local` feature), the seam both engines implement ([`recognize`]),
//! the dictation pipeline above them ([`pipeline`]), the clean-up of dictated text beside the
//! spoken words ([`cleanup`]: replacements, a model pass, the fidelity guard) and, with the
//! `app` feature, the
//! desktop shell (`app`). The core modules never import `app`; the binary (`src/main.rs`)
//! adds the CLI and launches the app.
//!
//! ```
//! use persyk::session::{self, LeafSelector};
//!
//! let file = concat!(
//!     r#"{"type":"session","version":1,"id":"s1","timestamp":"2026-01-01T00:00:00Z"}"#, "\n",
//!     r#"{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:01Z","#,
//!     r#""message":{"role":"user","content":[{"type":"text","text":"hello"}],"timestamp":1}}"#, "\n",
//! );
//! let index = session::scan_bytes(file.as_bytes());
//! assert!(index.is_valid());
//! let projection = session::project(&index, &LeafSelector::Default).unwrap();
//! assert_eq!(projection.conversation.len(), 1);
//! ```

// The rooms, floor by floor (a room imports only rooms on floors below it; see
// ARCHITECTURE.md and `scripts/layers`):
// session · audio, endpoint, dirs · recognize · realtime, local, capture · settings,
// credentials · sync · pipeline · app; update (the release feed) beside the engines.
#[cfg(feature = "app")]
pub mod app;
pub mod audio;
pub mod capture;
pub mod cleanup;
pub mod credentials;
pub mod dirs;
pub mod endpoint;
pub mod local;
pub mod pipeline;
pub mod realtime;
pub mod recognize;
pub mod session;
pub mod settings;
pub mod sync;
pub mod update;
