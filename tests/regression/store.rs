//! Regressions in the store side of Persyk.
