//! Regressions in the realtime side of Persyk.
