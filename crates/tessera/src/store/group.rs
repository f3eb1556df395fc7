//! Grouped writes: the write closures of several threads run in one LMDB transaction, which is
//! committed and flushed once for all of them ([`crate::Db::write_grouped`]).
//!
//! A caller queues its closure, then leads or waits. The leader takes the closures queued so
//! far (at most [`GROUP_WRITES_MAX`]), runs them in queue order in one transaction through the
//! ordinary write path (`txn::run_write`: map growth, the feeds, durability), and hands each
//! caller its outcome. Callers that queue while a group commits form the next group; when the
//! leader is done, a caller whose closure is still queued leads the next one.
//!
//! A leader gathers before it commits, but only after concurrency was seen: if the previous
//! group had `n > 1` members, it waits until `n` closures are queued, at most
//! [`GATHER_WAIT_MAX`] and at most half the previous group's commit. Without the wait, callers
//! that just got their outcome queue again while the next group commits, and groups alternate
//! between a few members and the rest (4 writers commit as groups of 1 and 3, half the
//! throughput of groups of 4). A lone writer never waits.
//!
//! Failure is per closure. A closure that returns `Err` or panics rolls the transaction back;
//! its caller gets that error, and the group runs again without it. If the transaction itself
//! fails (its commit, or growing the map), each member runs again alone so that each gets its
//! own outcome; a commit that was made but not flushed gives every member `NotDurable`.
//!
//! Lock order: the queue's lock is never held while the writer lock (`Inner::writer`) is taken,
//! nor while a closure runs; a member's slot lock is taken only by the leader.

use super::Inner;
use super::txn::{self, WriteTxn};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Most closures one group commits ([`crate::Db::write_grouped`]); more callers form the next
/// group.
///
/// ```
/// assert!(tessera::store::GROUP_WRITES_MAX >= 8);
/// ```
pub const GROUP_WRITES_MAX: usize = 64;

/// Longest time a leader waits for the members it expects (see the module's documentation).
const GATHER_WAIT_MAX: Duration = Duration::from_micros(200);

