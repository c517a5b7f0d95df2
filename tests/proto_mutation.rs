//! Truncated or corrupted `.pb` input gives an error, never a panic: a seeded
//! loop truncates and byte-mutates real corpus modules and generated tuning
//! files thousands of times and runs every reader on the result.

mod proto_common;

use proto_common::{corpus_pbs, jax_corpus, synthetic_layout, synthetic_tiles, Rng};
use tpusim::proto::{
    detect, inspect_bytes, read_hlo_module_proto, read_module_tuning, read_tuning, read_tuning_set,
    write_module_tuning, write_tuning_set, ModuleView, ProtoError,
};

#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    err: usize,
}

/// Runs every reader on `bytes`; only Ok/Err is possible, a panic fails the
/// test. Returns whether the module reader (or the tuning reader for
/// `tuning == true`) rejected the input.
fn run_all(bytes: &[u8], tuning: bool, t: &mut Tally) {
    let _ = detect(bytes);
    let module = read_hlo_module_proto(bytes);
    let mtd = read_module_tuning(bytes);
    let td = read_tuning_set(bytes);
    let any = read_tuning(bytes);
    let _ = inspect_bytes(bytes);
    if let Ok(v) = ModuleView::decode(bytes) {
        // on-demand attribute decoding must not panic either
        for i in v
            .computations
            .iter()
            .flat_map(|c| c.instructions())
            .filter_map(Result::ok)
        {
            let _ = i.shape();
            let _ = i.message::<tpusim::proto::xla::Window>(15);
            let _ = i.message::<tpusim::proto::xla::LiteralProto>(8);
            let _ = (
                i.int(25),
                i.float(24),
                i.string(63),
                i.ints(34),
                i.shapes(57),
            );
        }
        let _ = v.entry_index();
        // and the IR conversion on top of it
        let _ = tpusim::proto::module_from_view(&v);
    }
    let rejected = if tuning {
        any.is_err()
    } else {
        module.is_err()
    };
    for e in [module.err(), mtd.err(), td.err()].into_iter().flatten() {
        // every decode error names the message and says what is wrong
        if let ProtoError::Decode { .. } = e {
            let s = e.to_string();
            assert!(s.starts_with("not a valid "), "{s}");
            assert!(s.contains("(truncated or corrupt file?)"), "{s}");
        }
    }
    if rejected {
        t.err += 1;
    } else {
        t.ok += 1;
    }
}

fn mutate(rng: &mut Rng, src: &[u8]) -> Vec<u8> {
    let mut b = src.to_vec();
    match rng.below(4) {
        // truncate
        0 => b.truncate(rng.below(b.len() as u64) as usize),
        // overwrite 1..8 bytes
        1 => {
            for _ in 0..=rng.below(8) {
                let i = rng.below(b.len() as u64) as usize;
                b[i] = rng.next() as u8;
            }
        }
        // flip high bits (varint continuation) / wire types
        2 => {
            for _ in 0..=rng.below(4) {
                let i = rng.below(b.len() as u64) as usize;
                b[i] ^= [0x80, 0x07, 0x01, 0xff][rng.below(4) as usize];
            }
        }
        // delete or duplicate a range
        _ => {
            let i = rng.below(b.len() as u64) as usize;
            let n = (rng.below(16) as usize).min(b.len() - i);
            if rng.below(2) == 0 {
                b.drain(i..i + n);
            } else {
                let chunk: Vec<u8> = b[i..i + n].to_vec();
                b.splice(i..i, chunk);
            }
        }
    }
    b
}

fn hammer(name: &str, src: &[u8], tuning: bool, iters: usize, seed: u64) -> Tally {
    let mut rng = Rng(seed);
    let mut t = Tally::default();
    for _ in 0..iters {
        let b = mutate(&mut rng, src);
        run_all(&b, tuning, &mut t);
    }
    // strict prefixes ending inside the first field can never decode
    run_all(&src[..src.len().min(3)], tuning, &mut t);
    assert!(t.err > 0, "{name}: no mutation was rejected: {t:?}");
    t
}

#[test]
fn mutated_corpus_modules_never_panic() {
    let Some(dir) = jax_corpus("mutated_corpus_modules_never_panic") else {
        return;
    };
    let mut total = Tally::default();
    for (k, path) in corpus_pbs(&dir).iter().enumerate() {
        let src = std::fs::read(path).unwrap();
        // fewer iterations on the big files keep the test quick
        let iters = if src.len() > 100_000 { 150 } else { 500 };
        let t = hammer(
            &path.display().to_string(),
            &src,
            false,
            iters,
            1000 + k as u64,
        );
        total.ok += t.ok;
        total.err += t.err;
    }
    eprintln!("modules: {total:?}");
    assert!(total.ok + total.err > 4000);
}

#[test]
fn mutated_tuning_files_never_panic() {
    let Some(dir) = jax_corpus("mutated_tuning_files_never_panic") else {
        return;
    };
    let pbs = corpus_pbs(&dir);
    let small: Vec<_> = pbs
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .filter(|b| b.len() < 40_000)
        .map(|b| read_hlo_module_proto(&b).unwrap())
        .collect();
    assert!(small.len() >= 3);
    let layout = write_module_tuning(&synthetic_layout(small[0].clone(), 40, 5)).unwrap();
    let tiles = write_tuning_set(&synthetic_tiles(small.clone(), 6, 9)).unwrap();
    let a = hammer("layout", &layout, true, 2000, 77);
    let b = hammer("tiles", &tiles, true, 2000, 78);
    eprintln!("layout: {a:?} tiles: {b:?}");
}

#[test]
fn pathological_inputs_are_errors() {
    // deep nesting: 100,000 nested tuple shapes (field 3 shape, field 4 tuple_shapes)
    let mut deep = Vec::new();
    for _ in 0..100_000 {
        deep.extend_from_slice(&[0x22, 0x80, 0x80, 0x80, 0x80, 0x01]);
    }
    assert!(read_hlo_module_proto(&deep).is_err());
    // a length prefix claiming 2^62 bytes
    let huge = [0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f];
    assert!(read_hlo_module_proto(&huge).is_err());
    assert!(read_tuning(&huge).is_err());
    // an over-long varint
    let long = [
        0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ];
    assert!(read_hlo_module_proto(&long).is_err());
    // empty input: an empty module is valid protobuf, but not a tuning file
    assert!(read_hlo_module_proto(&[]).is_ok());
    assert!(read_tuning(&[]).is_err());
}
