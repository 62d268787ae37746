//! `jobworker config get|set|unset`: the board configuration stored on
//! the board (Redis or ZooKeeper).

use clap::Subcommand;

use crate::board::config::check_config;
use crate::board::{Admin, AnyBoard};
use crate::cli::output::{self, outln};
use crate::error::Result;

/// `config`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the stored configuration (or one key).
    Get {
        /// One key.
        key: Option<String>,
    },
    /// Store a value.
    Set {
        /// The key (expiry, grace, history-count, history-age, trash-count,
        /// trash-age).
        key: String,
        /// The value (seconds for durations).
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Remove a stored value (back to the built-in default).
    Unset {
        /// The key.
        key: String,
    },
}

/// Runs `config`.
pub(crate) async fn run(board: &AnyBoard, c: &ConfigCommand, json: bool) -> Result<()> {
    match c {
        ConfigCommand::Get { key } => {
            if let Some(key) = key {
                check_config(key, None)?;
            }
            let mut all: Vec<(String, String)> = board.config().await?.into_iter().collect();
            all.sort();
            all.retain(|(k, _)| key.as_ref().is_none_or(|want| want == k));
            if json {
                output::json(&output::to_json(
                    &all.into_iter().collect::<std::collections::BTreeMap<_, _>>(),
                )?);
            } else if all.is_empty() {
                match key {
                    Some(key) => outln!("{key} is not stored: its built-in default applies"),
                    None => outln!("nothing stored: every key has its built-in default"),
                }
            } else {
                all.iter().for_each(|(k, v)| outln!("{k} = {v}"));
            }
        }
        ConfigCommand::Set { key, value } => {
            board.set_config(key, Some(value)).await?;
            output::say(json, &format!("set {key} ="), value);
        }
        ConfigCommand::Unset { key } => {
            board.set_config(key, None).await?;
            output::say(json, "unset", key);
        }
    }
    Ok(())
}
