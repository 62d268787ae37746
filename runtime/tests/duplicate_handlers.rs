//! Two handlers registered under the same job name make `Registry::load`
//! fail with both source locations.

use jobworker::{HandlerError, JobContext, Registry};

mod first {
    use super::*;

    #[jobworker::handler(name = "dup")]
    pub async fn one(_cx: JobContext) -> Result<(), HandlerError> {
        Ok(())
    }

    /// The line of the attribute above (what the entry records).
    pub const LINE: u32 = line!() - 6;
}

mod second {
    use super::*;

    #[jobworker::handler(name = "dup", queue = "other")]
    pub fn two(_cx: JobContext) -> Result<(), HandlerError> {
        Ok(())
    }

    /// The line of the attribute above (what the entry records).
    pub const LINE: u32 = line!() - 6;
}

#[jobworker::handler(name = "unique")]
fn unique(_cx: JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[test]
fn duplicate_names_are_an_error_naming_both_locations() {
    let err = Registry::load().unwrap_err();
    assert!(err.is_invalid(), "{err}");
    let message = err.message();
    let file = file!();
    for line in [first::LINE, second::LINE] {
        let location = format!("{file}:{line}");
        assert!(message.contains(&location), "{location} missing from: {message}");
    }
    assert!(message.contains("\"dup\""), "{message}");
    assert!(!message.contains("unique"), "{message}");
}
