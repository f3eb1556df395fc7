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
//! nor while a closure runs. A member's slot lock is taken by the leader, while it runs the
//! closure (under the writer lock) and hands over the outcome, and by the caller when it takes
//! its outcome; never with the queue's lock.

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

/// What the caller's values are kept in. Nothing of the caller's is dropped on the leader's
/// thread: the closure and the values of runs that did not commit are dropped by the caller
/// when it takes its outcome, as `Db::write` drops them on its own thread (a `Drop` that
/// panicked on the leader's thread unwound through another caller's `write_grouped`).
struct Slot<F, T> {
    /// The closure; taken by the caller with its outcome.
    write: Option<F>,
    /// The value of the last run.
    value: Option<T>,
    /// Values of earlier runs, and of a last run that did not commit.
    discarded: Vec<T>,
    outcome: Option<Result<T>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<F, T> Request<F, T> {
    fn new(write: F) -> Request<F, T> {
        let slot = Slot { write: Some(write), value: None, discarded: Vec::new(), outcome: None };
        Request { slot: Mutex::new(slot), finished: AtomicBool::new(false) }
    }

    /// The outcome, once [`Member::finished`]; the closure and the discarded values are
    /// dropped here, on the caller's thread.
    fn take_outcome(&self) -> Result<T> {
        let mut slot = lock(&self.slot);
        let outcome = slot.outcome.take().expect("a finished request has its outcome");
        let (write, discarded) = (slot.write.take(), std::mem::take(&mut slot.discarded));
        drop(slot);
        drop((write, discarded));
        outcome
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
        let write = slot.write.as_mut().expect("a request runs before its caller takes the closure back");
        // A panic is this member's error alone: the others run again without it.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write(txn))) {
            Ok(Ok(value)) => {
                if let Some(earlier) = slot.value.replace(value) {
                    slot.discarded.push(earlier);
                }
                Ok(())
            }
            Ok(Err(error)) => Err(error),
            Err(payload) => Err(Error::Panicked(txn::panic_message(payload.as_ref()))),
        }
    }

    fn finish(&self, outcome: Result<()>) {
        let mut slot = lock(&self.slot);
        let value = slot.value.take();
        slot.outcome = Some(match outcome {
            Ok(()) => Ok(value.expect("a member whose transaction committed ran in it")),
            Err(error) => {
                slot.discarded.extend(value);
                Err(error)
            }
        });
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
            // Each member is finished before it leaves `members`, so that a leader that unwinds
            // leaves none waiting (see `Drop`).
            match (result, failed_member) {
                (Ok(()), _) => self.finish_all(|| Ok(())),
                (Err(error), Some(index)) => {
                    self.members[index].finish(Err(error));
                    self.members.remove(index);
                }
                (Err(Error::NotDurable(reason)), None) => {
                    // Committed, not flushed: every member's writes are in, none is durable.
                    self.finish_all(|| Err(Error::NotDurable(reason.clone())));
                }
                (Err(error), None) if self.members.len() == 1 => {
                    self.members[0].finish(Err(error));
                    self.members.clear();
                }
                (Err(_), None) => {
                    // The transaction failed, not a member: each runs alone for its own outcome.
                    while let Some(member) = self.members.first().cloned() {
                        member.finish(txn::run_write(inner, durability, |txn| member.run(txn)));
                        self.members.remove(0);
                    }
                }
            }
        }
    }
}

impl Leading<'_> {
    /// Finishes every member with `outcome()`, then empties the group.
    fn finish_all(&mut self, outcome: impl Fn() -> Result<()>) {
        for member in &self.members {
            member.finish(outcome());
        }
        self.members.clear();
    }
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        for member in self.members.drain(..).filter(|member| !member.finished()) {
            // Only a bug in tessera unwinds here: the members' closures run under
            // `catch_unwind`, and nothing of theirs is dropped on this thread. The group may
            // have committed before it did.
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
