#[jobworker::handler(name = "resize")]
struct Resize {
    width: u32,
}

#[jobworker::handler]
const LIMIT: u32 = 3;

fn main() {}
