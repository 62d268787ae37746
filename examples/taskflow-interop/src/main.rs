//! The worker of the example: the command line with the `resize` handler
//! linked in. Run it with `--namespace images=taskflow --queues images`,
//! so queue `images` is taskflow's default board.

use taskflow_interop as _; // links the handler

fn main() {
    jobworker::cli::main()
}
