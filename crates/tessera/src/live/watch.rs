//! Subscriptions to values outside typed collections (a document, one of its fields, a
//! dictionary key): each follows the commits through a function of the commit's changes, which
//! the engine runs on the feed's thread, so they share the typed subscriptions' delivery, shape
//! and end.

use super::engine::Engine;
use super::event::{Event, Settle};
use super::mailbox::{Coalesce, Mailbox, Policy, SubscriptionEnd};
use super::subscription::Subscription;
use crate::Db;
use crate::error::Result;
use crate::store::{ChangeDemand, Published, ReadTxn};
use std::sync::{Arc, Weak};

/// What follows a value: given a commit after the subscription's start, the change it made
/// (`None`: nothing changed), or the error that stops the subscription.
pub(crate) type Follow<C> = Box<dyn FnMut(&Published, &Db) -> Option<Result<C>> + Send>;

/// A value subscription, whatever its types.
pub(super) trait AnyWatch: Send {
    /// Applies a commit; false once the subscription is over (its handle dropped, or failed).
    fn apply(&mut self, batch: &Published, db: &Db) -> bool;
    /// The subscription ends (the database closed, or commits were lost).
    fn close(&mut self, end: SubscriptionEnd);
}

struct Watch<S, C> {
    mailbox: Weak<Mailbox<Event<S, C>>>,
    /// The commit the initial state reflects.
    since: u64,
    follow: Follow<C>,
    /// Keeps writers recording changes while the subscription is registered.
    _demand: ChangeDemand,
}

impl<S: Send, C: Coalesce + Settle<S> + Send> AnyWatch for Watch<S, C> {
    fn apply(&mut self, batch: &Published, db: &Db) -> bool {
        let Some(mailbox) = self.mailbox.upgrade() else { return false };
        if batch.sequence() <= self.since {
            return true;
        }
        match (self.follow)(batch, db) {
            Some(Ok(change)) => mailbox.push(Event::Changed(change)),
            Some(Err(error)) => {
                // Never a skipped change the subscriber cannot tell from no change.
                mailbox.end_with(SubscriptionEnd::Failed(Arc::new(error)));
                return false;
            }
            None => {}
        }
        true
    }

    fn close(&mut self, end: SubscriptionEnd) {
        if let Some(mailbox) = self.mailbox.upgrade() {
            mailbox.end_with(end);
        }
    }
}

/// Every value subscription of one database. They end with the engine, which goes with the
/// database's change feed.
#[derive(Default)]
pub(super) struct Watches(pub(super) Vec<Box<dyn AnyWatch>>);

impl Watches {
    pub(super) fn apply(&mut self, batch: &Published, db: &Db) {
        self.0.retain_mut(|watch| watch.apply(batch, db)); // a removed watch lowers the demand
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for watch in &mut self.0 {
            watch.close(SubscriptionEnd::DatabaseClosed);
        }
    }
}

/// Subscribes to a value. `start` reads the initial state in the snapshot it is given, and
/// returns it with the function that follows every commit after that snapshot.
///
/// The function runs on the feed's delivery thread: it must not hold a [`Db`] (the engine
/// lives inside the database, so that would keep it open forever) and gets one to read with.
pub(crate) fn watch<S, C>(db: &Db, policy: Policy, start: impl FnOnce(&ReadTxn<'_>) -> Result<(S, Follow<C>)>) -> Result<Subscription<S, C>>
where
    S: Send + 'static,
    C: Coalesce + Settle<S> + Send + 'static,
{
    let mailbox = Arc::new(Mailbox::new(policy));
    let engine = Engine::of(db)?;
    engine.register_watch(db, |demand| {
        let txn = db.read_txn()?;
        let (initial, follow) = start(&txn)?;
        mailbox.push(Event::Initial(initial));
        let watch: Box<dyn AnyWatch> =
            Box::new(Watch { mailbox: Arc::downgrade(&mailbox), since: txn.sequence(), follow, _demand: demand });
        Ok(watch)
    })?;
    Ok(Subscription::new(mailbox))
}
