use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

const TTL: Millis = 100;

#[test]
fn acquire_renew_release_and_fence() {
    let mut l = EmbeddedLeases::new();
    let LeaseAcquire::Acquired(a) = l.acquire("c1", "tok-a", "k1", TTL, 0) else {
        panic!("first acquire must succeed");
    };
    assert_eq!(a.generation, 1);
    assert_eq!(
        l.acquire("c1", "tok-b", "k1", TTL, 10),
        LeaseAcquire::Held { retry_after_ms: 90 }
    );
    // Re-acquire by the owner renews with the same generation.
    assert_eq!(
        l.acquire("c1", "tok-a", "k1", TTL, 50),
        LeaseAcquire::Acquired(LeaseGrant {
            generation: 1,
            ttl_ms: TTL
        })
    );
    assert_eq!(l.fence("c1", "tok-a", 1, "k1", 120), FenceCheck::Valid);
    assert_eq!(l.fence("c1", "tok-a", 1, "k2", 120), FenceCheck::Stale);
    assert_eq!(l.fence("c1", "tok-a", 2, "k1", 120), FenceCheck::Stale);
    assert_eq!(l.fence("c1", "tok-b", 1, "k1", 120), FenceCheck::Stale);
    assert!(l.renew("c1", "tok-a", 1, TTL, 140));
    assert!(!l.release("c1", "tok-b", 1, 150));
    assert!(l.release("c1", "tok-a", 1, 150));
    assert_eq!(l.fence("c1", "tok-a", 1, "k1", 151), FenceCheck::Stale);
    let LeaseAcquire::Acquired(b) = l.acquire("c1", "tok-b", "k1", TTL, 160) else {
        panic!("acquire after release must succeed");
    };
    assert_eq!(b.generation, 2);
}

#[test]
fn an_expired_owner_is_stale_and_the_next_generation_is_higher() {
    let mut l = EmbeddedLeases::new();
    assert!(matches!(
        l.acquire("c1", "tok-a", "k", TTL, 0),
        LeaseAcquire::Acquired(_)
    ));
    assert_eq!(l.fence("c1", "tok-a", 1, "k", TTL), FenceCheck::Stale);
    assert!(!l.renew("c1", "tok-a", 1, TTL, TTL));
    assert!(matches!(
        l.acquire("c1", "tok-b", "k", TTL, TTL + 1),
        LeaseAcquire::Acquired(LeaseGrant { generation: 2, .. })
    ));
    assert!(!l.release("c1", "tok-a", 1, TTL + 2));
    assert_eq!(l.list(TTL + 2).len(), 1);
}

#[test]
fn revoke_keeps_the_generation_counting_and_list_hides_the_owner() {
    let mut l = EmbeddedLeases::new();
    let _ = l.acquire("c2", "tok-a", "k", TTL, 0);
    let _ = l.acquire("c1", "tok-b", "k", TTL, 0);
    let list = l.list(10);
    assert_eq!(
        list.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["c1", "c2"]
    );
    assert_eq!(list[0].owner_hash_prefix, owner_hash("tok-b")[..12]);
    assert_eq!(list[0].remaining_ms, 90);
    assert!(l.revoke("c1"));
    assert!(!l.revoke("c1"));
    assert!(matches!(
        l.acquire("c1", "tok-b", "k", TTL, 20),
        LeaseAcquire::Acquired(LeaseGrant { generation: 2, .. })
    ));
    assert!(l.list(1_000).is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    Acquire { name: u8, owner: u8, key: u8 },
    Renew { name: u8, owner: u8 },
    Release { name: u8, owner: u8 },
    Revoke { name: u8 },
    Wait(Millis),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..2u8, 0..3u8, 0..2u8).prop_map(|(name, owner, key)| Op::Acquire { name, owner, key }),
        (0..2u8, 0..3u8).prop_map(|(name, owner)| Op::Renew { name, owner }),
        (0..2u8, 0..3u8).prop_map(|(name, owner)| Op::Release { name, owner }),
        (0..2u8).prop_map(|name| Op::Revoke { name }),
        (0..2 * TTL).prop_map(Op::Wait),
    ]
}

