//! The `jobworker` binary: the CLI library with the example handlers
//! linked in. A user's own binary is the same two lines with their handler
//! crate instead of `jobworker_examples`.

use jobworker_examples as _; // links the example handlers (inventory needs the crate loaded)

fn main() {
    jobworker::cli::main()
}
