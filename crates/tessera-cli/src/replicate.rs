//! `replicate`: the database's collections into PostgreSQL, through the durable feed
//! (`tessera_postgres`). Without `--follow` it applies everything committed so far and
//! exits, printing counts; with `--follow` it keeps tailing the feed until it is stopped,
//! woken by each commit of any process on the file (`DbOptions::cross_process_notify`;
//! `tessera_postgres::FeedWait`), and looking again at least every 20 ms for writers that do
//! not notify.

use crate::failure::{Failure, Outcome, write_failed};
use crate::open;
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use tessera_postgres::{FeedWait, ReplicateError, ReplicationStats, Replicator, ReplicatorOptions};

/// Longest a following replicator goes without looking at the feed, in milliseconds: the
/// latency for a writer that does not notify other processes.
const FOLLOW_LOOK_INTERVAL_MS: u64 = 20;

/// What `replicate` was asked.
pub struct ReplicateArgs<'a> {
    pub db: &'a Path,
    pub postgres_url: &'a str,
    pub collections: Option<Vec<String>>,
    pub consumer: &'a str,
    pub follow: bool,
    pub resync: bool,
    pub batches_per_transaction: usize,
    pub as_json: bool,
}

fn failure(error: ReplicateError) -> Failure {
    match error {
        ReplicateError::Tessera(error) => Failure::from_error("", error),
        ReplicateError::Postgres(_) | ReplicateError::Unreachable { .. } => Failure::Io(error.to_string()),
        ReplicateError::NoSuchCollection { .. } | ReplicateError::Options { .. } | ReplicateError::FeedDisabled { .. } => {
            Failure::Usage(error.to_string())
        }
        other => Failure::Invalid(other.to_string()),
    }
}

/// Runs the replicator.
pub fn replicate(args: &ReplicateArgs<'_>) -> Outcome {
    let db = open::database_beside_writers(args.db, args.follow)?;
    let mut options = ReplicatorOptions::new(args.postgres_url);
    options.consumer = args.consumer.to_owned();
    options.collections = args.collections.clone();
    options.resync = args.resync;
    options.batches_per_transaction = args.batches_per_transaction;
    let mut replicator = Replicator::start(&db, options).map_err(failure)?;
    let stats = if args.follow {
        // Runs until the process is stopped: every commit PostgreSQL holds is final, and the
        // next run resumes from PostgreSQL's cursor.
        let mut wait = FeedWait::new(&db, FOLLOW_LOOK_INTERVAL_MS).map_err(|error| failure(ReplicateError::Tessera(error)))?;
        replicator.follow(&mut wait, &AtomicBool::new(false)).map_err(failure)?
    } else {
        replicator.catch_up().map_err(failure)?
    };
    report(&stats, replicator.cursor(), args.as_json)
}

fn report(stats: &ReplicationStats, cursor: u64, as_json: bool) -> Outcome {
    let mut out = std::io::stdout().lock();
    let written = if as_json {
        let summary = json!({
            "commits": stats.commits,
            "transactions": stats.transactions,
            "upserts": stats.upserts,
            "deletes": stats.deletes,
            "copied": stats.copied,
            "retries": stats.retries,
            "cursor": cursor,
        });
        writeln!(out, "{summary}")
    } else {
        writeln!(
            out,
            "replicated {} commits in {} transactions: {} upserts, {} deletes, {} copied, {} retries; cursor {cursor}",
            stats.commits, stats.transactions, stats.upserts, stats.deletes, stats.copied, stats.retries
        )
    };
    written.and_then(|()| out.flush()).map_err(|error| write_failed("the summary", error))
}
