//! `jobworker completions SHELL` and `jobworker man`: documents generated
//! from the clap definition (`command`, given by the caller).

use crate::cli::output;
use crate::error::{Error, Result};

/// `jobworker completions SHELL`: the completion script, from the clap
/// definition.
pub(crate) fn completions(mut command: clap::Command, shell: clap_complete::Shell) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "jobworker", &mut script);
    output::raw(&script);
    Ok(())
}

/// `jobworker man`: the manual page (roff), from the clap definition.
pub(crate) fn man(command: clap::Command) -> Result<()> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .map_err(|e| Error::io("cannot write the manual page", e))?;
    output::raw(&page);
    Ok(())
}
