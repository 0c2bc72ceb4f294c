//! symbols (in progress)
