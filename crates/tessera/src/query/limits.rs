//! Bounds on expressions built in code: a query's expression tree may be at most
//! [`EXPR_DEPTH_MAX`] levels deep, measured once, iteratively, when a query is planned.
//!
//! The text parser bounds the parentheses it reads, but `.and(…)` called 100,000 times builds
//! a tree 100,000 levels deep, and every recursive walk over it (type checks, planning,
//! evaluation, printing) would overflow the stack and abort the process. One measurement
//! before any of them runs turns that into [`crate::Error::QueryTooDeep`]. Dropping an
//! expression is iterative too (`Drop for Expr` below), so that a tree too deep to run can
//! still be thrown away.

use super::Expr;
use crate::error::{Error, Result};

/// Deepest expression tree a query may have: a leaf (`a`, `1`) is 1 level, `a == 1` is 2, and
/// a chain of `n` `.and(…)` calls over comparisons is `n + 2`.
///
/// The same 128 as the text parser's parentheses and the binary format's default nesting. Not
/// SQLite's 1,000: the recursive walks take up to 4 KiB of stack per level in a debug build
/// (the type check's frame), and a query must run on a thread with Rust's default 2 MiB
/// stack; 300 levels already overflowed one there.
///
/// ```
/// use tessera::query::{field, EXPR_DEPTH_MAX};
/// #[derive(serde::Serialize, serde::Deserialize, tessera::collection::Record)]
/// struct Task { #[record(key)] id: u32 }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let tasks = db.collection::<Task>()?;
/// let deep = (0..EXPR_DEPTH_MAX).fold(field("id").eq(0), |query, i| query.and(field("id").ne(i as i64)));
/// let refused = tasks.filter(deep).count(&db).unwrap_err();
/// assert!(matches!(refused, tessera::Error::QueryTooDeep { depth_max: EXPR_DEPTH_MAX, .. }), "{refused}");
/// # Ok::<(), tessera::Error>(())
/// ```
pub const EXPR_DEPTH_MAX: usize = 128;

/// The children of one node, borrowed.
fn children(expr: &Expr) -> impl Iterator<Item = &Expr> {
    let (first, second, third): (Option<&Expr>, Option<&Expr>, Option<&Expr>) = match expr {
        Expr::Field(_) | Expr::Literal(_) | Expr::Variant(..) => (None, None, None),
        Expr::Arith(a, _, b) | Expr::Compare(a, _, b) | Expr::And(a, b) | Expr::Or(a, b) => (Some(a), Some(b), None),
        Expr::Between(a, b, c) => (Some(a), Some(b), Some(c)),
        Expr::In(a, ..) | Expr::IsNull(a, _) | Expr::Str(a, ..) | Expr::Contains(a, _) | Expr::Not(a) => (Some(a), None, None),
    };
    first.into_iter().chain(second).chain(third)
}

/// Whether `expr` is at most `depth_max` levels deep (a leaf is 1). Iterative, with an
/// explicit stack; it stops at the first path longer than `depth_max`, so it visits at most
/// every node once.
pub(crate) fn within_depth(expr: &Expr, depth_max: usize) -> bool {
    // On the stack for the usual small query: this runs once per query, a fetch by key included.
    let mut stack: smallvec::SmallVec<[(&Expr, usize); 16]> = smallvec::smallvec![(expr, 1)];
    while let Some((node, depth)) = stack.pop() {
        if depth > depth_max {
            return false;
        }
        stack.extend(children(node).map(|child| (child, depth + 1)));
    }
    true
}

/// Refuses a query on `collection` whose expression is deeper than [`EXPR_DEPTH_MAX`]: the
/// one check made before any recursive walk of a query's expression.
pub(crate) fn check_query_depth(expr: &Expr, collection: &str) -> Result<()> {
    if within_depth(expr, EXPR_DEPTH_MAX) {
        return Ok(());
    }
    Err(Error::QueryTooDeep { collection: collection.to_owned(), depth_max: EXPR_DEPTH_MAX })
}

/// Takes the boxed children out of `expr`, leaving cheap leaves in their place.
fn take_children(expr: &mut Expr, out: &mut smallvec::SmallVec<[Expr; 8]>) {
    let mut take = |boxed: &mut Box<Expr>| out.push(std::mem::replace(&mut **boxed, Expr::Literal(super::Literal::Null)));
    match expr {
        Expr::Field(_) | Expr::Literal(_) | Expr::Variant(..) => {}
        Expr::Arith(a, _, b) | Expr::Compare(a, _, b) | Expr::And(a, b) | Expr::Or(a, b) => {
            take(a);
            take(b);
        }
        Expr::Between(a, b, c) => {
            take(a);
            take(b);
            take(c);
        }
        Expr::In(a, ..) | Expr::IsNull(a, _) | Expr::Str(a, ..) | Expr::Contains(a, _) | Expr::Not(a) => take(a),
    }
}

impl Drop for Expr {
    /// Drops the tree with an explicit stack: the derived, recursive drop of a tree built
    /// from 100,000 `.and(…)` calls overflowed the stack.
    fn drop(&mut self) {
        let is_leaf = |expr: &Expr| matches!(expr, Expr::Field(_) | Expr::Literal(_) | Expr::Variant(..));
        if is_leaf(self) || children(self).all(is_leaf) {
            return; // the drop glue goes one level down, no deeper
        }
        let mut pending = smallvec::SmallVec::new();
        take_children(self, &mut pending);
        while let Some(mut node) = pending.pop() {
            take_children(&mut node, &mut pending);
            // `node` now has only leaves below it: its own drop returns at once.
        }
    }
}
