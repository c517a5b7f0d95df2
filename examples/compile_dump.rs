fn main() {
    let f = std::env::args().nth(1).unwrap();
    let text = std::fs::read_to_string(&f).unwrap();
    let m = tpusim::hlo::parse_module(&f, &text).unwrap();
    let c = tpusim::passes::compile(&m, &Default::default()).unwrap();
    print!("{}", tpusim::hlo::print_module(&c.module));
    for k in &c.kernels {
        eprintln!(
            "{} {:?} {:?} {} comp={}",
            k.name, k.kind, k.hero, k.hero_name, k.computation_name
        );
    }
    for (ci, ii, idx) in tpusim::passes::configurable_nodes(&m) {
        let c = m.comp(ci);
        eprintln!(
            "cfg node {} {} {}",
            idx,
            c.instr(ii).name,
            c.instr(ii).opcode
        );
    }
}
