//! NPY/NPZ I/O: round trips, NumPy byte compatibility, the shared TpuGraphs
//! checker, atomic writes, corrupt-input robustness and the summary.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use indexmap::IndexMap;
use tpusim::dataset::npz::*;

// ---------------------------------------------------------------------------
// Synthetic TpuGraphs files
// ---------------------------------------------------------------------------

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    fn below(&mut self, m: u64) -> u64 {
        self.next() % m
    }
}

/// node_feat (n,140) f32 that satisfies the checker: is_root 0/1, one f32
/// element-type bit, small integer features elsewhere.
fn node_feat(n: usize, rng: &mut Rng) -> NpyArray {
    let mut v = vec![0f32; n * 140];
    for row in 0..n {
        let r = &mut v[row * 140..(row + 1) * 140];
        r[0] = if row + 1 == n { 1.0 } else { 0.0 };
        r[13] = 1.0; // f32 one-hot
        for x in &mut r[21..29] {
            *x = rng.below(64) as f32;
        }
        r[28] = r[21..27].iter().map(|&x| x.max(1.0)).product();
    }
    NpyArray::from_vec(vec![n, 140], v).unwrap()
}

/// Edges [u, v] with u > v, sorted by (u, v), unique.
fn edges(n: usize, rng: &mut Rng) -> NpyArray {
    let mut e = Vec::new();
    for u in 1..n as i64 {
        let mut ops: BTreeSet<i64> = BTreeSet::new();
        for _ in 0..1 + rng.below(3) {
            ops.insert(rng.below(u as u64) as i64);
        }
        for v in ops {
            e.push(u);
            e.push(v);
        }
    }
    let m = e.len() / 2;
    NpyArray::from_vec(vec![m, 2], e).unwrap()
}

fn tile_arrays(seed: u64, n: usize, c: usize) -> IndexMap<String, NpyArray> {
    let mut rng = Rng(seed);
    let mut a = IndexMap::new();
    a.insert("node_feat".into(), node_feat(n, &mut rng));
    let ops: Vec<u8> = (0..n).map(|_| rng.below(121) as u8).collect();
    a.insert(
        "node_opcode".into(),
        NpyArray::from_vec(vec![n], ops).unwrap(),
    );
    a.insert("edge_index".into(), edges(n, &mut rng));
    let cf: Vec<f32> = (0..c * 24).map(|_| rng.below(128) as f32).collect();
    a.insert(
        "config_feat".into(),
        NpyArray::from_vec(vec![c, 24], cf).unwrap(),
    );
    let rt: Vec<i64> = (0..c).map(|_| 1000 + rng.below(100_000) as i64).collect();
    a.insert(
        "config_runtime".into(),
        NpyArray::from_vec(vec![c], rt).unwrap(),
    );
    let nz: Vec<i64> = (0..c).map(|_| 50_000 + rng.below(10) as i64).collect();
    a.insert(
        "config_runtime_normalizers".into(),
        NpyArray::from_vec(vec![c], nz).unwrap(),
    );
    a
}

fn layout_arrays(seed: u64, n: usize, c: usize, nc: usize) -> IndexMap<String, NpyArray> {
    let mut rng = Rng(seed);
    let mut a = IndexMap::new();
    a.insert("node_feat".into(), node_feat(n, &mut rng));
    let ops: Vec<u8> = (0..n).map(|_| rng.below(121) as u8).collect();
    a.insert(
        "node_opcode".into(),
        NpyArray::from_vec(vec![n], ops).unwrap(),
    );
    a.insert("edge_index".into(), edges(n, &mut rng));
    let step = n / nc;
    let ids: Vec<i64> = (0..nc).map(|k| (k * step + 1) as i64).collect();
    a.insert(
        "node_config_ids".into(),
        NpyArray::from_vec(vec![nc], ids).unwrap(),
    );
    let ncf: Vec<f32> = (0..c * nc * 18)
        .map(|_| rng.below(7) as f32 - 1.0)
        .collect();
    a.insert(
        "node_config_feat".into(),
        NpyArray::from_vec(vec![c, nc, 18], ncf).unwrap(),
    );
    a.insert(
        "node_splits".into(),
        NpyArray::from_vec(vec![1, 3], vec![0i64, (n / 2) as i64, n as i64]).unwrap(),
    );
    let rt: Vec<i64> = (0..c)
        .map(|_| 1_000_000 + rng.below(1_000_000) as i64)
        .collect();
    a.insert(
        "config_runtime".into(),
        NpyArray::from_vec(vec![c], rt).unwrap(),
    );
    a
}

