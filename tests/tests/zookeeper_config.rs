//! The board configuration on ZooKeeper (`R/.jw/config`), against the test
//! binary's shared server: stored retention values apply to the boards
//! that connect later (an option set in code wins), and a config znode
//! nobody can read counts as empty and is written anew.

use std::time::Duration;

use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker_tests::{shared_zookeeper, unique_queue};

fn options(root: &str) -> ZooKeeperOptions {
    ZooKeeperOptions::new(format!("{}{root}", shared_zookeeper().connect_string()))
}

async fn board(opts: ZooKeeperOptions) -> ZooKeeperBoard {
    ZooKeeperBoard::connect(opts)
        .await
        .expect("connect to the test ZooKeeper")
}

#[tokio::test]
async fn stored_retention_applies_to_boards_that_connect_later() {
    let root = format!("/{}", unique_queue("config"));
    let first = board(options(&root)).await;
    first.set_config("history-count", Some("5")).await.unwrap();
    first.set_config("trash-age", Some("60")).await.unwrap();
    let later = board(options(&root)).await;
    assert_eq!(later.options().history_count, 5);
    assert_eq!(later.options().trash_age, Duration::from_secs(60));
    let mut own = options(&root);
    own.history_count = 9;
    assert_eq!(board(own).await.options().history_count, 9, "set in code wins");
    first.set_config("history-count", None).await.unwrap();
    assert_ne!(board(options(&root)).await.options().history_count, 5);
}

#[tokio::test]
async fn an_unreadable_config_counts_as_empty_and_is_written_anew() {
    let root = format!("/{}", unique_queue("config-bad"));
    let client = shared_zookeeper().client().await;
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    client.mkdir(&format!("{root}/.jw"), &persistent).await.unwrap();
    client
        .create(&format!("{root}/.jw/config"), b"not json", &persistent)
        .await
        .unwrap();
    let b = board(options(&root)).await;
    assert!(b.config().await.unwrap().is_empty());
    b.set_config("expiry", Some("45")).await.unwrap();
    assert_eq!(
        b.config().await.unwrap().get("expiry").map(String::as_str),
        Some("45")
    );
}
