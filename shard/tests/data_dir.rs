//! One data dir, one shard: a second shard on the same directory is refused while the first is
//! open, and opens once the first is closed.

use agentsearch_common::Error;
use agentsearch_shard::LocalShard;

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
