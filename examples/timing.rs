use std::time::Instant;
fn main() {
    let f = std::env::args().nth(1).unwrap();
    let text = std::fs::read_to_string(&f).unwrap();
    let m = tpusim::hlo::parse_module(&f, &text).unwrap();
    let cfg = tpusim::passes::CompilationConfig::default();
    let t = Instant::now();
    let c = tpusim::passes::compile(&m, &cfg).unwrap();
    println!(
        "compile default {:?} kernels={}",
        t.elapsed(),
        c.kernels.len()
    );
    let r = tpusim::passes::CompilationConfig::random_layouts(&m, 7);
    let t = Instant::now();
    let c2 = tpusim::passes::compile(&m, &r).unwrap();
    println!(
        "compile random {:?} kernels={}",
        t.elapsed(),
        c2.kernels.len()
    );
    let t = Instant::now();
    let lp = tpusim::kernels::LoweredProgram::new(&c.module).unwrap();
    println!(
        "lower {:?} kernels={} distinct={}",
        t.elapsed(),
        lp.kernels.len(),
        lp.distinct_kernels()
    );
    let target = tpusim::tpu::TpuTarget::v3();
    let t = Instant::now();
    let e = lp.estimate(&target, &Default::default()).unwrap();
    println!("estimate {:?} total_ns={}", t.elapsed(), e.total_ns);
    let lp2 = tpusim::kernels::LoweredProgram::new(&c2.module).unwrap();
    let e2 = lp2.estimate(&target, &Default::default()).unwrap();
    println!("random-layout total_ns={}", e2.total_ns);
}
