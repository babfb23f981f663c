//! One named regression test per defect found in Persyk, in the manner of ripgrep's
//! `tests/regression.rs`: each test reproduces a bug that once shipped and fails if it comes
//! back. Tests are grouped by the part of Persyk the defect lived in; each names the issue and
//! item it came from (`issue16_07_…` = issue #16, item 7).

mod app;
mod bundle;
mod capture;
mod cleanup;
mod hardening;
mod history;
mod local;
mod local_models;
mod realtime;
mod silent_loss;
mod store;
