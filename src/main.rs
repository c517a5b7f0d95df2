/// mimalloc: parsing, compiling and generating make many small allocations, and it is
/// about 10% faster than the system allocator on them (docs/architecture.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(tpusim::cli::run());
}