/// One caller's closure, as the leader sees it.
trait Member: Send + Sync {
    /// Runs the closure in `txn`, keeping its value for the caller.
    fn run(&self, txn: &mut WriteTxn<'_>) -> Result<()>;
    /// Hands the caller its outcome: `Ok` gives the value of the last run.
    fn finish(&self, outcome: Result<()>);
    /// The outcome was handed over.
    fn finished(&self) -> bool;
}

/// A caller's closure, its value from the last run, and its outcome.
struct Request<F, T> {
    slot: Mutex<Slot<F, T>>,
    finished: AtomicBool,
}

struct Slot<F, T> {
    write: F,
    value: Option<T>,
    outcome: Option<Result<T>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<F, T> Request<F, T> {
    fn new(write: F) -> Request<F, T> {
        Request { slot: Mutex::new(Slot { write, value: None, outcome: None }), finished: AtomicBool::new(false) }
    }

    /// The outcome, once [`Member::finished`].
    fn take_outcome(&self) -> Result<T> {
        lock(&self.slot).outcome.take().expect("a finished request has its outcome")
    }
}

impl<F, T> Member for Request<F, T>
where
    F: FnMut(&mut WriteTxn<'_>) -> Result<T> + Send,
    T: Send,
{
    fn run(&self, txn: &mut WriteTxn<'_>) -> Result<()> {
        let mut slot = lock(&self.slot);
        let slot = &mut *slot;
        // A panic is this member's error alone: the others run again without it.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (slot.write)(txn))) {
            Ok(Ok(value)) => {
                slot.value = Some(value);
                Ok(())
            }
            Ok(Err(error)) => Err(error),
            Err(payload) => Err(Error::Panicked(txn::panic_message(payload.as_ref()))),
        }
    }

    fn finish(&self, outcome: Result<()>) {
        let mut slot = lock(&self.slot);
        let value = slot.value.take();
        slot.outcome = Some(outcome.map(|()| value.expect("a member whose transaction committed ran in it")));
        drop(slot);
        self.finished.store(true, Ordering::Release);
    }

    fn finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }
}

/// The closures waiting for a group, and who leads.
#[derive(Default)]
pub(crate) struct GroupQueue {
    state: Mutex<QueueState>,
    /// Signalled when a group ends (outcomes are ready, and a new leader may be needed) and,
    /// while the leader gathers, when a closure is queued.
    changed: Condvar,
}

#[derive(Default)]
struct QueueState {
    queued: Vec<Arc<dyn Member>>,
    /// A leader is gathering or committing a group.
    leading: bool,
    /// The leader waits for more closures (queueing must wake it).
    gathering: bool,
    /// Members of the last group, and how long its commit took: what the next leader waits for.
    last_group_members: usize,
    last_group_commit: Duration,
}

/// See [`crate::Db::write_grouped`].
pub(crate) fn write_grouped<T, F>(inner: &Inner, write: F) -> Result<T>
where
    F: FnMut(&mut WriteTxn<'_>) -> Result<T> + Send + 'static,
    T: Send + 'static,
{
    if txn::writing_on_this_thread() {
        // The leader would wait for the writer lock this thread holds.
        return Err(Error::WouldDeadlock { operation: "a grouped write", advice: "use the `_in` forms with the outer transaction" });
    }
    if txn::reading_on_this_thread() {
        // A leader that must grow the map waits for every read transaction of the process to
        // end, this caller's too: alone, it gets the error it would get from `Db::write`.
        return txn::run_write(inner, inner.options.durability, write);
    }
    let request = Arc::new(Request::new(write));
    let queue = &inner.groups;
    let mut state = lock(&queue.state);
    state.queued.push(request.clone());
    if state.gathering {
        queue.changed.notify_all();
    }
    loop {
        if request.finished() {
            drop(state);
            return request.take_outcome();
        }
        if !state.leading {
            state.leading = true;
            state = gather(queue, state);
            let count = state.queued.len().min(GROUP_WRITES_MAX);
            let members: Vec<Arc<dyn Member>> = state.queued.drain(..count).collect();
            drop(state);
            let mut leading = Leading { queue, members, members_at_start: count, started: Instant::now() };
            leading.commit(inner);
            drop(leading);
            state = lock(&queue.state);
            continue;
        }
        state = queue.changed.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
    }
}

/// Waits, as the new leader, for as many closures as the last group had (see the module's
/// documentation).
fn gather<'q>(queue: &'q GroupQueue, mut state: MutexGuard<'q, QueueState>) -> MutexGuard<'q, QueueState> {
    let expected = state.last_group_members.min(GROUP_WRITES_MAX);
    if state.queued.len() >= expected {
        return state;
    }
    let deadline = Instant::now() + GATHER_WAIT_MAX.min(state.last_group_commit / 2);
    state.gathering = true;
    while state.queued.len() < expected {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        state = queue.changed.wait_timeout(state, deadline - now).unwrap_or_else(|poisoned| poisoned.into_inner()).0;
    }
    state.gathering = false;
    state
}

/// A leader's group. Dropping it hands over the lead and wakes the callers: also when the
/// leader unwinds, when members still waiting get `Panicked` instead of waiting forever.
struct Leading<'q> {
    queue: &'q GroupQueue,
    members: Vec<Arc<dyn Member>>,
    members_at_start: usize,
    started: Instant,
}

impl Leading<'_> {
    /// Runs the members in one transaction, and again without each one that fails.
    fn commit(&mut self, inner: &Inner) {
        let durability = inner.options.durability;
        while !self.members.is_empty() {
            let members = &self.members;
            let mut failed_member = None;
            let result = txn::run_write(inner, durability, |txn| {
                failed_member = None;
                for (index, member) in members.iter().enumerate() {
                    if let Err(error) = member.run(txn) {
                        // A full map is the transaction's: `run_write` grows it and runs all again.
                        if !txn.will_run_again() {
                            failed_member = Some(index);
                        }
                        return Err(error);
                    }
                }
                Ok(())
            });
            match (result, failed_member) {
                (Ok(()), _) => self.members.drain(..).for_each(|member| member.finish(Ok(()))),
                (Err(error), Some(index)) => self.members.remove(index).finish(Err(error)),
                (Err(Error::NotDurable(reason)), None) => {
                    // Committed, not flushed: every member's writes are in, none is durable.
                    self.members.drain(..).for_each(|member| member.finish(Err(Error::NotDurable(reason.clone()))));
                }
                (Err(error), None) if self.members.len() == 1 => self.members.remove(0).finish(Err(error)),
                (Err(_), None) => {
                    // The transaction failed, not a member: each runs alone for its own outcome
                    // (removed only when finished, so that an unwinding leader leaves none waiting).
                    while let Some(member) = self.members.first().cloned() {
                        let outcome = txn::run_write(inner, durability, |txn| member.run(txn));
                        self.members.remove(0);
                        member.finish(outcome);
                    }
                }
            }
        }
    }
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        for member in self.members.drain(..) {
            member.finish(Err(Error::Panicked("the thread leading this grouped write panicked before the group ended".to_owned())));
        }
        let mut state = lock(&self.queue.state);
        state.leading = false;
        state.last_group_members = self.members_at_start;
        state.last_group_commit = self.started.elapsed();
        drop(state);
        self.queue.changed.notify_all();
    }
}
