//! The replication loop: reads tessera's durable feed from the replica's cursor, applies each
//! group of commits in one PostgreSQL transaction that also moves the cursor row, and
//! acknowledges to tessera's consumer after PostgreSQL committed. PostgreSQL's cursor row is
//! the source of truth: it is read at start and locked in every transaction, so a commit is
//! applied exactly once whatever stopped the replicator, and a connection failure is retried
//! from wherever PostgreSQL's cursor is.

use crate::cells;
use crate::collections::Collections;
use crate::error::{ReplicateError, Result};
use crate::options::ReplicatorOptions;
use crate::plan::{self, TablePlan};
use crate::rows;
use crate::session::{self, Session};
use crate::table;
use crate::wait::Wait;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tessera::Db;
use tessera::store::{ChangeBatch, Consumer};

/// Longest time between two acknowledgements to tessera's consumer while the replicator is
/// busy (it also acknowledges whenever it has caught up). The acknowledgement only lets
/// tessera trim its feed; PostgreSQL's cursor is what resumes.
///
/// ```
/// use tessera_postgres::{RetryPolicy, ACK_INTERVAL_MS_MAX};
/// // A busy replicator lets tessera trim its feed at least once a second.
/// assert_eq!(ACK_INTERVAL_MS_MAX, 1_000);
/// assert!(ACK_INTERVAL_MS_MAX <= RetryPolicy::default().delay_max_ms);
/// ```
pub const ACK_INTERVAL_MS_MAX: u64 = 1_000;

/// What a replicator has done so far.
///
/// ```
/// let stats = tessera_postgres::ReplicationStats::default();
/// assert_eq!(stats.commits, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicationStats {
    /// PostgreSQL transactions committed with feed commits in them.
    pub transactions: u64,
    /// tessera commits applied.
    pub commits: u64,
    /// Rows inserted or replaced from the feed.
    pub upserts: u64,
    /// Rows deleted from the feed.
    pub deletes: u64,
    /// Records copied by full copies (the first run, or a resynchronisation).
    pub copied: u64,
    /// Connection failures retried.
    pub retries: u64,
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    CaughtUp,
    Applied,
}

/// What the transaction of a group found.
enum Outcome {
    Committed,
    /// PostgreSQL's cursor was not where this replicator thought (an earlier commit whose
    /// reply was lost, or another replicator of the same consumer): `None` if the row is gone.
    Moved(Option<u64>),
}

/// Replicates a tessera database's collections into PostgreSQL; see the crate docs.
///
/// ```no_run
/// use tessera_postgres::{Replicator, ReplicatorOptions};
/// let db = tessera::Db::open("app.tessera")?;
/// let mut replicator = Replicator::start(&db, ReplicatorOptions::new("host=127.0.0.1 user=postgres"))?;
/// let stats = replicator.catch_up()?;
/// println!("{} commits applied, cursor {}", stats.commits, replicator.cursor());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Replicator {
    db: Db,
    options: ReplicatorOptions,
    consumer: Consumer,
    collections: Collections,
    session: Option<Session>,
    /// Every replicated collection's table has been checked since the set was last read.
    tables_checked: bool,
    /// The last commit PostgreSQL holds.
    cursor: u64,
    /// The newest commit at or before `cursor` with a feed entry, whose digest PostgreSQL keeps
    /// with the cursor (see `Db::feed_digest_through`); `None` when the feed has none there.
    anchor: Option<u64>,
    /// Commits read from the feed after `cursor` and not applied yet (a read returns more
    /// than one transaction takes), in order.
    pending: Vec<ChangeBatch>,
    /// The collections asked for, sorted (`None`: every collection), kept with the cursor: a
    /// replica holds the commits up to its cursor of those collections only.
    set: Option<Vec<String>>,
    /// The collections the cursor row said when this replicator last read or wrote it.
    set_seen: Option<Vec<String>>,
    /// By table, its `bigint` columns where the shape has `numeric` (found when the tables
    /// were last checked): each value must fit.
    bigint: HashMap<String, Vec<String>>,
    acked: u64,
    acked_at: Instant,
    stats: ReplicationStats,
}

impl std::fmt::Debug for Replicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Replicator({:?}, cursor {})", self.options.consumer, self.cursor)
    }
}

