//! Writes that must not interleave (one project's catalog, one sync's records) take a lock by
//! key. [`KeyedLocks`] creates a key's lock on first use and forgets it as soon as nobody holds or
//! waits for it, so the map holds only keys in use however many projects and syncs a router
//! has written to. A [`KeyedGuard`] is owned: it may move into a detached write task.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

type Locks = Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>;

#[derive(Default)]
pub struct KeyedLocks {
    map: Locks,
}

/// Holds the lock of one key; dropping it releases the lock and, if nobody else waits for it,
/// removes the key.
pub struct KeyedGuard {
    key: String,
    lock: Arc<tokio::sync::Mutex<()>>,
    map: Locks,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl KeyedLocks {
    /// Waits for the lock of `key`. Cancelling the wait leaves nothing behind.
    pub async fn lock(&self, key: &str) -> KeyedGuard {
        let lock = self.map.lock().entry(key.to_string()).or_default().clone();
        let mut held = KeyedGuard {
            key: key.to_string(),
            lock: lock.clone(),
            map: self.map.clone(),
            guard: None,
        };
        held.guard = Some(lock.lock_owned().await);
        held
    }

    /// Keys whose lock is held or awaited.
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for KeyedGuard {
    fn drop(&mut self) {
        self.guard.take();
        let mut map = self.map.lock();
        // The map's reference and ours: nobody else holds the lock or waits for it, and nobody can
        // start to while the map is locked.
        if Arc::strong_count(&self.lock) == 2
            && map
                .get(&self.key)
                .is_some_and(|l| Arc::ptr_eq(l, &self.lock))
        {
            map.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn keys_are_forgotten_once_released() {
        let locks = KeyedLocks::default();
        for i in 0..1000 {
            let _guard = locks.lock(&format!("sync:{i}")).await;
            assert_eq!(locks.len(), 1);
        }
        assert!(locks.is_empty());
    }

    #[tokio::test]
    async fn a_waiter_keeps_the_key_and_gets_the_lock() {
        let locks = Arc::new(KeyedLocks::default());
        let first = locks.lock("p").await;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let waiter = {
            let locks = locks.clone();
            tokio::spawn(async move {
                let _second = locks.lock("p").await;
                tx.send(()).unwrap();
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(locks.len(), 1);
        drop(first);
        // The waiter still uses the key: it must not be removed under it.
        rx.await.unwrap();
        waiter.await.unwrap();
        assert!(locks.is_empty());
    }

    #[tokio::test]
    async fn the_lock_excludes_and_a_cancelled_wait_leaves_nothing() {
        let locks = KeyedLocks::default();
        let held = locks.lock("p").await;
        let waited = tokio::time::timeout(Duration::from_millis(20), locks.lock("p")).await;
        assert!(
            waited.is_err(),
            "a second holder while the first holds the lock"
        );
        drop(held);
        assert!(locks.is_empty());
        // Another key is independent.
        let _a = locks.lock("a").await;
        let _b = tokio::time::timeout(Duration::from_secs(5), locks.lock("b"))
            .await
            .unwrap();
        assert_eq!(locks.len(), 2);
    }
}
