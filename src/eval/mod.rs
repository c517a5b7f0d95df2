//! Evaluation of runtime predictions against measured runtimes: the
//! TpuGraphs / Kaggle "Fast or Slow" metrics (see [`metrics`]).

pub mod compare;
pub mod csv_rows;
pub mod metrics;
pub mod score;
