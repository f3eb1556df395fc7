//! Arbitrary text through the query parser, as a predicate and as a whole query (`order by`,
//! `limit`, `offset`): an error with a column inside the text, or a value whose printed form
//! parses back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera::query::{Expr, Statement};

fuzz_target!(|text: &str| {
    let columns = text.chars().count() + 1;
    match Expr::parse(text) {
        Ok(expr) => {
            let printed = expr.to_string();
            let again = Expr::parse(&printed).unwrap_or_else(|e| panic!("{printed:?} does not parse back: {e}"));
            assert_eq!(again, expr, "{printed:?}");
        }
        Err(error) => assert!(error.column >= 1 && error.column <= columns, "column {} of {text:?}", error.column),
    }
    match Statement::parse(text) {
        Ok(statement) => {
            let printed = statement.to_string();
            let again = Statement::parse(&printed).unwrap_or_else(|e| panic!("{printed:?} does not parse back: {e}"));
            assert_eq!(again, statement, "{printed:?}");
        }
        Err(error) => assert!(error.column >= 1 && error.column <= columns, "column {} of {text:?}", error.column),
    }
});
