//! What the live-subscription tests share (`live.rs` and the review's `live_by_key_review.rs`):
//! taking one event of the kind a test expects, or failing with what came instead.

use tessera::live::Event;

/// The state a subscription delivers first.
pub fn initial<S, C>(event: Option<Event<S, C>>) -> S {
    match event {
        Some(Event::Initial(state)) => state,
        Some(Event::Changed(_)) => panic!("expected Initial, got Changed"),
        Some(Event::Closed(reason)) => panic!("expected Initial, got Closed({reason:?})"),
        None => panic!("expected Initial, got nothing"),
    }
}

/// A change a subscription delivers after its initial state.
pub fn changed<S, C>(event: Option<Event<S, C>>) -> C {
    match event {
        Some(Event::Changed(change)) => change,
        Some(Event::Initial(_)) => panic!("expected Changed, got Initial"),
        Some(Event::Closed(reason)) => panic!("expected Changed, got Closed({reason:?})"),
        None => panic!("expected Changed, got nothing"),
    }
}