proptest! {
    /// Whatever happens, at most one (owner, generation) passes the fence per name at any
    /// instant, and the generations granted per name only rise.
    #[test]
    fn never_two_owners_and_generations_only_rise(ops in proptest::collection::vec(op(), 1..200)) {
        let mut l = EmbeddedLeases::new();
        let mut now: Millis = 0;
        // What each (name, owner) believes it holds: (generation, key).
        let mut believed: HashMap<(u8, u8), (u64, u8)> = HashMap::new();
        let mut highest: HashMap<u8, u64> = HashMap::new();
        for op in ops {
            match op {
                Op::Acquire { name, owner, key } => {
                    if let LeaseAcquire::Acquired(g) =
                        l.acquire(&name.to_string(), &format!("o{owner}"), &format!("k{key}"), TTL, now)
                    {
                        let top = highest.entry(name).or_insert(0);
                        let renewal = believed.get(&(name, owner)).is_some_and(|b| b.0 == g.generation);
                        if renewal {
                            prop_assert_eq!(g.generation, *top);
                        } else {
                            prop_assert!(g.generation > *top, "generation went from {} to {}", top, g.generation);
                        }
                        *top = g.generation;
                        believed.insert((name, owner), (g.generation, key));
                    }
                }
                Op::Renew { name, owner } => {
                    if let Some((generation, _)) = believed.get(&(name, owner)) {
                        let _ = l.renew(&name.to_string(), &format!("o{owner}"), *generation, TTL, now);
                    }
                }
                Op::Release { name, owner } => {
                    if let Some((generation, _)) = believed.get(&(name, owner)) {
                        let _ = l.release(&name.to_string(), &format!("o{owner}"), *generation, now);
                    }
                }
                Op::Revoke { name } => {
                    let _ = l.revoke(&name.to_string());
                }
                Op::Wait(ms) => now += ms,
            }
            for name in 0..2u8 {
                let valid: Vec<_> = (0..3u8)
                    .filter_map(|owner| believed.get(&(name, owner)).map(|b| (owner, *b)))
                    .filter(|(owner, (generation, key))| {
                        l.fence(&name.to_string(), &format!("o{owner}"), *generation, &format!("k{key}"), now)
                            == FenceCheck::Valid
                    })
                    .collect();
                prop_assert!(valid.len() <= 1, "two owners pass the fence on {}: {:?}", name, valid);
                if let Some((_, (generation, _))) = valid.first() {
                    prop_assert_eq!(Some(generation), highest.get(&name));
                }
            }
        }
    }
}

#[test]
fn a_move_keeps_the_generation_and_refuses_stale_holders_and_held_targets() {
    let mut l = EmbeddedLeases::new();
    let LeaseAcquire::Acquired(a) = l.acquire("c1", "o1", "k", 10_000, 0) else {
        panic!("free lease refused");
    };
    let LeaseAcquire::Acquired(_) = l.acquire("c3", "o2", "k", 10_000, 0) else {
        panic!("free lease refused");
    };
    // A stale generation or another key moves nothing.
    assert_eq!(
        l.move_lease("c1", "c2", "o1", a.generation + 1, "k", 1_000),
        LeaseMove::Stale
    );
    assert_eq!(
        l.move_lease("c1", "c2", "o1", a.generation, "k2", 1_000),
        LeaseMove::Stale
    );
    // A held target is refused with its remaining time.
    assert_eq!(
        l.move_lease("c1", "c3", "o1", a.generation, "k", 1_000),
        LeaseMove::TargetHeld {
            retry_after_ms: 9_000
        }
    );
    // The move keeps the generation and the remaining time; the source is free again.
    assert_eq!(
        l.move_lease("c1", "c2", "o1", a.generation, "k", 4_000),
        LeaseMove::Moved(LeaseGrant {
            generation: a.generation,
            ttl_ms: 6_000
        })
    );
    assert_eq!(
        l.fence("c1", "o1", a.generation, "k", 4_000),
        FenceCheck::Stale
    );
    assert_eq!(
        l.fence("c2", "o1", a.generation, "k", 4_000),
        FenceCheck::Valid
    );
    // The next grant on the target is past the moved generation.
    l.release("c2", "o1", a.generation, 4_000);
    let LeaseAcquire::Acquired(b) = l.acquire("c2", "o3", "k", 10_000, 5_000) else {
        panic!("free lease refused");
    };
    assert!(b.generation > a.generation);
}
