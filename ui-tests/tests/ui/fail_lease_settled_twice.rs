// A lease is settled once: consume takes it by value, so a second consume
// (or an abandon after it) does not compile.
use jobworker::{Abandon, AnyBoard, Board, Lease};

async fn settle_twice(board: &AnyBoard, lease: Lease) {
    board.consume(lease).await.unwrap();
    board.abandon(lease, Abandon::Release).await.unwrap();
}

fn copy_it(lease: &Lease) -> Lease {
    lease.clone()
}

fn main() {}
