//! The Redis store's fenced leases, cluster permits and rate buckets against a real
//! `redis-server`, including the invariant checker: many owners on three store instances
//! ("nodes") racing for the same connections, with pauses longer than the TTL.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchyard_store::{
    BucketResult, FenceCheck, HealthPolicy, LeaseAcquire, LeaseKeys, NoopObserver, RedisStore,
    RedisStoreConfig, StoreError, owner_hash,
};
use switchyard_tests::redis_server::RedisServer;

use crate::support::{STATE_DEADLINE, eventually};

const TOKEN_A: &str = "vlo_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
const TOKEN_B: &str = "vlo_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";

fn store(redis: &RedisServer, timeout_ms: u64) -> RedisStore {
    let config = RedisStoreConfig {
        url: redis.url(),
        key_prefix: "sy:".into(),
        timeout_ms,
        health: HealthPolicy::default(),
    };
    match RedisStore::connect(&config, Arc::new(NoopObserver)) {
        Ok(store) => store,
        Err(e) => panic!("store: {e}"),
    }
}

fn granted(result: Result<LeaseAcquire, StoreError>) -> u64 {
    match result {
        Ok(LeaseAcquire::Acquired(grant)) => grant.generation,
        other => panic!("expected a grant, got {other:?}"),
    }
}

