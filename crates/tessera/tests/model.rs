//! A model-based test of the whole `Db` API: random sequences of collection writes (with a
//! secondary and a unique index), calls that fail inside a transaction whose closure catches
//! the error and commits, closures that abort, dictionary and document writes, and reopens,
//! against a plain in-memory model. After every step each query, lookup and read must equal
//! the model's answer, and `Db::check` must pass.

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tessera::collection::Record;
use tessera::{Db, Error};

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "accounts")]
struct Account {
    #[record(key)]
    id: u8,
    #[record(index)]
    score: i16,
    #[record(unique)]
    email: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Profile {
    name: String,
    visits: u32,
}

/// One step against the database.
#[derive(Debug, Clone)]
enum Op {
    Insert(u8, i16, u8),
    Upsert(u8, i16, u8),
    SetScore(u8, i16),
    Delete(u8),
    DeleteBelow(i16),
    /// Runs the calls in one transaction; a call that fails is caught and the closure goes on.
    /// With `abort`, the closure then returns an error, so nothing commits.
    Batch {
        calls: Vec<Op>,
        abort: bool,
    },
    DictSet(u8, u32),
    DictRemove(u8),
    DocSet(u8, u32),
    DocDelete(u8),
    Reopen,
}

fn email(n: u8) -> String {
    format!("user{}@example.com", n % 8)
}

fn single_op() -> impl Strategy<Value = Op> {
    let id = 0u8..12;
    let score = -3i16..4;
    prop_oneof![
        3 => (id.clone(), score.clone(), any::<u8>()).prop_map(|(id, score, mail)| Op::Insert(id, score, mail)),
        2 => (id.clone(), score.clone(), any::<u8>()).prop_map(|(id, score, mail)| Op::Upsert(id, score, mail)),
        2 => (id.clone(), score.clone()).prop_map(|(id, score)| Op::SetScore(id, score)),
        1 => id.clone().prop_map(Op::Delete),
        1 => score.prop_map(Op::DeleteBelow),
        2 => (0u8..4, any::<u32>()).prop_map(|(key, value)| Op::DictSet(key, value)),
        1 => (0u8..4).prop_map(Op::DictRemove),
        2 => (0u8..3, any::<u32>()).prop_map(|(id, visits)| Op::DocSet(id, visits)),
        1 => (0u8..3).prop_map(Op::DocDelete),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => single_op(),
        2 => (prop::collection::vec(single_op(), 1..5), any::<bool>()).prop_map(|(calls, abort)| Op::Batch { calls, abort }),
        1 => Just(Op::Reopen),
    ]
}

/// What the database should hold.
#[derive(Debug, Clone, Default, PartialEq)]
struct Model {
    accounts: BTreeMap<u8, Account>,
    dictionary: BTreeMap<u8, u32>,
    documents: BTreeMap<u8, Profile>,
}

impl Model {
    /// Applies one call; `Err` (with the model unchanged) where the database must refuse it.
    fn apply(&mut self, op: &Op) -> Result<(), &'static str> {
        match op {
            Op::Insert(id, score, mail) => {
                if self.accounts.contains_key(id) {
                    return Err("duplicate key");
                }
                self.put(Account { id: *id, score: *score, email: email(*mail) })
            }
            Op::Upsert(id, score, mail) => self.put(Account { id: *id, score: *score, email: email(*mail) }),
            Op::SetScore(id, score) => match self.accounts.get(id) {
                Some(account) => self.put(Account { score: *score, ..account.clone() }),
                None => Err("not found"),
            },
            Op::Delete(id) => {
                self.accounts.remove(id);
                Ok(())
            }
            Op::DeleteBelow(score) => {
                self.accounts.retain(|_, account| account.score >= *score);
                Ok(())
            }
            Op::DictSet(key, value) => {
                self.dictionary.insert(*key, *value);
                Ok(())
            }
            Op::DictRemove(key) => {
                self.dictionary.remove(key);
                Ok(())
            }
            Op::DocSet(id, visits) => {
                self.documents.insert(*id, Profile { name: format!("p{id}"), visits: *visits });
                Ok(())
            }
            Op::DocDelete(id) => {
                self.documents.remove(id);
                Ok(())
            }
            Op::Batch { .. } | Op::Reopen => unreachable!("handled by the runner"),
        }
    }

    fn put(&mut self, account: Account) -> Result<(), &'static str> {
        let taken = self.accounts.values().any(|other| other.email == account.email && other.id != account.id);
        if taken {
            return Err("unique violation");
        }
        self.accounts.insert(account.id, account);
        Ok(())
    }
}

struct Handles {
    db: Db,
    accounts: tessera::Collection<Account>,
    dictionary: tessera::Dictionary,
    documents: tessera::Documents,
}

