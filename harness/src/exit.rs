//! Exit codes. Stable: CI systems act on them, so they never change meaning.
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | every invariant held |
//! | 1 | an invariant was violated |
//! | 2 | the input was wrong: a file, a flag, a target, a fault the backend cannot do |
//! | 3 | the environment failed: the cluster could not start or be reached, a file could not be written |

/// Every invariant held.
pub const HELD: i32 = 0;
/// An invariant was violated.
pub const VIOLATED: i32 = 1;
/// The input was wrong (file, flag, target, a fault the backend cannot do).
pub const BAD_INPUT: i32 = 2;
/// The environment failed (cluster could not start or be reached, output not writable).
pub const ENVIRONMENT: i32 = 3;
