//! Arbitrary text through the query parser: an error with a column inside the text, or an
//! expression whose printed form parses back to the same expression.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera::query::Expr;

fuzz_target!(|text: &str| {
    match Expr::parse(text) {
        Ok(expr) => {
            let printed = expr.to_string();
            let again = Expr::parse(&printed).unwrap_or_else(|e| panic!("{printed:?} does not parse back: {e}"));
            assert_eq!(again, expr, "{printed:?}");
        }
        Err(error) => assert!(error.column >= 1 && error.column <= text.chars().count() + 1, "column {} of {text:?}", error.column),
    }
});
