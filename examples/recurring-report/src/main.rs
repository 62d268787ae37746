//! The recurring report's worker. `recurring-report-worker schedule [DIR]`
//! creates (or updates) the template on the board `jobworker` uses;
//! anything else is the `jobworker` command line with the handler linked
//! in.

use recurring_report::{every_morning, schedule};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some("schedule") {
        jobworker::cli::main();
        return;
    }
    let dir = args.get(2).cloned().unwrap_or_else(|| ".".to_owned());
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let scheduled = runtime.block_on(async {
        let board = jobworker::local::connect().await?;
        schedule(&board, every_morning()?, &dir).await
    });
    match scheduled {
        Ok(id) => println!("template {id} scheduled: every day at 07:00 Europe/Berlin"),
        Err(e) => {
            eprintln!("cannot schedule the report: {e}");
            std::process::exit(1);
        }
    }
}