/// Acquires `keys` for `token` as soon as the current holder's lease has lapsed;
/// an acquire refused as `Held` changes nothing, so it is simply tried again.
async fn acquired_once_lapsed(
    s: &RedisStore,
    keys: &LeaseKeys,
    token: &str,
    key: &str,
    ttl_ms: u64,
) -> u64 {
    let result = eventually(STATE_DEADLINE, || async {
        match s.lease_acquire(keys, token, key, ttl_ms).await {
            Ok(LeaseAcquire::Held { .. }) => None,
            other => Some(other),
        }
    })
    .await;
    granted(result.unwrap_or_else(|| panic!("the lease never lapsed")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_renew_fence_release() {
    let redis = RedisServer::start().expect("redis");
    let s = store(&redis, 2_000);
    let keys = s.connection_lease_keys("c1");

    let g = granted(s.lease_acquire(&keys, TOKEN_A, "key-1", 5_000).await);
    assert!(g > 0);
    // Re-acquire by the owner renews with the same generation.
    assert_eq!(
        granted(s.lease_acquire(&keys, TOKEN_A, "key-1", 5_000).await),
        g
    );
    match s.lease_acquire(&keys, TOKEN_B, "key-1", 5_000).await {
        Ok(LeaseAcquire::Held { retry_after_ms }) => {
            assert!(
                retry_after_ms > 0 && retry_after_ms <= 5_000,
                "{retry_after_ms}"
            );
        }
        other => panic!("a second owner must be refused, got {other:?}"),
    }
    // The same owner under another api key id is not the owner.
    assert!(matches!(
        s.lease_acquire(&keys, TOKEN_A, "key-2", 5_000).await,
        Ok(LeaseAcquire::Held { .. })
    ));

    assert_eq!(
        s.lease_fence(&keys, TOKEN_A, g, "key-1").await,
        Ok(FenceCheck::Valid)
    );
    assert_eq!(
        s.lease_fence(&keys, TOKEN_A, g + 1, "key-1").await,
        Ok(FenceCheck::Stale)
    );
    assert_eq!(
        s.lease_fence(&keys, TOKEN_A, g, "key-2").await,
        Ok(FenceCheck::Stale)
    );
    assert_eq!(
        s.lease_fence(&keys, TOKEN_B, g, "key-1").await,
        Ok(FenceCheck::Stale)
    );
    // Another connection's lease is another lease.
    let other = s.connection_lease_keys("c2");
    assert_eq!(
        s.lease_fence(&other, TOKEN_A, g, "key-1").await,
        Ok(FenceCheck::Stale)
    );

    assert_eq!(s.lease_renew(&keys, TOKEN_A, g, 5_000).await, Ok(true));
    assert_eq!(s.lease_renew(&keys, TOKEN_B, g, 5_000).await, Ok(false));
    assert_eq!(s.lease_release(&keys, TOKEN_B, g).await, Ok(false));
    assert_eq!(s.lease_release(&keys, TOKEN_A, g + 1).await, Ok(false));

    let leases = s
        .read_leases(&[("c1", keys.clone()), ("c2", other.clone())])
        .await;
    let leases = leases.expect("read_leases");
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert_eq!(leases[0].name, "c1");
    assert_eq!(leases[0].generation, g);
    assert_eq!(leases[0].api_key_id, "key-1");
    assert_eq!(leases[0].owner_hash_prefix, owner_hash(TOKEN_A)[..12]);
    assert!(leases[0].remaining_ms > 0 && leases[0].remaining_ms <= 5_000);

    assert_eq!(s.lease_release(&keys, TOKEN_A, g).await, Ok(true));
    assert_eq!(
        s.lease_fence(&keys, TOKEN_A, g, "key-1").await,
        Ok(FenceCheck::Stale)
    );
    assert_eq!(s.read_leases(&[("c1", keys.clone())]).await, Ok(vec![]));
    // The next grant continues the count.
    assert!(
        granted(s.lease_acquire(&keys, TOKEN_B, "key-1", 5_000).await) > g,
        "the next grant continues the count"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_owner_after_the_ttl_is_locked_out_and_its_generation_is_lower() {
    let redis = RedisServer::start().expect("redis");
    let node_a = store(&redis, 2_000);
    let node_b = store(&redis, 2_000);
    let keys = node_a.connection_lease_keys("c1");

    let old = granted(node_a.lease_acquire(&keys, TOKEN_A, "k", 200).await);
    // A "pauses" past its TTL: B's acquire succeeds once the lease has lapsed.
    let new = acquired_once_lapsed(&node_b, &keys, TOKEN_B, "k", 10_000).await;
    assert!(new > old, "generation {new} must be above {old}");

    assert_eq!(
        node_a.lease_renew(&keys, TOKEN_A, old, 10_000).await,
        Ok(false)
    );
    assert_eq!(
        node_a.lease_fence(&keys, TOKEN_A, old, "k").await,
        Ok(FenceCheck::Stale)
    );
    assert_eq!(node_a.lease_release(&keys, TOKEN_A, old).await, Ok(false));
    // A's late release did not remove B's lease.
    assert_eq!(
        node_b.lease_fence(&keys, TOKEN_B, new, "k").await,
        Ok(FenceCheck::Valid)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_drops_the_holder_and_generations_keep_counting() {
    let redis = RedisServer::start().expect("redis");
    let s = store(&redis, 2_000);
    let keys = s.connection_lease_keys("c1");
    let first = granted(s.lease_acquire(&keys, TOKEN_A, "k", 60_000).await);
    assert_eq!(s.lease_revoke(&keys).await, Ok(true));
    assert_eq!(s.lease_revoke(&keys).await, Ok(false));
    assert_eq!(
        s.lease_fence(&keys, TOKEN_A, first, "k").await,
        Ok(FenceCheck::Stale)
    );
    assert_eq!(
        s.lease_renew(&keys, TOKEN_A, first, 60_000).await,
        Ok(false)
    );
    // Even the same owner gets a new generation after a revoke.
    let second = granted(s.lease_acquire(&keys, TOKEN_A, "k", 60_000).await);
    assert!(second > first);
    assert_eq!(
        s.lease_fence(&keys, TOKEN_A, first, "k").await,
        Ok(FenceCheck::Stale)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_del_refuses_a_deposed_leader() {
    let redis = RedisServer::start().expect("redis");
    let s = store(&redis, 2_000);
    let leader = s.leader_lease_keys();
    let victim = "sy:victim".to_owned();
    set(&s, &victim, "x").await;

    let old = granted(s.lease_acquire(&leader, TOKEN_A, "", 150).await);
    // The old leader "pauses" past its TTL: the new one's acquire succeeds once it lapsed.
    let new = acquired_once_lapsed(&s, &leader, TOKEN_B, "", 60_000).await;
    assert_eq!(
        s.fenced_del(&leader, old, std::slice::from_ref(&victim))
            .await,
        Ok(false)
    );
    assert_eq!(get(&s, &victim).await.as_deref(), Some("x"));
    assert_eq!(
        s.fenced_del(&leader, new, std::slice::from_ref(&victim))
            .await,
        Ok(true)
    );
    assert_eq!(get(&s, &victim).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_token_is_never_stored() {
    let redis = RedisServer::start().expect("redis");
    let s = store(&redis, 2_000);
    let keys = s.connection_lease_keys("c1");
    let generation = granted(s.lease_acquire(&keys, TOKEN_A, "key-1", 60_000).await);
    assert_eq!(
        s.lease_renew(&keys, TOKEN_A, generation, 60_000).await,
        Ok(true)
    );

    let all_keys: Vec<String> = s
        .run("keys", |mut con| async move {
            redis::cmd("KEYS").arg("*").query_async(&mut con).await
        })
        .await
        .expect("KEYS");
    assert!(all_keys.contains(&keys.lease), "{all_keys:?}");
    assert!(all_keys.contains(&keys.fence), "{all_keys:?}");
    let mut dump = String::new();
    for key in &all_keys {
        let k = key.clone();
        let kind: String = s
            .run("type", |mut con| async move {
                redis::cmd("TYPE").arg(&k).query_async(&mut con).await
            })
            .await
            .expect("TYPE");
        let k = key.clone();
        let text: Vec<String> = match kind.as_str() {
            "hash" => s
                .run("hgetall", |mut con| async move {
                    redis::cmd("HGETALL").arg(&k).query_async(&mut con).await
                })
                .await
                .expect("HGETALL"),
            _ => s
                .run("get", |mut con| async move {
                    redis::cmd("GET").arg(&k).query_async(&mut con).await
                })
                .await
                .map(|v: Option<String>| v.into_iter().collect())
                .expect("GET"),
        };
        dump.push_str(&format!("{key}={text:?}\n"));
    }
    assert!(
        !dump.contains(TOKEN_A),
        "the token leaked into Redis:\n{dump}"
    );
    assert!(
        !dump.contains(&TOKEN_A[4..20]),
        "part of the token leaked:\n{dump}"
    );
    assert!(
        dump.contains(&owner_hash(TOKEN_A)),
        "its SHA-256 must be there:\n{dump}"
    );
    // The fence counter has no TTL.
    let fence = keys.fence.clone();
    let ttl: i64 = s
        .run("pttl", |mut con| async move {
            redis::cmd("PTTL").arg(&fence).query_async(&mut con).await
        })
        .await
        .expect("PTTL");
    assert_eq!(ttl, -1);
}

/// One certain observation that `owner` held `generation` on a connection: the lease was
/// granted no later than `from` and was still valid at some instant no earlier than `to`, so
/// (generations being issued once) it held throughout `[from, to]`.
#[derive(Debug, Clone)]
struct Holding {
    owner: String,
    generation: u64,
    from: Instant,
    to: Instant,
}

/// One grant, bracketed by when the request was sent and the answer came back.
#[derive(Debug, Clone)]
struct Grant {
    owner: String,
    generation: u64,
    sent: Instant,
    received: Instant,
}

#[derive(Default)]
struct Log {
    holdings: BTreeMap<String, Vec<Holding>>,
    grants: BTreeMap<String, Vec<Grant>>,
    valid: usize,
    stale: usize,
    held: usize,
    lost_renewals: usize,
}

/// A small deterministic PRNG (splitmix64), so the test needs no extra dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invariant_no_two_owners_overlap_and_generations_rise() {
    const TTL_MS: u64 = 200;
    const OPERATIONS: usize = 200;
    const CONNECTIONS: [&str; 4] = ["c1", "c2", "c3", "c4"];
    let redis = RedisServer::start().expect("redis");
    let nodes: Vec<Arc<RedisStore>> = (0..3).map(|_| Arc::new(store(&redis, 5_000))).collect();
    let log = Arc::new(Mutex::new(Log::default()));
    let issued = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(60);

    let mut tasks = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for o in 0..4 {
            let node = Arc::clone(node);
            let log = Arc::clone(&log);
            let issued = Arc::clone(&issued);
            let owner = format!("vlo_node{n}_owner{o}");
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(0x5EED ^ ((n as u64) << 8) ^ o as u64);
                // Operations are grant cycles; refused attempts only count against the time.
                while issued.load(Ordering::SeqCst) < OPERATIONS && Instant::now() < deadline {
                    let conn = CONNECTIONS[rng.below(CONNECTIONS.len() as u64) as usize];
                    let keys: LeaseKeys = node.connection_lease_keys(conn);
                    let sent = Instant::now();
                    let acquired = node.lease_acquire(&keys, &owner, "key", TTL_MS).await;
                    let received = Instant::now();
                    let generation = match acquired {
                        Ok(LeaseAcquire::Acquired(grant)) => {
                            issued.fetch_add(1, Ordering::SeqCst);
                            grant.generation
                        }
                        Ok(LeaseAcquire::Held { .. }) => {
                            log.lock().expect("log").held += 1;
                            // A random back-off before the next try (the scenario's traffic).
                            tokio::time::sleep(Duration::from_millis(10 + rng.below(50))).await;
                            continue;
                        }
                        Err(e) => panic!("acquire failed: {e}"),
                    };
                    log.lock()
                        .expect("log")
                        .grants
                        .entry(conn.into())
                        .or_default()
                        .push(Grant {
                            owner: owner.clone(),
                            generation,
                            sent,
                            received,
                        });
                    // Some pauses outlast the TTL.
                    tokio::time::sleep(Duration::from_millis(rng.below(TTL_MS * 3 / 2))).await;
                    let fence_sent = Instant::now();
                    let fence = node.lease_fence(&keys, &owner, generation, "key").await;
                    match fence {
                        Ok(FenceCheck::Valid) => {
                            let mut log = log.lock().expect("log");
                            log.valid += 1;
                            log.holdings.entry(conn.into()).or_default().push(Holding {
                                owner: owner.clone(),
                                generation,
                                from: received,
                                to: fence_sent,
                            });
                        }
                        Ok(FenceCheck::Stale) => log.lock().expect("log").stale += 1,
                        Err(e) => panic!("fence failed: {e}"),
                    }
                    // A fence that was checked after the TTL ran out from the grant is stale.
                    if fence_sent > received + Duration::from_millis(TTL_MS + 5) {
                        assert_eq!(
                            fence,
                            Ok(FenceCheck::Stale),
                            "{owner} passed the fence past its TTL"
                        );
                    }
                    match rng.below(3) {
                        0 => {
                            let _ = node
                                .lease_release(&keys, &owner, generation)
                                .await
                                .expect("release");
                        }
                        1 => {
                            let renew_sent = Instant::now();
                            let renewed = node.lease_renew(&keys, &owner, generation, TTL_MS).await;
                            let mut log = log.lock().expect("log");
                            if renewed.expect("renew") {
                                log.holdings.entry(conn.into()).or_default().push(Holding {
                                    owner: owner.clone(),
                                    generation,
                                    from: received,
                                    to: renew_sent,
                                });
                            } else {
                                log.lost_renewals += 1;
                            }
                        }
                        _ => {} // abandon: let it expire
                    }
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("owner task");
    }

    let log = log.lock().expect("log");
    for conn in CONNECTIONS {
        let grants = log.grants.get(conn).cloned().unwrap_or_default();
        // One owner per generation.
        let mut owners: HashMap<u64, &str> = HashMap::new();
        for g in &grants {
            let first = owners.entry(g.generation).or_insert(&g.owner);
            assert_eq!(
                *first, g.owner,
                "{conn}: generation {} granted to two owners",
                g.generation
            );
        }
        // A grant that completed before another was requested has a lower generation (or is
        // the same holder renewing).
        for a in &grants {
            for b in &grants {
                if a.received < b.sent {
                    assert!(
                        a.generation < b.generation
                            || (a.generation == b.generation && a.owner == b.owner),
                        "{conn}: generation went from {} ({}) to {} ({})",
                        a.generation,
                        a.owner,
                        b.generation,
                        b.owner
                    );
                }
            }
        }
        // Per generation, the span it certainly held; distinct generations never overlap.
        let mut spans: BTreeMap<u64, (Instant, Instant, String)> = BTreeMap::new();
        for h in log
            .holdings
            .get(conn)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            if h.to <= h.from {
                continue; // observed valid at once: no certain span
            }
            let span = spans
                .entry(h.generation)
                .or_insert((h.from, h.to, h.owner.clone()));
            assert_eq!(span.2, h.owner);
            span.0 = span.0.min(h.from);
            span.1 = span.1.max(h.to);
        }
        let spans: Vec<_> = spans.into_iter().collect();
        for (i, (ga, a)) in spans.iter().enumerate() {
            for (gb, b) in &spans[i + 1..] {
                let overlap = a.0 < b.1 && b.0 < a.1;
                assert!(
                    !overlap,
                    "{conn}: generations {ga} ({}) and {gb} ({}) both held the fence at once",
                    a.2, b.2
                );
                // Later generations hold later.
                assert!(a.1 <= b.0, "{conn}: generation {gb} held before {ga}");
            }
        }
    }
    // The run must have exercised contention, expiry and valid fences.
    assert!(
        log.valid > 10 && log.stale > 10 && log.held > 0,
        "valid {} stale {} held {} lost renewals {}",
        log.valid,
        log.stale,
        log.held,
        log.lost_renewals
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_never_exceed_the_cap_and_a_silent_node_loses_them() {
    let redis = RedisServer::start().expect("redis");
    let [a, b, c] = [
        store(&redis, 2_000),
        store(&redis, 2_000),
        store(&redis, 2_000),
    ];
    const TTL: u64 = 600;

    let ga = a
        .permits_acquire("c1", "node-a", 2, 2, TTL)
        .await
        .expect("a");
    let gb = b
        .permits_acquire("c1", "node-b", 2, 2, TTL)
        .await
        .expect("b");
    let gc = c
        .permits_acquire("c1", "node-c", 2, 2, TTL)
        .await
        .expect("c");
    assert_eq!((ga, gb, gc), (2, 0, 0));
    assert_eq!(a.permits_read("c1").await, Ok(vec![("node-a".into(), 2)]));

    // b and c keep renewing; a goes silent. Within a few TTLs b gets the permits, and the
    // live grants never sum above the cap on the way.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut b_got = 0;
    while Instant::now() < deadline {
        b_got = b
            .permits_acquire("c1", "node-b", 2, 2, TTL)
            .await
            .expect("b");
        let _ = c
            .permits_acquire("c1", "node-c", 2, 2, TTL)
            .await
            .expect("c");
        let live = b.permits_read("c1").await.expect("read");
        let total: u32 = live.iter().map(|(_, n)| n).sum();
        assert!(total <= 2, "{live:?}");
        if b_got == 2 {
            assert_eq!(live, vec![("node-b".into(), 2)]);
            break;
        }
        // b and c keep asking at a third of the TTL, as live nodes renew (the scenario).
        tokio::time::sleep(Duration::from_millis(TTL / 3)).await;
    }
    assert_eq!(b_got, 2, "node-b never got the silent node's permits");
    // a comes back: nothing left for it.
    assert_eq!(a.permits_acquire("c1", "node-a", 2, 2, TTL).await, Ok(0));

    // Release hands them over at once; smaller wants share the cap.
    b.permits_release("c1", "node-b").await.expect("release");
    assert_eq!(a.permits_acquire("c1", "node-a", 1, 2, TTL).await, Ok(1));
    assert_eq!(c.permits_acquire("c1", "node-c", 2, 2, TTL).await, Ok(1));
    assert_eq!(b.permits_acquire("c1", "node-b", 2, 2, TTL).await, Ok(0));
    assert_eq!(
        b.permits_read("c1").await,
        Ok(vec![("node-a".into(), 1), ("node-c".into(), 1)])
    );
    // Another connection is another cap.
    assert_eq!(b.permits_acquire("c2", "node-b", 2, 2, TTL).await, Ok(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bucket_allows_rpm_then_limits_across_stores() {
    let redis = RedisServer::start().expect("redis");
    let s1 = store(&redis, 2_000);
    let s2 = store(&redis, 2_000);
    let started = Instant::now();
    for i in 0..60u32 {
        let s = if i % 2 == 0 { &s1 } else { &s2 };
        match s.bucket_take("key", "k1", 60).await {
            Ok(BucketResult::Allowed { remaining }) => {
                // Refill during the loop can only add tokens.
                assert!(remaining >= 59 - i, "take {i}: {remaining} left");
            }
            other => panic!("take {i} of 60 must pass, got {other:?}"),
        }
    }
    // At 1 token/s, only what refilled meanwhile may still pass.
    let mut extra = 0u64;
    let mut limited = None;
    for _ in 0..20 {
        match s2.bucket_take("key", "k1", 60).await.expect("take") {
            BucketResult::Allowed { .. } => extra += 1,
            BucketResult::Limited { retry_after_ms } => {
                limited = Some(retry_after_ms);
                break;
            }
        }
    }
    let refilled = started.elapsed().as_secs() + 1;
    assert!(extra <= refilled, "{extra} extra passes after {refilled} s");
    let retry_after_ms = limited.expect("the 61st take must be limited");
    assert!(
        retry_after_ms > 0 && retry_after_ms <= 1_000,
        "{retry_after_ms}"
    );
    // Other ids and scopes have their own buckets; rpm 0 is unlimited.
    assert!(matches!(
        s1.bucket_take("key", "k2", 60).await,
        Ok(BucketResult::Allowed { remaining: 59 })
    ));
    assert!(matches!(
        s1.bucket_take("conn", "k1", 60).await,
        Ok(BucketResult::Allowed { .. })
    ));
    assert!(matches!(
        s1.bucket_take("key", "k1", 0).await,
        Ok(BucketResult::Allowed { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_killed_every_operation_fails_within_the_timeout() {
    const TIMEOUT_MS: u64 = 300;
    let mut redis = RedisServer::start().expect("redis");
    let s = store(&redis, TIMEOUT_MS);
    let keys = s.connection_lease_keys("c1");
    let generation = granted(s.lease_acquire(&keys, TOKEN_A, "k", 60_000).await);
    redis.kill();
    // Generous bound: the timeout plus scheduling noise on a shared machine.
    let bound = Duration::from_millis(TIMEOUT_MS) + Duration::from_secs(2);
    for round in 0..2 {
        macro_rules! fails {
            ($name:literal, $call:expr) => {{
                let started = Instant::now();
                let result = $call.await;
                assert!(
                    result.is_err(),
                    "round {round}: {} succeeded with Redis down: {result:?}",
                    $name
                );
                assert!(
                    started.elapsed() < bound,
                    "round {round}: {} took {:?}",
                    $name,
                    started.elapsed()
                );
            }};
        }
        fails!(
            "lease_acquire",
            s.lease_acquire(&keys, TOKEN_A, "k", 60_000)
        );
        fails!(
            "lease_renew",
            s.lease_renew(&keys, TOKEN_A, generation, 60_000)
        );
        fails!(
            "lease_fence",
            s.lease_fence(&keys, TOKEN_A, generation, "k")
        );
        fails!("lease_release", s.lease_release(&keys, TOKEN_A, generation));
        fails!("lease_revoke", s.lease_revoke(&keys));
        fails!("read_leases", s.read_leases(&[("c1", keys.clone())]));
        fails!("fenced_del", s.fenced_del(&keys, generation, &[]));
        fails!("permits_acquire", s.permits_acquire("c1", "n", 1, 1, 1_000));
        fails!("permits_release", s.permits_release("c1", "n"));
        fails!("permits_read", s.permits_read("c1"));
        fails!("bucket_take", s.bucket_take("key", "k", 60));
    }
}

async fn set(s: &RedisStore, key: &str, value: &str) {
    let (key, value) = (key.to_owned(), value.to_owned());
    let _: () = s
        .run("set", |mut con| async move {
            redis::cmd("SET")
                .arg(&key)
                .arg(&value)
                .query_async(&mut con)
                .await
        })
        .await
        .expect("SET");
}

async fn get(s: &RedisStore, key: &str) -> Option<String> {
    let key = key.to_owned();
    s.run("get", |mut con| async move {
        redis::cmd("GET").arg(&key).query_async(&mut con).await
    })
    .await
    .expect("GET")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_calls_over_a_partitioned_link_fail_closed_within_the_timeout() {
    use switchyard_tests::fault_proxy::{FaultProxy, Mode};
    const TIMEOUT_MS: u64 = 300;
    let redis = RedisServer::start().expect("redis");
    let proxy = FaultProxy::start(([127, 0, 0, 1], redis.port).into()).expect("proxy");
    let config = RedisStoreConfig {
        url: format!("redis://{}/0", proxy.addr()),
        key_prefix: "sy:".into(),
        timeout_ms: TIMEOUT_MS,
        health: HealthPolicy::default(),
    };
    let s = RedisStore::connect(&config, Arc::new(NoopObserver)).expect("store");
    let keys = s.connection_lease_keys("c1");
    let generation = granted(s.lease_acquire(&keys, TOKEN_A, "k", 60_000).await);

    // The connection stays up but nothing gets through: no answer is not a "valid".
    proxy.set_mode(Mode::Blackhole);
    let bound = Duration::from_millis(TIMEOUT_MS) + Duration::from_secs(2);
    let started = Instant::now();
    let fence = s.lease_fence(&keys, TOKEN_A, generation, "k").await;
    assert!(
        matches!(fence, Err(StoreError::Timeout { .. })),
        "{fence:?}"
    );
    assert!(started.elapsed() < bound, "{:?}", started.elapsed());
    let started = Instant::now();
    let renew = s.lease_renew(&keys, TOKEN_A, generation, 60_000).await;
    assert!(renew.is_err(), "{renew:?}");
    assert!(started.elapsed() < bound, "{:?}", started.elapsed());

    // Healed: the lease is still there and the holder passes the fence again.
    proxy.set_mode(Mode::Pass);
    let fence = eventually(STATE_DEADLINE, || async {
        s.lease_fence(&keys, TOKEN_A, generation, "k").await.ok()
    })
    .await
    .expect("the store recovers once the proxy passes traffic again");
    assert_eq!(fence, FenceCheck::Valid);
}

/// A lease moves to a free connection with its generation in one script; a stale holder, a
/// wrong key or a held target change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_keeps_the_generation_and_refuses_stale_holders_and_held_targets() {
    use switchyard_store::LeaseMove;
    let redis = RedisServer::start().expect("redis");
    let s = store(&redis, 2_000);
    let (c1, c2, c3) = (
        s.connection_lease_keys("c1"),
        s.connection_lease_keys("c2"),
        s.connection_lease_keys("c3"),
    );
    let g = granted(s.lease_acquire(&c1, TOKEN_A, "k", 10_000).await);
    let held = granted(s.lease_acquire(&c3, TOKEN_B, "k", 10_000).await);

    // A stale generation, another owner or another key move nothing.
    assert_eq!(
        s.lease_move(&c1, &c2, TOKEN_A, g + 1, "k").await,
        Ok(LeaseMove::Stale)
    );
    assert_eq!(
        s.lease_move(&c1, &c2, TOKEN_B, g, "k").await,
        Ok(LeaseMove::Stale)
    );
    assert_eq!(
        s.lease_move(&c1, &c2, TOKEN_A, g, "k2").await,
        Ok(LeaseMove::Stale)
    );
    // A held target is refused, and both leases stay as they were.
    match s.lease_move(&c1, &c3, TOKEN_A, g, "k").await {
        Ok(LeaseMove::TargetHeld { retry_after_ms }) => {
            assert!((1..=10_000).contains(&retry_after_ms), "{retry_after_ms}");
        }
        other => panic!("a held target must be refused, got {other:?}"),
    }
    assert_eq!(
        s.lease_fence(&c1, TOKEN_A, g, "k").await,
        Ok(FenceCheck::Valid)
    );
    assert_eq!(
        s.lease_fence(&c3, TOKEN_B, held, "k").await,
        Ok(FenceCheck::Valid)
    );

    // The move keeps the generation and the remaining time; the old connection is free.
    match s.lease_move(&c1, &c2, TOKEN_A, g, "k").await {
        Ok(LeaseMove::Moved(grant)) => {
            assert_eq!(grant.generation, g);
            assert!((1..=10_000).contains(&grant.ttl_ms), "{grant:?}");
        }
        other => panic!("the move must succeed, got {other:?}"),
    }
    assert_eq!(
        s.lease_fence(&c1, TOKEN_A, g, "k").await,
        Ok(FenceCheck::Stale)
    );
    assert_eq!(
        s.lease_fence(&c2, TOKEN_A, g, "k").await,
        Ok(FenceCheck::Valid)
    );
    let live = s
        .read_leases(&[("c1", c1.clone()), ("c2", c2.clone())])
        .await
        .expect("read_leases");
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!((live[0].name.as_str(), live[0].generation), ("c2", g));
    // A second move of the same lease from where it was is stale now.
    assert_eq!(
        s.lease_move(&c1, &c2, TOKEN_A, g, "k").await,
        Ok(LeaseMove::Stale)
    );
    // The target's counter was raised: its next grant is above the moved generation.
    assert_eq!(s.lease_release(&c2, TOKEN_A, g).await, Ok(true));
    let next = granted(s.lease_acquire(&c2, TOKEN_B, "k", 10_000).await);
    assert!(next > g, "{next} after a moved {g}");
}

/// A failover can lose the last writes, the generation counter's included (replication is
/// asynchronous). Deleting the counter and the lease, as a promoted replica that missed them
/// would have neither, must not let the next grant go back to or below the lost one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_after_lost_writes_is_above_the_lost_generation() {
    let redis = RedisServer::start().expect("redis");
    let s = store(&redis, 2_000);
    let keys = s.connection_lease_keys("c1");
    let lost = granted(s.lease_acquire(&keys, TOKEN_A, "k", 10_000).await);
    // Several grants in a row keep rising even when they come within one microsecond tick.
    assert_eq!(s.lease_release(&keys, TOKEN_A, lost).await, Ok(true));
    let lost = granted(s.lease_acquire(&keys, TOKEN_A, "k", 10_000).await);
    let out = switchyard_tests::redis_topology::cli(redis.port, &["DEL", &keys.lease, &keys.fence])
        .expect("redis-cli");
    assert_eq!(out.trim(), "2", "both keys existed");
    let next = granted(s.lease_acquire(&keys, TOKEN_B, "k", 10_000).await);
    assert!(next > lost, "generation {next} after a lost {lost}");
    assert_eq!(
        s.lease_fence(&keys, TOKEN_A, lost, "k").await,
        Ok(FenceCheck::Stale)
    );
}
