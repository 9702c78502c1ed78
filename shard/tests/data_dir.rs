//! One data dir, one shard: a second shard on the same directory is refused while the first is
//! open, and opens once the first is closed, by which time everything the first wrote as it closed
//! is on disk.

use agentsearch_common::Error;
use agentsearch_common::shard::{IndexedRecord, IndexedSegment, SegmentUpsertRequest, ShardApi};
use agentsearch_shard::LocalShard;

const PROJECT: &str = "00000000-0000-4000-8000-000000000005";
const SYNC: &str = "drive-1";

#[test]
fn a_data_dir_holds_one_shard_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let first = LocalShard::open(dir.path(), Default::default(), Default::default()).unwrap();
    let second = LocalShard::open(dir.path(), Default::default(), Default::default());
    match second {
        Err(Error::Unavailable(message)) => {
            assert!(message.contains("in use by another shard"), "{message}");
            assert!(
                message.contains(&dir.path().display().to_string()),
                "{message}"
            );
        }
        Err(other) => panic!("expected Unavailable, got {other:?}"),
        Ok(_) => panic!("a second shard opened a data dir that is in use"),
    }
    let id = first.id().to_string();
    drop(first);
    let reopened = LocalShard::open(dir.path(), Default::default(), Default::default()).unwrap();
    assert_eq!(reopened.id(), id, "the same data dir keeps its shard id");
}

/// A unit vector of dimension 32, different for each `i`.
fn unit(i: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..32)
        .map(|j| ((i * 31 + j * 7) % 17) as f32 + 1.0)
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// A shard writes its pending vector snapshot as it closes; the lock on its data dir is let go
/// only after that, so a shard opened the moment the lock is free never races the closing one
/// over the same files (two writers of one snapshot: a rename that finds its file gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closing_shard_lets_go_of_its_data_dir_after_writing_its_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let shard = LocalShard::open(dir.path(), Default::default(), Default::default()).unwrap();
    let records = (0..500)
        .map(|i| IndexedRecord {
            record_id: format!("record-{i}"),
            display_name: None,
            generation: 1,
            principals: vec!["user:alice@example.com".into()],
            segments: vec![IndexedSegment {
                ordinal: 0,
                text: format!("passage number {i} of the quarterly plan"),
                vector: unit(i),
            }],
            fields: Vec::new(),
        })
        .collect();
    shard
        .upsert_segments(SegmentUpsertRequest {
            project_id: PROJECT.into(),
            sync_id: SYNC.into(),
            records,
            fields: Vec::new(),
        })
        .await
        .unwrap();
    let sync_dir = dir.path().join("context").join(PROJECT).join(SYNC);
    assert!(
        !sync_dir.join("vectors.json").exists(),
        "the snapshot was written with the write; this test needs one pending"
    );

    // Another thread takes the lock the moment it is free and lists the sync's files then.
    let lock_path = dir.path().join("lock");
    let (waiting, is_waiting) = std::sync::mpsc::channel();
    let watcher = std::thread::spawn(move || {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&lock_path)
            .unwrap();
        waiting.send(()).unwrap();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) => std::hint::spin_loop(),
                Err(std::fs::TryLockError::Error(e)) => panic!("lock: {e}"),
            }
        }
        let mut files: Vec<String> = std::fs::read_dir(&sync_dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        files
    });
    is_waiting.recv().unwrap();
    drop(shard);
    let files = watcher.join().unwrap();
    assert!(files.iter().any(|f| f == "vectors.json"), "{files:?}");
    assert!(!files.iter().any(|f| f.ends_with(".tmp")), "{files:?}");

    let reopened = LocalShard::open(dir.path(), Default::default(), Default::default()).unwrap();
    assert_eq!(reopened.info().await.unwrap().segments, 500);
}
