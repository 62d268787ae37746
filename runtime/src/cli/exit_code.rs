//! The exit codes of the `jobworker` command, and which error gives which.
//!
//! `jobworker run` exits with its supervisor's code instead (0, or
//! [`EXIT_WORKERS_CANNOT_START`](crate::supervisor::EXIT_WORKERS_CANNOT_START));
//! workers exit with [`EXIT_STUCK`](crate::worker::EXIT_STUCK) or
//! [`EXIT_CANNOT_START`](crate::worker::EXIT_CANNOT_START). clap's own usage
//! errors exit with 2, as [`EXIT_USAGE`] does.

use crate::error::Error;

/// Exit code for any other failure.
pub const EXIT_FAILURE: i32 = 1;
/// Exit code for bad input (usage, invalid values, a feature the board
/// does not offer).
pub const EXIT_USAGE: i32 = 2;
/// Exit code when the board refused a verb (not found, not owner, claimed).
pub const EXIT_REFUSED: i32 = 3;
/// Exit code when the server is unavailable.
pub const EXIT_UNAVAILABLE: i32 = 4;

/// The exit code of a command that failed with `e`.
pub(crate) fn of(e: &Error) -> i32 {
    if e.is_invalid() || e.is_unsupported() {
        EXIT_USAGE
    } else if e.is_not_found()
        || e.is_not_owner()
        || e.is_already_claimed()
        || e.is_exists()
        || e.is_finished()
        || e.is_cancelled()
    {
        EXIT_REFUSED
    } else if e.is_unavailable() {
        EXIT_UNAVAILABLE
    } else {
        EXIT_FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn errors_map_to_their_exit_codes() {
        assert_eq!(of(&Error::invalid("x")), EXIT_USAGE);
        assert_eq!(of(&Error::new(ErrorKind::NotFound, "x")), EXIT_REFUSED);
        assert_eq!(of(&Error::unavailable("x")), EXIT_UNAVAILABLE);
        assert_eq!(of(&Error::codec("x".to_owned())), EXIT_FAILURE);
    }
}
