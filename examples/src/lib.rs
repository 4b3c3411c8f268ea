//! Shared helpers of the examples (none yet).
