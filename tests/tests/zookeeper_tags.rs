//! The tag and tracking index on ZooKeeper (`R/Q/.jw/tags/<tag>/<uuid>`,
//! `R/Q/.jw/tracked/<uuid>`), against the test binary's shared server: an
//! entry left behind by a forgotten job is never listed and is replaced
//! when the id is posted again; a purge takes a job's entries with it.

use std::time::Duration;

use jobworker::board::Admin;
use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Board, JobId, NewJob, Page};
use jobworker_tests::{shared_zookeeper, unique_queue};
use zookeeper_client as zk;

const LONG: Duration = Duration::from_secs(120);

async fn board(root: &str) -> ZooKeeperBoard {
    ZooKeeperBoard::connect(ZooKeeperOptions::new(format!(
        "{}{root}",
        shared_zookeeper().connect_string()
    )))
    .await
    .expect("connect to the test ZooKeeper")
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

#[tokio::test]
async fn a_leftover_entry_is_not_listed_and_is_replaced_by_a_new_post() {
    let root = format!("/{}", unique_queue("tags-left"));
    let b = board(&root).await;
    let q = unique_queue("left");
    let client = shared_zookeeper().client().await;
    let id = "left-1";
    let tags = ["red", "green", "blue"];
    let mut left: Vec<String> = tags
        .iter()
        .map(|t| format!("{root}/{q}/.jw/tags/{t}/{id}"))
        .collect();
    left.push(format!("{root}/{q}/.jw/tracked/{id}"));
    for entry in left {
        client.mkdir(&entry, &persistent()).await.unwrap();
    }
    assert!(
        b.tagged(&q, "red", Page::default()).await.unwrap().is_empty(),
        "no record: not listed"
    );
    assert!(b.tracked(&q).await.unwrap().is_empty());
    let job = tags
        .iter()
        .fold(NewJob::new("l").id(id).track(), |j, t| j.tag(*t));
    let posted = b.post(&q, job).await.unwrap();
    for tag in tags {
        assert_eq!(
            b.tagged(&q, tag, Page::default()).await.unwrap(),
            std::slice::from_ref(&posted)
        );
    }
    assert_eq!(b.tracked(&q).await.unwrap(), [posted]);
}

#[tokio::test]
async fn a_purge_takes_the_job_s_index_entries() {
    let root = format!("/{}", unique_queue("tags-purge"));
    let b = board(&root).await;
    let q = unique_queue("purge");
    let id = b.post(&q, NewJob::new("p").tag("a/b").track()).await.unwrap();
    let c = b.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    b.trash(c.lease, "fatal: no").await.unwrap();
    assert_eq!(
        b.tagged(&q, "a/b", Page::default()).await.unwrap(),
        std::slice::from_ref(&id)
    );
    assert!(b.purge(&q, std::slice::from_ref(&id)).await.unwrap()[0].is_ok());
    let client = shared_zookeeper().client().await;
    let left = |path: String| {
        let client = client.clone();
        async move { client.list_children(&path).await.unwrap_or_default() }
    };
    assert!(left(format!("{root}/{q}/.jw/tags/a%2Fb")).await.is_empty());
    assert!(left(format!("{root}/{q}/.jw/tracked")).await.is_empty());
    assert!(b
        .tag(&q, &JobId::from(id.as_str()), &["x"])
        .await
        .unwrap_err()
        .is_not_found());
}
