//! Shared by the benchmark binary and the profiling examples: the data models, and the report
//! that turns the benchmark results into charts and markdown.

pub mod crud_model;
pub mod documents_model;
pub mod people;
pub mod report;
