fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    for f in args {
        let src = std::fs::read_to_string(&f).unwrap();
        for (i, (_, part)) in tpusim::hlo::split_modules(&src).into_iter().enumerate() {
            match tpusim::hlo::parse_module(&f, part) {
                Ok(m) => {
                    let text = tpusim::hlo::print_module(&m);
                    let out = format!(
                        "/tmp/rt/{}_{i}.hlo",
                        std::path::Path::new(&f)
                            .file_name()
                            .unwrap()
                            .to_str()
                            .unwrap()
                    );
                    std::fs::write(&out, &text).unwrap();
                    match tpusim::hlo::parse_module(&out, &text) {
                        Ok(m2) => println!("{} {f}#{i}", if m2 == m { "same" } else { "DIFF" }),
                        Err(e) => println!("REPARSE-ERR {e}"),
                    }
                }
                Err(e) => println!("ERR {e}"),
            }
        }
    }
}
