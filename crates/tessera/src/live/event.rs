//! The one shape of every subscription's deliveries: the state when it started, then one
//! change per commit that changes it, then the reason it ended.

use super::changeset::{ObjectChange, ResultChange};
use super::mailbox::{Coalesce, Mailbox, SubscriptionEnd};
use super::results::Results;
use std::sync::Arc;

/// One delivery of a subscription, whatever it follows: a query, an object, a document, a
/// document's field or a dictionary key.
///
/// A subscription delivers `Initial` once, first; then `Changed` for each commit that changes
/// what it follows; then `Closed` once, last, when it can deliver nothing more (the iterator and
/// the stream return `None` after it).
///
/// ```
/// use tessera::collection::Record;
/// use tessera::live::Event;
/// use std::time::Duration;
/// #[derive(Record, Debug)]
/// struct Item { #[record(key)] id: u32, n: i64 }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let items = db.collection::<Item>()?;
/// let live = items.subscribe_object(&1u32)?;
/// assert!(matches!(live.recv_timeout(Duration::from_secs(5)), Some(Event::Initial(None))), "absent at first");
/// db.write(|tx| items.insert(tx, &Item { id: 1, n: 7 }).map(drop))?;
/// let change = live.recv_timeout(Duration::from_secs(5)).and_then(Event::changed).expect("a change");
/// assert!(matches!(change, tessera::live::ObjectChange::Updated(item) if item.n == 7));
/// drop((items, db)); // the last handles: the database closes
/// assert!(matches!(live.recv(), Some(Event::Closed(_))));
/// assert!(live.recv().is_none());
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug)]
pub enum Event<S, C> {
    /// What the subscription follows, as of the commit it started at.
    Initial(S),
    /// What one commit (or, for a subscriber slower than the commits, several, merged) changed.
    Changed(C),
    /// The subscription delivers nothing more, for this reason.
    Closed(SubscriptionEnd),
}

impl<S, C> Event<S, C> {
    /// The initial state, if this is the `Initial` event.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// let live = tasks.subscribe_query(&tasks.all())?;
    /// let first = live.recv_timeout(wait).and_then(|event| event.initial()).expect("the initial result");
    /// assert!(first.is_empty());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn initial(self) -> Option<S> {
        match self {
            Event::Initial(state) => Some(state),
            _ => None,
        }
    }

    /// The change, if this is a `Changed` event.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// let live = tasks.subscribe_object(&1)?;
    /// assert!(live.recv_timeout(wait).and_then(|event| event.changed()).is_none(), "the first event is Initial");
    /// db.write(|tx| tasks.insert(tx, &Task { id: 1, priority: 5 }))?;
    /// assert!(live.recv_timeout(wait).and_then(|event| event.changed()).is_some());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn changed(self) -> Option<C> {
        match self {
            Event::Changed(change) => Some(change),
            _ => None,
        }
    }

    /// Whether this is the `Closed` event.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # use tessera::collection::Record;
    /// # #[derive(Record)]
    /// # struct Task { #[record(key)] id: u32 }
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let tasks = db.collection::<Task>()?;
    /// let live = tasks.subscribe_object(&1)?;
    /// live.recv(); // Initial
    /// drop(tasks);
    /// db.close()?;
    /// assert!(live.recv().is_some_and(|event| event.is_closed()));
    /// assert!(live.recv().is_none(), "nothing after Closed");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn is_closed(&self) -> bool {
        matches!(self, Event::Closed(_))
    }
}

/// The state a change leaves: what an unread `Initial` becomes when a change is merged into it.
pub(crate) trait Settle<S> {
    fn settle(self) -> S;
}

impl<T> Settle<Results<T>> for ResultChange<T> {
    fn settle(self) -> Results<T> {
        self.result
    }
}

impl<T> Settle<Option<Arc<T>>> for ObjectChange<T> {
    fn settle(self) -> Option<Arc<T>> {
        match self {
            ObjectChange::Updated(value) => Some(value),
            ObjectChange::Deleted => None,
        }
    }
}

/// A value subscription (a document, a field, a dictionary key): each change is the new value.
impl<T> Settle<Option<T>> for Option<T> {
    fn settle(self) -> Option<T> {
        self
    }
}

impl<T> Coalesce for Option<T> {
    fn coalesce(&mut self, newer: Self) {
        *self = newer;
    }
}

/// Unread deliveries merge: an initial state and a change into the state the change left, two
/// changes into their net change. `Closed` is never queued.
impl<S, C: Coalesce + Settle<S>> Coalesce for Event<S, C> {
    fn coalesce(&mut self, newer: Self) {
        let merged = match (std::mem::replace(self, Event::Closed(SubscriptionEnd::DatabaseClosed)), newer) {
            (Event::Changed(mut older), Event::Changed(newer)) => {
                older.coalesce(newer);
                Event::Changed(older)
            }
            (Event::Initial(_), Event::Changed(newer)) => Event::Initial(newer.settle()),
            (_, newer) => newer,
        };
        *self = merged;
    }
}

/// Where a query subscription's events wait.
pub(super) type QueryMailbox<T> = Mailbox<Event<Results<T>, ResultChange<T>>>;
/// Where an object subscription's events wait.
pub(super) type ObjectMailbox<T> = Mailbox<Event<Option<Arc<T>>, ObjectChange<T>>>;
