//! walk (in progress)
