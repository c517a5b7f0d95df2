//! The `tpusim` command line: one file per command; this file holds the argument
//! definitions and the dispatcher.

/// `print!` to stdout that returns the write error instead of panicking (a closed
/// pipe, as in `tpusim estimate … | head`, then ends the command quietly: see [`run`]).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($t)*)
    }};
}

/// `println!` that returns the write error (see [`out!`]).
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($t)*)
    }};
}

mod analyze;
mod compare;
mod compile;
mod generate;
mod input;
mod inspect;
mod list;
mod parse;
mod predict;
mod replay;
mod report;
mod score;
mod sweep;
mod sweep_target;

pub use compile::target;
pub use generate::inputs as generate_inputs;
pub use input::{load_modules, modules_from_bytes, LoadError, LoadedModule};

use clap::{Parser, Subcommand};

/// tpusim: compile XLA HLO the way XLA's TPU pipeline would, estimate its runtime
/// analytically, and write TpuGraphs samples.
#[derive(Parser, Debug)]
#[command(name = "tpusim", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse HLO modules and print one summary line per file.
    Parse(parse::ParseArgs),
    /// Print a module as canonical HLO text.
    Print(parse::PrintArgs),
    /// Check every instruction's shape against its operands (shape inference).
    Verify(analyze::VerifyArgs),
    /// XLA-style cost analysis: flops, transcendentals, bytes accessed.
    Analyze(analyze::AnalyzeArgs),
    /// Compile under a configuration: layout assignment and fusion.
    Compile(compile::CompileArgs),
    /// Estimate the runtime on a TPU, per kernel and in total.
    Estimate(compile::EstimateArgs),
    /// The full derivation of one kernel's runtime, in words and numbers (or JSON).
    Explain(compile::ExplainArgs),
    /// List a module's kernels and configurable nodes with their indices.
    List(list::ListArgs),
    /// Write TpuGraphs samples (tile or layout collection).
    #[command(subcommand)]
    Generate(generate::Collection),
    /// Score Kaggle-style submissions, and the analytical model, against npz runtimes
    /// (official metrics, side by side).
    Score(score::ScoreArgs),
    /// The analytical model's runtime of every configuration row of TpuGraphs files: npz
    /// (the module rebuilt from the features), raw .pb, or a module under --config files.
    Predict(predict::PredictArgs),
    /// Predictors side by side (the analytical model one of them): the official metrics
    /// per collection and per graph, and an HTML report with the plots.
    Compare(compare::CompareArgs),
    /// Summarise TpuGraphs files (.npz): kind, sizes, runtime range, schema problems.
    Inspect(inspect::InspectArgs),
    /// How runtime moves with one choice: a kernel's tile, a node's layout, or the TPU
    /// generation (table, CSV, SVG chart).
    #[command(subcommand)]
    Sweep(sweep::SweepKind),
    /// Every kernel of a program on the target's roofline: arithmetic intensity against
    /// achieved FLOP/s under the MXU and HBM ceilings (table, CSV, JSON, SVG chart).
    Roofline(report::RooflineArgs),
    /// One self-contained HTML page to read: the program summary, every kernel, the
    /// roofline, the costliest kernels explained, a tile and a layout sweep.
    Report(report::ReportArgs),
}

/// Run the CLI; returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Parse(a) => parse::parse(a),
        Command::Print(a) => parse::print(a),
        Command::Inspect(a) => inspect::inspect(a),
        Command::Verify(a) => analyze::verify(a),
        Command::Analyze(a) => analyze::analyze(a),
        Command::Compile(a) => compile::compile_cmd(a),
        Command::Estimate(a) => compile::estimate_cmd(a),
        Command::Explain(a) => compile::explain_cmd(a),
        Command::List(a) => list::list(a),
        Command::Generate(c) => generate::generate(c),
        Command::Score(a) => score::score(a),
        Command::Predict(a) => predict::predict(a),
        Command::Compare(a) => compare::compare_cmd(a),
        Command::Sweep(k) => sweep::sweep(k),
        Command::Roofline(a) => report::roofline_cmd(a),
        Command::Report(a) => report::report_cmd(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // A closed stdout (e.g. `| head`) is not an error of ours.
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return 0;
            }
            eprintln!("{}", error_line(&e, None));
            1
        }
    }
}

/// How a command prints an error that ends it (or, with `file`, one input's error): an
/// input file that could not be loaded names itself and says `error:` (`FILE[:LINE:COL]:
/// error: ...`); any other error gets `error: ` and the file, when given, in front.
pub(crate) fn error_line(e: &anyhow::Error, file: Option<&std::path::Path>) -> String {
    if e.chain().count() == 1 && e.downcast_ref::<LoadError>().is_some() {
        return e.to_string();
    }
    match file {
        Some(f) => format!("error: {}: {e:#}", f.display()),
        None => format!("error: {e:#}"),
    }
}
