//! Regressions in the capture side of Persyk.
