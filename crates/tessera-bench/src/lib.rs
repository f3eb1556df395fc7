//! Shared by the benchmark binary and the profiling examples: the data models.

pub mod crud_model;
