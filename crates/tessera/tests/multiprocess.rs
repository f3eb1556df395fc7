//! Two processes on one database: each sees the other's commits on its next transaction, and
//! a map grown by one is adopted by the other. Without `DbOptions::cross_process_notify` (see
//! cross_process.rs) the change feed carries this process's commits only.

use std::process::Command;
use std::time::Duration;
use tessera::{Db, DbOptions, FeedEvent};

const CHILD_PATH: &str = "TESSERA_MULTIPROCESS_CHILD_PATH";

#[test]
#[ignore = "run by two_processes_share_one_database as a child process"]
fn multiprocess_child() {
    let path = std::env::var(CHILD_PATH).expect("run by the parent test");
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("shared").unwrap();
    // Enough data to make the map grow past the parent's size.
    let value = vec![9u8; 4096];
    db.write(|tx| {
        for i in 0u32..3000 {
            tx.put(&ks, &i.to_be_bytes(), &value)?;
        }
        tx.put(&ks, b"from child", &std::process::id().to_be_bytes())
    })
    .unwrap();
}

#[test]
fn two_processes_share_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.tessera");
    let db = Db::open_with(&path, DbOptions { map_size_initial_bytes: 1 << 16, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("shared").unwrap();
    db.write(|tx| tx.put(&ks, b"from parent", b"1")).unwrap();
    let stream = db.subscribe();
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["multiprocess_child", "--exact", "--ignored", "--test-threads=1"])
        .env(CHILD_PATH, &path)
        .status()
        .unwrap();
    assert!(status.success());
    let (child_pid, count) = db.read(|tx| Ok((tx.get(&ks, b"from child")?.map(<[u8]>::to_vec), tx.len(&ks)?))).unwrap();
    assert!(child_pid.is_some(), "the child's commit is visible");
    assert_eq!(count, 3002);
    // The parent can keep writing after the child grew the map.
    db.write(|tx| tx.put(&ks, b"after", b"ok")).unwrap();
    // Commits of another process are not delivered on this process's feed.
    let events: Vec<FeedEvent> = std::iter::from_fn(|| stream.recv_timeout(Duration::from_millis(200))).collect();
    assert_eq!(events.len(), 1, "only this process's own commit: {events:?}");
}