fn open(path: &std::path::Path) -> Handles {
    let db = Db::open(path).unwrap();
    Handles {
        accounts: db.collection::<Account>().unwrap(),
        dictionary: db.dictionary().unwrap(),
        documents: db.documents("profiles").unwrap(),
        db,
    }
}

/// Runs one call inside `tx`, as the database sees it.
fn call(handles: &Handles, tx: &mut tessera::WriteTxn<'_>, op: &Op) -> tessera::Result<()> {
    let accounts = &handles.accounts;
    match op {
        Op::Insert(id, score, mail) => accounts.insert(tx, &Account { id: *id, score: *score, email: email(*mail) }).map(drop),
        Op::Upsert(id, score, mail) => accounts.upsert(tx, &Account { id: *id, score: *score, email: email(*mail) }).map(drop),
        Op::SetScore(id, score) => accounts.update(tx, id, |account| account.score = *score).map(drop),
        Op::Delete(id) => accounts.delete(tx, id).map(drop),
        Op::DeleteBelow(score) => accounts.delete_where(tx, &accounts.filter(Account::score().lt(*score))).map(drop),
        Op::DictSet(key, value) => tx.dictionary(&handles.dictionary).set(&format!("k{key}"), value),
        Op::DictRemove(key) => tx.dictionary(&handles.dictionary).remove(&format!("k{key}")),
        Op::DocSet(id, visits) => {
            handles.documents.document::<Profile>(&format!("d{id}")).set_in(tx, &Profile { name: format!("p{id}"), visits: *visits })
        }
        Op::DocDelete(id) => handles.documents.document::<Profile>(&format!("d{id}")).delete_in(tx).map(drop),
        Op::Batch { .. } | Op::Reopen => unreachable!("handled by the runner"),
    }
}

/// Compares every read with the model.
fn check(handles: &Handles, model: &Model, step: usize) {
    let db = &handles.db;
    let accounts = &handles.accounts;
    let all: Vec<Account> = accounts.all().fetch(db).unwrap();
    assert_eq!(all, model.accounts.values().cloned().collect::<Vec<_>>(), "step {step}: all records");
    for score in -3i16..4 {
        let mut by_index: Vec<u8> = accounts.filter(Account::score().eq(score)).fetch(db).unwrap().iter().map(|a| a.id).collect();
        by_index.sort();
        let expected: Vec<u8> = model.accounts.values().filter(|a| a.score == score).map(|a| a.id).collect();
        assert_eq!(by_index, expected, "step {step}: score == {score} through the index");
    }
    for mail in 0u8..8 {
        let found: Vec<u8> = accounts.filter(Account::email().eq(email(mail))).fetch(db).unwrap().iter().map(|a| a.id).collect();
        let expected: Vec<u8> = model.accounts.values().filter(|a| a.email == email(mail)).map(|a| a.id).collect();
        assert_eq!(found, expected, "step {step}: email lookup through the unique index");
    }
    for key in 0u8..4 {
        assert_eq!(handles.dictionary.get::<u32>(&format!("k{key}")).unwrap(), model.dictionary.get(&key).copied(), "step {step}: k{key}");
    }
    for id in 0u8..3 {
        let stored = handles.documents.document::<Profile>(&format!("d{id}")).get().unwrap();
        assert_eq!(stored.as_ref(), model.documents.get(&id), "step {step}: document d{id}");
    }
    let report = db.check().unwrap();
    assert!(report.is_ok(), "step {step}: {report}");
}

fn run(ops: &[Op]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.tessera");
    let mut handles = open(&path);
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Reopen => {
                handles.dictionary.flush().unwrap();
                drop(handles);
                handles = open(&path);
            }
            Op::Batch { calls, abort } => {
                let mut next = model.clone();
                let result = handles.db.write(|tx| {
                    // A retried closure starts again from the model as it was.
                    next = model.clone();
                    for call_op in calls {
                        let expected = next.apply(call_op);
                        let actual = call(&handles, tx, call_op);
                        // The call's own outcome: refused exactly when the model refuses it;
                        // a refused call leaves nothing of itself in the transaction.
                        assert_eq!(actual.is_ok(), expected.is_ok(), "step {step}: {call_op:?} gave {actual:?}, the model {expected:?}");
                    }
                    if *abort { Err(Error::other("the closure changed its mind")) } else { Ok(()) }
                });
                assert_eq!(result.is_ok(), !abort, "step {step}: {result:?}");
                if !abort {
                    model = next;
                }
            }
            single => {
                let expected = model.apply(single);
                let actual = handles.db.write(|tx| call(&handles, tx, single));
                assert_eq!(actual.is_ok(), expected.is_ok(), "step {step}: {single:?} gave {actual:?}, the model {expected:?}");
            }
        }
        check(&handles, &model, step);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_database_behaves_like_the_model(ops in prop::collection::vec(op(), 1..40)) {
        run(&ops);
    }
}