/// Writes `arrays`; streams `stream_key` row by row through `begin_array`.
fn write_arrays(
    path: &Path,
    arrays: &IndexMap<String, NpyArray>,
    compression: Compression,
    stream_key: Option<&str>,
) {
    let mut w = NpzWriter::create_with(path, compression).unwrap();
    for (name, arr) in arrays {
        if Some(name.as_str()) == stream_key {
            let mut s = w.begin_array(name, arr.dtype(), arr.shape()).unwrap();
            let data = arr.as_slice::<f32>().unwrap();
            let row = arr.shape()[1..].iter().product::<usize>().max(1);
            for chunk in data.chunks(row) {
                s.write(chunk).unwrap();
            }
            assert_eq!(s.remaining(), 0);
            s.finish().unwrap();
        } else {
            w.add_array(name, arr).unwrap();
        }
    }
    w.finish().unwrap();
}

fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn run_python(script: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Official collection tree: npz/tile/xla/train, npz/layout/xla/default/train.
fn write_tree(root: &Path) -> (PathBuf, PathBuf) {
    let tile_dir = root.join("npz/tile/xla/train");
    let layout_dir = root.join("npz/layout/xla/default/train");
    fs::create_dir_all(&tile_dir).unwrap();
    fs::create_dir_all(&layout_dir).unwrap();
    let tile = tile_dir.join("alexnet_train_batch_32_-1bae27a41d70f4dc.npz");
    let layout = layout_dir.join("resnet50.4x4.fp16.npz");
    write_arrays(&tile, &tile_arrays(1, 12, 30), Compression::Stored, None);
    write_arrays(
        &layout,
        &layout_arrays(2, 40, 20, 5),
        Compression::Stored,
        Some("node_config_feat"),
    );
    (tile, layout)
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn header_bytes_match_numpy_layout() {
    let h = encode_npy_header(DType::F32, &[7, 140]);
    assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
    assert_eq!(h.len() % 64, 0, "data start is 64-byte aligned");
    assert_eq!(u16::from_le_bytes([h[8], h[9]]) as usize, h.len() - 10);
    let text = std::str::from_utf8(&h[10..]).unwrap();
    assert!(text.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (7, 140), }"));
    assert!(text.ends_with(" \n"));
    let h1 = encode_npy_header(DType::U8, &[5]);
    assert!(std::str::from_utf8(&h1[10..])
        .unwrap()
        .starts_with("{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }"));
    let h0 = encode_npy_header(DType::I64, &[]);
    assert!(std::str::from_utf8(&h0[10..])
        .unwrap()
        .starts_with("{'descr': '<i8', 'fortran_order': False, 'shape': (), }"));
    // Parse back.
    for (dt, shape) in [
        (DType::F32, vec![7, 140]),
        (DType::U8, vec![5]),
        (DType::I64, vec![]),
        (DType::F64, vec![2, 3, 4]),
    ] {
        let bytes = encode_npy_header(dt, &shape);
        let parsed = read_npy_header(&mut Cursor::new(&bytes)).unwrap();
        assert_eq!(
            (
                parsed.dtype,
                parsed.shape,
                parsed.version,
                parsed.header_len
            ),
            (dt, shape, (1, 0), bytes.len())
        );
    }
}

#[test]
fn header_parser_accepts_numpy_variants_and_rejects_bad_ones() {
    let mk = |major: u8, dict: &str| {
        let mut v = b"\x93NUMPY".to_vec();
        v.push(major);
        v.push(0);
        if major == 1 {
            v.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        } else {
            v.extend_from_slice(&(dict.len() as u32).to_le_bytes());
        }
        v.extend_from_slice(dict.as_bytes());
        v
    };
    let ok = [
        (
            1,
            "{'shape': (3L, 4L), 'fortran_order': False, 'descr': '<i4'}\n",
            DType::I32,
            vec![3, 4],
        ),
        (
            2,
            "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (2,)}  \n",
            DType::F64,
            vec![2],
        ),
        (
            3,
            "{'descr': '|u1', 'fortran_order': True, 'shape': (1, 9), }\n",
            DType::U8,
            vec![1, 9],
        ),
        (
            1,
            "{'descr': 'u1', 'fortran_order': False, 'shape': (), }\n",
            DType::U8,
            vec![],
        ),
    ];
    for (major, dict, dt, shape) in ok {
        let h = read_npy_header(&mut Cursor::new(mk(major, dict))).unwrap();
        assert_eq!((h.dtype, h.shape, h.version.0), (dt, shape, major));
    }
    let bad = [
        (
            1,
            "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n",
            "big-endian",
        ),
        (
            1,
            "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }\n",
            "unsupported dtype",
        ),
        (
            1,
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n",
            "Fortran",
        ),
        (
            1,
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n",
            "structured",
        ),
        (1, "{'descr': '<f4', 'shape': (2,), }\n", "lacks"),
        (
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n",
            "unexpected key",
        ),
        (4, "{}", "version"),
    ];
    for (major, dict, needle) in bad {
        let e = read_npy_header(&mut Cursor::new(mk(major, dict))).unwrap_err();
        assert!(e.0.contains(needle), "{dict}: {e}");
    }
    assert!(
        read_npy_header(&mut Cursor::new(b"PK\x03\x04xxxxxxx".to_vec()))
            .unwrap_err()
            .0
            .contains("magic")
    );
}

#[test]
fn tile_and_layout_round_trip() {
    let dir = tmpdir();
    for compression in [Compression::Stored, Compression::Deflated] {
        let tile = tile_arrays(11, 9, 17);
        let layout = layout_arrays(12, 30, 16, 4);
        let tp = dir.path().join(format!("tile_{compression:?}.npz"));
        let lp = dir.path().join(format!("layout_{compression:?}.npz"));
        write_arrays(&tp, &tile, compression, None);
        write_arrays(&lp, &layout, compression, Some("node_config_feat"));
        assert_eq!(read_npz(&tp).unwrap(), tile);
        assert_eq!(read_npz(&lp).unwrap(), layout);

        let mut r = NpzReader::open(&lp).unwrap();
        assert_eq!(r.names(), layout.keys().cloned().collect::<Vec<_>>());
        let h = r.header("node_config_feat").unwrap();
        assert_eq!((h.dtype, h.shape.clone()), (DType::F32, vec![16, 4, 18]));
        // Streaming visit returns the same elements in order.
        let mut seen = Vec::new();
        r.visit("node_config_feat", |c| {
            if let ArrayChunk::F32(v) = c {
                seen.extend_from_slice(v);
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen.as_slice(),
            layout["node_config_feat"].as_slice::<f32>().unwrap()
        );
        // Shipped dtypes.
        let all = r.read_all().unwrap();
        let dts: Vec<(&str, DType)> = all.iter().map(|(k, a)| (k.as_str(), a.dtype())).collect();
        assert_eq!(
            dts,
            vec![
                ("node_feat", DType::F32),
                ("node_opcode", DType::U8),
                ("edge_index", DType::I64),
                ("node_config_ids", DType::I64),
                ("node_config_feat", DType::F32),
                ("node_splits", DType::I64),
                ("config_runtime", DType::I64),
            ]
        );
    }
    // Deflate really compresses (node_config_feat values are small ints).
    let s = fs::metadata(dir.path().join("layout_Stored.npz"))
        .unwrap()
        .len();
    let d = fs::metadata(dir.path().join("layout_Deflated.npz"))
        .unwrap()
        .len();
    assert!(d < s / 2, "deflated {d} vs stored {s}");
    // Other dtypes and shapes.
    let p = dir.path().join("misc.npz");
    let f64a =
        NpyArray::from_vec(vec![2, 2], vec![1.5f64, -2.0, f64::MAX, f64::MIN_POSITIVE]).unwrap();
    let i32a = NpyArray::from_vec(vec![3], vec![i32::MIN, 0, i32::MAX]).unwrap();
    let scalar = NpyArray::from_vec(vec![], vec![42i64]).unwrap();
    let empty = NpyArray::from_vec(vec![0, 2], Vec::<i64>::new()).unwrap();
    write_npz(
        &p,
        &[("a", &f64a), ("b", &i32a), ("s", &scalar), ("e", &empty)],
        Compression::Stored,
    )
    .unwrap();
    let back = read_npz(&p).unwrap();
    assert_eq!(
        (&back["a"], &back["b"], &back["s"], &back["e"]),
        (&f64a, &i32a, &scalar, &empty)
    );
}

#[test]
fn output_is_deterministic_and_atomic() {
    let dir = tmpdir();
    let a = dir.path().join("a.npz");
    let b = dir.path().join("b.npz");
    let arrays = layout_arrays(3, 25, 8, 3);
    write_arrays(&a, &arrays, Compression::Stored, Some("node_config_feat"));
    write_arrays(&b, &arrays, Compression::Stored, None);
    assert_eq!(
        fs::read(&a).unwrap(),
        fs::read(&b).unwrap(),
        "streamed == whole, byte-identical"
    );

    // A dropped writer leaves nothing behind.
    let c = dir.path().join("c.npz");
    {
        let mut w = NpzWriter::create(&c).unwrap();
        w.add_array("x", &arrays["node_feat"]).unwrap();
    }
    assert!(!c.exists());
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        2,
        "no temporary file left"
    );

    // An incomplete streamed array makes finish fail, without output.
    let mut w = NpzWriter::create(&c).unwrap();
    {
        let mut s = w.begin_array("x", DType::F32, &[4, 2]).unwrap();
        s.write(&[1.0f32, 2.0, 3.0]).unwrap();
        assert!(s.write(&[1i64]).is_err(), "wrong dtype");
        assert!(s.write(&[0f32; 6]).is_err(), "too many elements");
    }
    let e = w
        .add_array("y", &arrays["node_opcode"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("'x.npy' was not completed"), "{e}");
    assert!(w.finish().is_err());
    assert!(!c.exists());

    let mut w = NpzWriter::create(&c).unwrap();
    let s = w.begin_array("x", DType::I64, &[3]).unwrap();
    let e = s.finish().unwrap_err().to_string();
    assert!(e.contains("3 elements missing"), "{e}");
    drop(w);
    assert!(!c.exists());

    // Duplicate names and shape mismatches are refused.
    let mut w = NpzWriter::create(&c).unwrap();
    w.add_array("x", &arrays["node_opcode"]).unwrap();
    assert!(w
        .add_array("x.npy", &arrays["node_opcode"])
        .unwrap_err()
        .to_string()
        .contains("written twice"));
    assert!(matches!(
        w.add_slice("z", &[2, 2], &[1u8, 2, 3]),
        Err(NpzError::ShapeMismatch {
            expected: 4,
            actual: 3,
            ..
        })
    ));
    assert!(NpyArray::from_vec(vec![2, 3], vec![0f32; 5]).is_err());
}

#[test]
fn clear_errors_for_bad_files() {
    let dir = tmpdir();
    let missing = dir.path().join("nope.npz");
    let e = read_npz(&missing).unwrap_err().to_string();
    assert!(e.contains("nope.npz") && e.contains("open"), "{e}");

    let text = dir.path().join("text.npz");
    fs::write(&text, b"hello, not a zip").unwrap();
    let e = read_npz(&text).unwrap_err().to_string();
    assert!(
        e.contains("text.npz") && e.contains("not a readable npz"),
        "{e}"
    );

    // Valid zip, bad members: written with the zip crate directly.
    let bad = dir.path().join("bad.npz");
    {
        let mut z = zip::ZipWriter::new(fs::File::create(&bad).unwrap());
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        z.start_file("short.npy", o).unwrap();
        z.write_all(&encode_npy_header(DType::F32, &[100])).unwrap();
        z.write_all(&[0u8; 10]).unwrap();
        z.start_file("long.npy", o).unwrap();
        z.write_all(&encode_npy_header(DType::U8, &[2])).unwrap();
        z.write_all(&[1u8, 2, 3]).unwrap();
        z.start_file("junk.npy", o).unwrap();
        z.write_all(b"junk").unwrap();
        z.finish().unwrap();
    }
    let mut r = NpzReader::open(&bad).unwrap();
    let e = r.read("short").unwrap_err().to_string();
    assert!(
        e.contains("bad.npz") && e.contains("'short.npy'") && e.contains("truncated"),
        "{e}"
    );
    let e = r.read("long").unwrap_err().to_string();
    assert!(
        e.contains("'long.npy'") && e.contains("after the 2 data bytes"),
        "{e}"
    );
    let e = r.read("junk").unwrap_err().to_string();
    assert!(e.contains("'junk.npy'") && e.contains("NPY"), "{e}");
    let e = r.read("absent").unwrap_err().to_string();
    assert!(
        e.contains("no array named 'absent'") && e.contains("short.npy"),
        "{e}"
    );
    assert!(summarize_npz(&bad).is_err() || !summarize_npz(&bad).unwrap().is_valid());

    // Flipping a data byte of a stored member is caught by the CRC.
    let good = dir.path().join("good.npz");
    write_arrays(&good, &tile_arrays(5, 6, 4), Compression::Stored, None);
    let mut bytes = fs::read(&good).unwrap();
    let pos = bytes.windows(9).position(|w| w == b"node_feat").unwrap() + 9 + 128 + 200;
    bytes[pos] ^= 0x40;
    let e = NpzReader::from_reader(Cursor::new(bytes), "flipped.npz")
        .unwrap()
        .read("node_feat")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("flipped.npz") && e.contains("node_feat.npy") && e.contains("checksum"),
        "{e}"
    );
}

/// Reads and summarises possibly-corrupt bytes; must return, never panic.
fn exercise(bytes: Vec<u8>) -> (bool, bool) {
    match NpzReader::from_reader(Cursor::new(bytes), "fuzz.npz") {
        Err(e) => {
            assert!(e.to_string().contains("fuzz.npz"));
            (false, false)
        }
        Ok(mut r) => {
            let read_ok = r.read_all().is_ok();
            let names = r.names();
            for n in &names {
                let _ = r.header(n);
            }
            let sum_ok = r.summarize().is_ok();
            (read_ok, sum_ok)
        }
    }
}

#[test]
fn truncated_and_mutated_files_never_panic() {
    let dir = tmpdir();
    let mut originals = Vec::new();
    for (i, compression) in [Compression::Stored, Compression::Deflated]
        .into_iter()
        .enumerate()
    {
        let p = dir.path().join(format!("f{i}.npz"));
        write_arrays(&p, &layout_arrays(7 + i as u64, 6, 3, 2), compression, None);
        originals.push(fs::read(&p).unwrap());
        let p = dir.path().join(format!("t{i}.npz"));
        write_arrays(&p, &tile_arrays(9 + i as u64, 4, 2), compression, None);
        originals.push(fs::read(&p).unwrap());
    }
    let mut rng = Rng(99);
    let (mut ok, mut err, mut iterations) = (0usize, 0usize, 0usize);
    for orig in &originals {
        assert_eq!(exercise(orig.clone()), (true, true));
        // Every truncation length.
        for len in 0..orig.len() {
            let (a, _) = exercise(orig[..len].to_vec());
            if a {
                ok += 1
            } else {
                err += 1
            }
            iterations += 1;
        }
        // Random byte mutations (1-8 bytes each), biased toward headers.
        for _ in 0..3000 {
            let mut b = orig.clone();
            for _ in 0..1 + rng.below(8) {
                let pos = if rng.below(2) == 0 {
                    rng.below(b.len() as u64) as usize
                } else {
                    // Local header / npy header region or the central directory.
                    let window = 300.min(b.len());
                    if rng.below(2) == 0 {
                        rng.below(window as u64) as usize
                    } else {
                        b.len() - 1 - rng.below(window as u64) as usize
                    }
                };
                b[pos] = match rng.below(4) {
                    0 => 0,
                    1 => 0xff,
                    2 => b[pos] ^ (1 << rng.below(8)),
                    _ => rng.below(256) as u8,
                };
            }
            let (a, _) = exercise(b);
            if a {
                ok += 1
            } else {
                err += 1
            }
            iterations += 1;
        }
    }
    println!("fuzz: {iterations} corrupted inputs, {ok} still read, {err} rejected with errors");
    assert!(iterations > 12_000);
    assert!(err > iterations / 2, "most corruptions must be detected");
}

#[test]
fn summary_of_valid_files() {
    let dir = tmpdir();
    let (tile, layout) = write_tree(dir.path());
    let t = summarize_npz(&tile).unwrap();
    assert_eq!(t.kind, GraphKind::Tile);
    assert_eq!(
        (t.nodes, t.configs, t.config_nodes),
        (Some(12), Some(30), None)
    );
    let m = read_npz(&tile).unwrap()["edge_index"].shape()[0];
    assert_eq!(t.edges, Some(m));
    let rt = read_npz(&tile).unwrap()["config_runtime"]
        .as_slice::<i64>()
        .unwrap()
        .to_vec();
    assert_eq!(t.runtime_min, Some(*rt.iter().min().unwrap() as f64));
    assert_eq!(t.runtime_max, Some(*rt.iter().max().unwrap() as f64));
    assert!(t.is_valid(), "{t}");
    let l = summarize_npz(&layout).unwrap();
    assert_eq!(l.kind, GraphKind::Layout);
    assert_eq!(
        (l.nodes, l.configs, l.config_nodes, l.splits),
        (Some(40), Some(20), Some(5), Some(3))
    );
    assert!(l.is_valid(), "{l}");
    let text = l.to_string();
    assert!(
        text.contains("kind:    layout") && text.contains("schema:  OK"),
        "{text}"
    );
    assert!(
        text.contains("node_config_feat  float32  (20, 5, 18)"),
        "{text}"
    );
    let json = serde_json::to_value(&l).unwrap();
    assert_eq!(json["kind"], "layout");
    assert_eq!(json["config_nodes"], 5);
    assert_eq!(json["arrays"][4]["dtype"], "f32");
}

/// Files that break the schema in known ways, with the violations expected
/// (messages are worded like check_tpugraphs_npz.py's).
fn bad_files(dir: &Path) -> Vec<(PathBuf, Vec<&'static str>)> {
    let mut out = Vec::new();
    // Tile: float64 node_feat, reversed + unsorted edges, a zero runtime, int32 normalizers.
    let mut t = tile_arrays(21, 8, 5);
    let nf: Vec<f64> = t["node_feat"].data().to_f64_vec();
    t.insert(
        "node_feat".into(),
        NpyArray::from_vec(vec![8, 140], nf).unwrap(),
    );
    t.insert(
        "edge_index".into(),
        NpyArray::from_vec(vec![3, 2], vec![3i64, 1, 0, 2, 3, 1]).unwrap(),
    );
    let mut rt = t["config_runtime"].as_slice::<i64>().unwrap().to_vec();
    rt[2] = 0;
    t.insert(
        "config_runtime".into(),
        NpyArray::from_vec(vec![5], rt).unwrap(),
    );
    t.insert(
        "config_runtime_normalizers".into(),
        NpyArray::from_vec(vec![5], vec![7i32; 5]).unwrap(),
    );
    let p = dir.join("bad_tile.npz");
    write_arrays(&p, &t, Compression::Stored, None);
    out.push((
        p,
        vec![
            "node_feat must be float32 (n,140), is float64 (8, 140)",
            "edge_index rows must be [user, operand] with user > operand (nodes in post order)",
            "edge_index rows must be sorted by (user, operand)",
            "edge_index has duplicate rows",
            "config_runtime_normalizers must be int64 (c,), is int32 (5,)",
            "config_runtime must be positive nanoseconds",
        ],
    ));
    // Layout: out-of-range config value, descending ids, (s,) splits, one config.
    let mut l = layout_arrays(22, 20, 1, 3);
    let mut ncf = l["node_config_feat"].as_slice::<f32>().unwrap().to_vec();
    ncf[5] = 6.0;
    l.insert(
        "node_config_feat".into(),
        NpyArray::from_vec(vec![1, 3, 18], ncf).unwrap(),
    );
    l.insert(
        "node_config_ids".into(),
        NpyArray::from_vec(vec![3], vec![9i64, 4, 2]).unwrap(),
    );
    l.insert(
        "node_splits".into(),
        NpyArray::from_vec(vec![2], vec![0i64, 20]).unwrap(),
    );
    let p = dir.join("bad_layout.npz");
    write_arrays(&p, &l, Compression::Deflated, None);
    out.push((
        p,
        vec![
            "node_config_ids must be ascending node indices < n",
            "node_config_feat values must lie in -1..5",
            "node_splits must be int64 (1,s), is int64 (2,)",
            "a layout file needs at least 2 configs",
        ],
    ));
    // Layout missing node_splits; and a file of neither kind.
    let mut l = layout_arrays(23, 10, 3, 2);
    l.shift_remove("node_splits");
    let p = dir.join("no_splits.npz");
    write_arrays(&p, &l, Compression::Stored, None);
    out.push((p, vec!["layout: missing keys ['node_splits']"]));
    let p = dir.join("neither.npz");
    write_arrays(
        &p,
        &tile_arrays(24, 3, 2).into_iter().take(3).collect(),
        Compression::Stored,
        None,
    );
    out.push((
        p,
        vec!["neither config_feat (tile) nor node_config_feat (layout) present"],
    ));
    out
}

#[test]
fn summary_reports_schema_violations() {
    let dir = tmpdir();
    for (path, want) in bad_files(dir.path()) {
        let s = summarize_npz(&path).unwrap();
        assert_eq!(s.violations, want, "{}", path.display());
        assert!(!s.is_valid());
        assert!(s
            .to_string()
            .contains(&format!("{} violation(s)", want.len())));
    }
}

#[test]
fn python_checker_and_numpy_agree() {
    if !common::has(common::Need::Numpy, "python_checker_and_numpy_agree") {
        return;
    }
    let Some(shared) = common::shared("python_checker_and_numpy_agree") else {
        return;
    };
    let checker = shared.join("tools/check_tpugraphs_npz.py");
    let dir = tmpdir();
    let (tile, layout) = write_tree(dir.path());
    // Also a deflated copy of each kind.
    let extra = dir.path().join("npz/tile/xla/valid");
    fs::create_dir_all(&extra).unwrap();
    write_arrays(
        &extra.join("k_deflated.npz"),
        &tile_arrays(31, 7, 4),
        Compression::Deflated,
        None,
    );

    if checker.exists() {
        let out = Command::new("python3")
            .arg(&checker)
            .arg(dir.path().join("npz"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "checker failed:\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("3 passed, 0 failed"), "{text}");

        // On broken files the checker and our summary report the same messages.
        let bad_dir = tmpdir();
        for (path, want) in bad_files(bad_dir.path()) {
            let out = Command::new("python3")
                .arg(&checker)
                .arg(&path)
                .output()
                .unwrap();
            assert!(!out.status.success());
            let prefix = format!("{}: ", path.display());
            let py: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.strip_prefix(&prefix).map(str::to_string))
                .collect();
            let ours = summarize_npz(&path).unwrap().violations;
            assert_eq!(py, ours, "{}", path.display());
            assert_eq!(ours, want);
        }
    } else {
        println!("SKIP checker part: {} absent", checker.display());
    }

    // np.load: dtypes and shapes, and every member byte-identical to np.save.
    let script = r#"
import sys, io, zipfile, numpy as np
want = {
  'tile': {'node_feat': ('float32', (12, 140)), 'node_opcode': ('uint8', (12,)),
           'config_feat': ('float32', (30, 24)), 'config_runtime': ('int64', (30,)),
           'config_runtime_normalizers': ('int64', (30,))},
  'layout': {'node_feat': ('float32', (40, 140)), 'node_opcode': ('uint8', (40,)),
             'node_config_ids': ('int64', (5,)), 'node_config_feat': ('float32', (20, 5, 18)),
             'node_splits': ('int64', (1, 3)), 'config_runtime': ('int64', (20,))},
}
for kind, path in (('tile', sys.argv[1]), ('layout', sys.argv[2])):
    with np.load(path, allow_pickle=False) as z:
        d = {k: z[k] for k in z.files}
    for k, (dt, shape) in want[kind].items():
        assert str(d[k].dtype) == dt and d[k].shape == shape, (kind, k, d[k].dtype, d[k].shape)
    e = d['edge_index']
    assert e.dtype == np.int64 and e.ndim == 2 and e.shape[1] == 2
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
            raw = zf.read(info)
            buf = io.BytesIO(); np.save(buf, np.load(io.BytesIO(raw)))
            assert buf.getvalue() == raw, ('bytes differ from np.save', kind, info.filename)
print('numpy ok')
"#;
    let (ok, text) = run_python(script, &[tile.to_str().unwrap(), layout.to_str().unwrap()]);
    assert!(ok && text.contains("numpy ok"), "{text}");
}

#[test]
fn reads_files_written_by_numpy() {
    if !common::has(common::Need::Numpy, "reads_files_written_by_numpy") {
        return;
    }
    let dir = tmpdir();
    let script = r#"
import sys, zipfile, io, numpy as np
d = sys.argv[1]
a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
b = np.array([3, 1, 4, 1, 5], dtype=np.uint8)
c = np.array([[2, 0], [2, 1]], dtype=np.int64)
e = np.array([-1, 2**31 - 1], dtype=np.int32)
f = np.array(2.5)
np.savez(d + '/plain.npz', a=a, b=b, c=c, e=e, f=f)
np.savez_compressed(d + '/comp.npz', a=a, b=b, c=c, e=e, f=f)
with zipfile.ZipFile(d + '/v23.npz', 'w') as z:
    for name, arr, ver in (('a', a, (2, 0)), ('c', c, (3, 0))):
        buf = io.BytesIO(); np.lib.format.write_array(buf, arr, version=ver)
        z.writestr(name + '.npy', buf.getvalue())
with zipfile.ZipFile(d + '/fortran.npz', 'w') as z:
    buf = io.BytesIO(); np.save(buf, np.asfortranarray(np.ones((2, 3), np.float32)))
    z.writestr('x.npy', buf.getvalue())
"#;
    let (ok, text) = run_python(script, &[dir.path().to_str().unwrap()]);
    assert!(ok, "{text}");
    let a: Vec<f32> = (0..24).map(|i| i as f32 / 7.0).collect();
    for name in ["plain.npz", "comp.npz"] {
        let m = read_npz(dir.path().join(name)).unwrap();
        assert_eq!(
            m.keys().cloned().collect::<Vec<_>>(),
            ["a", "b", "c", "e", "f"]
        );
        assert_eq!(
            m["a"],
            NpyArray::from_vec(vec![2, 3, 4], a.clone()).unwrap(),
            "{name}"
        );
        assert_eq!(
            m["b"],
            NpyArray::from_vec(vec![5], vec![3u8, 1, 4, 1, 5]).unwrap()
        );
        assert_eq!(
            m["c"],
            NpyArray::from_vec(vec![2, 2], vec![2i64, 0, 2, 1]).unwrap()
        );
        assert_eq!(
            m["e"],
            NpyArray::from_vec(vec![2], vec![-1i32, i32::MAX]).unwrap()
        );
        assert_eq!(m["f"], NpyArray::from_vec(vec![], vec![2.5f64]).unwrap());
    }
    let mut r = NpzReader::open(dir.path().join("v23.npz")).unwrap();
    assert_eq!(r.header("a").unwrap().version, (2, 0));
    assert_eq!(r.header("c").unwrap().version, (3, 0));
    assert_eq!(
        r.read("a").unwrap().as_slice::<f32>().unwrap(),
        a.as_slice()
    );
    assert_eq!(
        r.read("c").unwrap().as_slice::<i64>().unwrap(),
        &[2, 0, 2, 1]
    );
    let e = read_npz(dir.path().join("fortran.npz"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("'x.npy'") && e.contains("Fortran"), "{e}");
}

/// Writes a > 4 GiB archive (ZIP64 member), reads it back, and lets NumPy
/// read it. Needs ~4.3 GB of disk and ~5 GB of RAM for the NumPy part;
/// run with `cargo test --release --test npz_io -- --ignored zip64`.
#[test]
#[ignore]
fn zip64_large_member() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let p = dir.path().join("big.npz");
    let rows: usize = 4_400;
    let row_len: usize = 1 << 20; // 4400 MiB of u8
    let mut w = NpzWriter::create(&p).unwrap();
    w.add_array(
        "small",
        &NpyArray::from_vec(vec![3], vec![1i64, 2, 3]).unwrap(),
    )
    .unwrap();
    {
        let mut s = w.begin_array("big", DType::U8, &[rows, row_len]).unwrap();
        let mut row = vec![0u8; row_len];
        for r in 0..rows {
            row[0] = (r % 251) as u8;
            row[row_len - 1] = (r % 241) as u8;
            s.write(&row).unwrap();
        }
        s.finish().unwrap();
    }
    w.add_array(
        "after",
        &NpyArray::from_vec(vec![2], vec![7.5f32, 8.5]).unwrap(),
    )
    .unwrap();
    w.finish().unwrap();
    let len = fs::metadata(&p).unwrap().len();
    assert!(len > 1 << 32);
    let mut r = NpzReader::open(&p).unwrap();
    assert_eq!(
        r.read("after").unwrap().as_slice::<f32>().unwrap(),
        &[7.5, 8.5]
    );
    assert_eq!(
        r.read("small").unwrap().as_slice::<i64>().unwrap(),
        &[1, 2, 3]
    );
    let mut count = 0u64;
    let mut checksum = 0u64;
    r.visit("big", |c| {
        if let ArrayChunk::U8(v) = c {
            count += v.len() as u64;
            checksum += v.iter().map(|&x| u64::from(x)).sum::<u64>();
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(count, (rows * row_len) as u64);
    let want: u64 = (0..rows).map(|r| (r % 251 + r % 241) as u64).sum();
    assert_eq!(checksum, want);
    if common::Need::Numpy.available() {
        let script = "import sys, numpy as np\n\
                      z = np.load(sys.argv[1])\n\
                      b = z['big']\n\
                      assert b.shape == (4400, 1 << 20) and b.dtype == np.uint8\n\
                      assert int(b[:, 0].sum()) + int(b[:, -1].sum()) == int(sys.argv[2])\n\
                      assert list(z['after']) == [7.5, 8.5]\n\
                      print('numpy zip64 ok')";
        let (ok, text) = run_python(script, &[p.to_str().unwrap(), &want.to_string()]);
        assert!(ok && text.contains("numpy zip64 ok"), "{text}");
    }
}