/// The error of `misfit` in the row of stored key `key` of `table`.
fn misfit_error(collections: &Collections, table: &str, key: &[u8], misfit: cells::Misfit) -> ReplicateError {
    let collection =
        collections.all().into_iter().find(|replicated| replicated.shape.table == table).map(|replicated| &replicated.collection);
    ReplicateError::Value {
        collection: table.to_owned(),
        key: collection.and_then(|collection| collection.display_key(key)).unwrap_or_else(|| format!("{key:02x?}")),
        field: misfit.field,
        problem: misfit.problem,
    }
}

/// The session, connected if it is not.
fn connected<'s>(session: &'s mut Option<Session>, url: &str) -> Result<&'s mut Session> {
    if session.is_none() {
        *session = Some(Session::connect(url)?);
    }
    Ok(session.as_mut().expect("connected above"))
}

impl Replicator {
    /// Registers the consumer in tessera, connects to PostgreSQL (retrying), makes the cursor
    /// table, and reads the replica's cursor; a replica without one (the first run) gets a
    /// full copy of every replicated collection from one snapshot.
    ///
    /// ```
    /// use tessera_postgres::{ReplicateError, Replicator, ReplicatorOptions};
    /// # let dir = tempfile::tempdir()?;
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let mut options = ReplicatorOptions::new("host=127.0.0.1 user=postgres");
    /// options.changes_per_transaction = 0; // options are checked before anything connects
    /// let error = Replicator::start(&db, options).unwrap_err();
    /// assert!(matches!(error, ReplicateError::Options { option: "changes_per_transaction", .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start(db: &Db, options: ReplicatorOptions) -> Result<Replicator> {
        options.check()?;
        let collections = Collections::load(db, options.collections.as_deref())?;
        // Registered before the snapshot of a full copy: the feed keeps what comes after it. A
        // consumer this call registered is removed again if the start fails: left, it would
        // keep every later commit in the feed for a replica that never reads them.
        let registered_before = db.consumers()?.iter().any(|known| known.name() == options.consumer);
        let consumer = db.consumer(&options.consumer)?;
        let set = options.collections.as_ref().map(|names| {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            names
        });
        let mut replicator = Replicator {
            db: db.clone(),
            options,
            consumer,
            collections,
            session: None,
            tables_checked: false,
            cursor: 0,
            anchor: None,
            pending: Vec::new(),
            set: set.clone(),
            set_seen: set,
            bigint: HashMap::new(),
            acked: 0,
            acked_at: Instant::now(),
            stats: ReplicationStats::default(),
        };
        if let Err(error) = replicator.retrying(Replicator::open) {
            if !registered_before {
                replicator.consumer.clone().remove()?;
            }
            return Err(error);
        }
        Ok(replicator)
    }

    /// The last tessera commit the replica holds.
    ///
    /// ```no_run
    /// use tessera_postgres::{Replicator, ReplicatorOptions};
    /// let db = tessera::Db::open("app.tessera")?;
    /// let mut replicator = Replicator::start(&db, ReplicatorOptions::new("host=127.0.0.1 user=postgres"))?;
    /// replicator.catch_up()?;
    /// // Every commit up to the cursor is in PostgreSQL.
    /// assert!(replicator.cursor() >= replicator.stats().commits);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// What the replicator has done since it started.
    ///
    /// ```no_run
    /// use tessera_postgres::{Replicator, ReplicatorOptions};
    /// let db = tessera::Db::open("app.tessera")?;
    /// let mut replicator = Replicator::start(&db, ReplicatorOptions::new("host=127.0.0.1 user=postgres"))?;
    /// let totals = replicator.catch_up()?;
    /// assert_eq!(replicator.stats(), totals);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> ReplicationStats {
        self.stats
    }

    /// Applies every commit in the feed now, then acknowledges; returns the totals.
    ///
    /// ```no_run
    /// use tessera_postgres::{Replicator, ReplicatorOptions};
    /// let db = tessera::Db::open("app.tessera")?;
    /// let mut replicator = Replicator::start(&db, ReplicatorOptions::new("host=127.0.0.1 user=postgres"))?;
    /// let first = replicator.catch_up()?;
    /// let second = replicator.catch_up()?; // nothing new: the totals stay
    /// assert_eq!(first.commits, second.commits);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn catch_up(&mut self) -> Result<ReplicationStats> {
        while self.step()? == Progress::Applied {}
        self.acknowledge(true)?;
        Ok(self.stats)
    }

    /// Keeps applying commits as they come, waiting with `wait` whenever the feed is empty,
    /// until `stop` is set; returns the totals.
    ///
    /// ```no_run
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use tessera_postgres::{FeedWait, Replicator, ReplicatorOptions};
    /// let db = tessera::Db::open("app.tessera")?;
    /// let mut replicator = Replicator::start(&db, ReplicatorOptions::new("host=127.0.0.1 user=postgres"))?;
    /// let stop = AtomicBool::new(false);
    /// std::thread::scope(|scope| {
    ///     scope.spawn(|| {
    ///         std::thread::sleep(std::time::Duration::from_secs(10));
    ///         stop.store(true, Ordering::Release);
    ///     });
    ///     let stats = replicator.follow(&mut FeedWait::new(&db, 1_000)?, &stop)?;
    ///     assert!(replicator.cursor() >= stats.commits);
    ///     Ok::<(), tessera_postgres::ReplicateError>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn follow(&mut self, wait: &mut dyn Wait, stop: &AtomicBool) -> Result<ReplicationStats> {
        while !stop.load(Ordering::Acquire) {
            match self.step()? {
                Progress::CaughtUp => wait.idle(self.cursor),
                Progress::Applied => wait.busy(),
            }
        }
        self.acknowledge(true)?;
        Ok(self.stats)
    }

    /// Runs `op`, retrying it on a new connection while PostgreSQL is unreachable.
    fn retrying<T>(&mut self, mut op: impl FnMut(&mut Self) -> Result<T>) -> Result<T> {
        let mut attempt = 0u32;
        let mut waited_ms = 0u64;
        loop {
            match op(self) {
                Err(ReplicateError::Postgres(error)) if session::is_transient(&error) => {
                    self.session = None;
                    attempt += 1;
                    if attempt >= self.options.retry.attempts_max {
                        return Err(ReplicateError::Unreachable { attempts: attempt, waited_ms, last: error });
                    }
                    let delay_ms = self.options.retry.delay_ms(attempt - 1);
                    std::thread::sleep(Duration::from_millis(delay_ms));
                    waited_ms += delay_ms;
                    self.stats.retries += 1;
                }
                other => return other,
            }
        }
    }

    fn open(&mut self) -> Result<()> {
        let session = connected(&mut self.session, &self.options.postgres_url)?;
        let mut tx = session.client.transaction()?;
        table::ensure_cursor_table(&mut tx)?;
        let row = table::read_cursor(&mut tx, &self.options.consumer, false)?;
        let digest = table::read_digest(&mut tx, &self.options.consumer)?;
        tx.commit()?;
        let Some(table::CursorRow { cursor, collections }) = row else { return self.full_copy() };
        self.cursor = cursor;
        // The replica holds the commits up to its cursor of its collections only: one it does
        // not hold would get the later commits and never the records written before.
        let missing: Vec<String> = match &collections {
            None => Vec::new(),
            Some(held) => {
                self.collections.all().iter().map(|replicated| replicated.shape.table.clone()).filter(|name| !held.contains(name)).collect()
            }
        };
        self.set_seen = collections;
        if !missing.is_empty() {
            if !self.options.resync {
                return Err(ReplicateError::Options {
                    option: "collections",
                    problem: format!(
                        "consumer {}'s replica does not hold {missing:?} (their records before its cursor {cursor} were never copied): resynchronise with --resync, or use another consumer",
                        self.options.consumer
                    ),
                });
            }
            return self.full_copy();
        }
        // The commit at the cursor must be the one the replica applied: a file put back from
        // an older copy, or one that lost commits in a crash, numbers its new commits as the
        // lost ones were, and reading on from the cursor would skip them.
        let found = self.db.feed_digest_through(cursor)?;
        self.anchor = found.map(|(at, _)| at);
        // A file whose newest commit is before the cursor is `CursorAhead`, from the first read.
        let newest = self.db.read(|snapshot| Ok(snapshot.sequence()))?;
        if cursor <= newest && digest.diverged(found.map(|(_, found)| found)) {
            if !self.options.resync {
                return Err(ReplicateError::HistoryDiverged { consumer: self.options.consumer.clone(), cursor });
            }
            self.full_copy()?;
        }
        Ok(())
    }

    /// Applies the next group of commits.
    fn step(&mut self) -> Result<Progress> {
        let read = match self.pending.first() {
            Some(first) if first.sequence > self.cursor => Ok(std::mem::take(&mut self.pending)),
            _ => self.db.changes_since(self.cursor, self.options.batches_per_transaction),
        };
        let mut batches = match read {
            Ok(batches) => batches,
            Err(tessera::Error::FeedCursorExpired { cursor, oldest_kept }) => {
                if !self.options.resync {
                    return Err(ReplicateError::CursorExpired { consumer: self.options.consumer.clone(), cursor, oldest_kept });
                }
                self.retrying(Replicator::full_copy)?;
                return Ok(Progress::Applied);
            }
            Err(tessera::Error::FeedCursorAhead { cursor, newest }) => {
                if !self.options.resync {
                    return Err(ReplicateError::CursorAhead { consumer: self.options.consumer.clone(), cursor, newest });
                }
                self.retrying(Replicator::full_copy)?;
                return Ok(Progress::Applied);
            }
            Err(error) => return Err(error.into()),
        };
        if batches.is_empty() {
            self.acknowledge(true)?;
            return Ok(Progress::CaughtUp);
        }
        let rest = batches.split_off(plan::group_len(&batches, self.options.changes_per_transaction));
        let group = &batches[..];
        if group.iter().flat_map(|batch| &batch.changes).any(|change| self.collections.stale_for(&change.keyspace)) {
            self.reload()?;
        }
        let plans = match plan::plan(&self.collections, group) {
            // Records of a newer record type than the loaded shared keys know: read the
            // schema again, once.
            Err(ReplicateError::Tessera(tessera::Error::RecordDecode { .. })) => {
                self.reload()?;
                plan::plan(&self.collections, group)?
            }
            other => other?,
        };
        let (from, last) = (self.cursor, group.last().expect("a group is not empty").sequence);
        assert!(last > from, "the feed returned commit {last} after cursor {from}");
        let anchor = self.db.feed_digest_through(last)?;
        match self.retrying(|replicator| replicator.apply(from, (last, anchor.map(|(_, digest)| digest)), &plans))? {
            Outcome::Committed => {
                self.cursor = last;
                self.anchor = anchor.map(|(at, _)| at);
                self.stats.transactions += 1;
                self.stats.commits += group.len() as u64;
                for plan in &plans {
                    self.stats.upserts += plan.upserts.len() as u64;
                    self.stats.deletes += plan.deletes.len() as u64;
                }
                self.pending = rest;
                self.acknowledge(false)?;
            }
            Outcome::Moved(Some(cursor)) => self.cursor = cursor,
            Outcome::Moved(None) => self.retrying(Replicator::full_copy)?,
        }
        Ok(Progress::Applied)
    }

    fn reload(&mut self) -> Result<()> {
        self.collections.reload(&self.db)?;
        self.tables_checked = false;
        Ok(())
    }

    /// One PostgreSQL transaction: lock the cursor row, check it is `from`, (check the tables),
    /// apply `plans`, move the cursor to `last` with the digest of that commit, commit.
    fn apply(&mut self, from: u64, (last, digest): (u64, Option<u64>), plans: &[TablePlan]) -> Result<Outcome> {
        let check_tables = !self.tables_checked;
        let Session { client, statements } = connected(&mut self.session, &self.options.postgres_url)?;
        let mut tx = client.transaction()?;
        let row = table::read_cursor(&mut tx, &self.options.consumer, true)?;
        // Another replicator of this consumer with other collections moved the row: each would
        // skip the other's commits.
        if let Some(found) = row.as_ref().map(|row| &row.collections)
            && found != &self.set_seen
            && found != &self.set
        {
            tx.rollback()?;
            return Err(ReplicateError::Options {
                option: "collections",
                problem: format!(
                    "consumer {} is replicated by another replicator with collections {found:?} (this one: {:?}): each would skip the other's commits",
                    self.options.consumer, self.set
                ),
            });
        }
        let cursor = row.map(|row| row.cursor);
        if cursor != Some(from) {
            tx.rollback()?;
            return Ok(Outcome::Moved(cursor));
        }
        if check_tables {
            statements.clear();
            self.bigint.clear();
            for replicated in self.collections.all() {
                let bigint = table::ensure_table(&mut tx, &replicated.shape, &replicated.collection.schema().shape)?;
                self.bigint.insert(replicated.shape.table.clone(), bigint);
            }
        }
        for plan in plans {
            if let Some(bigint) = self.bigint.get(&plan.shape.table).filter(|bigint| !bigint.is_empty()) {
                for row in &plan.upserts {
                    cells::fits_bigint(&plan.shape, row, bigint)
                        .map_err(|misfit| misfit_error(&self.collections, &plan.shape.table, &row.key, misfit))?;
                }
            }
            let deletes: Vec<&[u8]> = plan.deletes.iter().map(Vec::as_slice).collect();
            rows::delete(&mut tx, statements, &plan.shape, &deletes)?;
            rows::upsert(&mut tx, statements, &plan.shape, &plan.upserts)?;
        }
        table::write_cursor(&mut tx, &self.options.consumer, last, digest, self.set.as_deref())?;
        tx.commit()?;
        self.set_seen = self.set.clone();
        self.tables_checked = true;
        Ok(Outcome::Committed)
    }

    /// Replaces every replicated table's rows with the records of one tessera snapshot, and
    /// sets the cursor to that snapshot's commit, in one PostgreSQL transaction.
    fn full_copy(&mut self) -> Result<()> {
        self.collections.reload(&self.db)?;
        let Session { client, statements } = connected(&mut self.session, &self.options.postgres_url)?;
        let mut tx = client.transaction()?;
        table::read_cursor(&mut tx, &self.options.consumer, true)?;
        statements.clear();
        let replicated = self.collections.all();
        self.bigint.clear();
        for replicated in &replicated {
            let bigint = table::ensure_table(&mut tx, &replicated.shape, &replicated.collection.schema().shape)?;
            self.bigint.insert(replicated.shape.table.clone(), bigint);
            rows::truncate(&mut tx, &replicated.shape)?;
        }
        let bigint_of = &self.bigint;
        let mut failure: Option<ReplicateError> = None;
        let mut copied = 0u64;
        let sequence = self.db.read(|snapshot| {
            for replicated in &replicated {
                let shape = &replicated.shape;
                let bigint = bigint_of.get(&shape.table).map_or(&[][..], Vec::as_slice);
                let mut pending = Vec::with_capacity(rows::ROWS_PER_STATEMENT_MAX);
                replicated.collection.all().for_each(snapshot, |record| {
                    let row = cells::row(shape, record.key_bytes(), record.value())
                        .and_then(|row| cells::fits_bigint(shape, &row, bigint).map(|()| row))
                        .map_err(|misfit| ReplicateError::Value {
                            collection: replicated.collection.name().to_owned(),
                            key: replicated.collection.display_key(record.key_bytes()).unwrap_or_default(),
                            field: misfit.field,
                            problem: misfit.problem,
                        });
                    let flushed = row.and_then(|row| {
                        pending.push(row);
                        if pending.len() < rows::ROWS_PER_STATEMENT_MAX {
                            return Ok(());
                        }
                        copied += pending.len() as u64;
                        let written = rows::upsert(&mut tx, statements, shape, &pending);
                        pending.clear();
                        written
                    });
                    match flushed {
                        Ok(()) => Ok(true),
                        Err(error) => {
                            failure = Some(error);
                            Ok(false)
                        }
                    }
                })?;
                if failure.is_some() {
                    break;
                }
                copied += pending.len() as u64;
                if let Err(error) = rows::upsert(&mut tx, statements, shape, &pending) {
                    failure = Some(error);
                    break;
                }
            }
            Ok(snapshot.sequence())
        })?;
        if let Some(error) = failure {
            return Err(error);
        }
        let anchor = self.db.feed_digest_through(sequence)?;
        table::write_cursor(&mut tx, &self.options.consumer, sequence, anchor.map(|(_, digest)| digest), self.set.as_deref())?;
        tx.commit()?;
        self.set_seen = self.set.clone();
        self.cursor = sequence;
        self.anchor = anchor.map(|(at, _)| at);
        self.pending.clear();
        self.tables_checked = true;
        self.stats.copied += copied;
        Ok(())
    }

    /// Tells tessera's consumer how far the replica is, if it is further than last told and
    /// `now` or the interval passed: up to the commit before the cursor's anchor (the newest
    /// feed entry at or before it), so that the feed keeps the entry whose digest a later start
    /// checks (see `open`).
    fn acknowledge(&mut self, now: bool) -> Result<()> {
        let due = now || self.acked_at.elapsed() >= Duration::from_millis(ACK_INTERVAL_MS_MAX);
        let through = self.anchor.map_or(self.cursor, |anchor| anchor.saturating_sub(1)).min(self.cursor);
        if through > self.acked && due {
            self.consumer.ack(through)?;
            self.acked = through;
            self.acked_at = Instant::now();
        }
        Ok(())
    }
}
