fn main() {
    std::process::exit(tpusim::cli::run());
}
