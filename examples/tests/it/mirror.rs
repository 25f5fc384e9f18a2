//! The Mirror race (owner + same-named child, GC delayed) on ward-apiserver:
//! `GuardedController` with `owns` and no guard does what kube-runtime's
//! `Controller` does — it writes into the old child (the bug the guard is
//! for) and recreates the new owner's child as soon as the GC removes the
//! old one (no lost wake-up); with `AwaitDeletion` the old child is never
//! written.

use std::time::Duration;

use ward_examples::mirror::{Variant, run};

/// Woken by the old child's DELETED event, not by a fallback requeue.
const PROMPT: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn without_a_guard_guarded_controller_matches_kube_runtime() {
    for variant in [Variant::Bare, Variant::Naive] {
        let o = run(variant).await.unwrap();
        assert!(
            o.writes_to_the_old_child() > 0,
            "{variant:?}: the bug, M2's data written into M1's child: {:#?}",
            o.writes
        );
        assert!(o.ends_with_own_child, "{variant:?}: {o:#?}");
        assert!(
            o.recreated_after < PROMPT,
            "{variant:?}: M2's child {:?} after the GC resumed",
            o.recreated_after
        );
    }
}

#[tokio::test(start_paused = true)]
async fn with_await_deletion_the_old_child_is_never_written() {
    let o = run(Variant::Guarded).await.unwrap();
    assert_eq!(o.writes_to_the_old_child(), 0, "{:#?}", o.writes);
    assert!(
        o.writes
            .iter()
            .any(|w| w.controller == o.m2 && w.written_for == o.m2),
        "M2 got a child of its own: {:#?}",
        o.writes
    );
    assert!(o.ends_with_own_child, "{o:#?}");
    assert!(o.recreated_after < PROMPT, "{:?}", o.recreated_after);
}
