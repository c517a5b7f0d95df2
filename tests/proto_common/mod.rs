//! Shared helpers of the `proto_*` integration tests: corpus location and a
//! deterministic generator of synthetic TpuGraphs tuning files built around
//! real corpus modules.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use tpusim::proto::xla::HloModuleProto;
use tpusim::proto::{
    flattened_nodes, LayoutConfig, ModuleTuning, NodeLayout, Profile, Run, RunConfig, TileConfig,
    TuningSet,
};

#[path = "../common/mod.rs"]
mod common;

/// `<shared>/hlo_corpus/jax`, or `None` after printing why `test` skips.
pub fn jax_corpus(test: &str) -> Option<PathBuf> {
    Some(common::shared(test)?.join("hlo_corpus/jax"))
}

/// Every `*.hlo.pb` of the jax corpus, sorted by name.
pub fn corpus_pbs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("corpus dir readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".hlo.pb"))
        .collect();
    v.sort();
    v
}

/// splitmix64: small deterministic generator for tests.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

fn random_perm(rng: &mut Rng, rank: usize) -> Vec<i64> {
    let mut v: Vec<i64> = (0..rank as i64).collect();
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

const CONFIGURABLE: [&str; 4] = ["convolution", "dot", "reshape", "transpose"];

/// A layout `ModuleTuning` around `module`: configurable nodes are its
/// convolution/dot/reshape/transpose instructions (at most 64), run 0 is the
/// default (all tensors empty), every 7th run is an error, every 11th has no
/// profile.
pub fn synthetic_layout(module: HloModuleProto, runs: usize, seed: u64) -> ModuleTuning {
    let mut rng = Rng(seed);
    let nodes = flattened_nodes(&module);
    let configurable: Vec<(u64, usize)> = nodes
        .iter()
        .enumerate()
        .filter(|(_, i)| CONFIGURABLE.contains(&i.opcode.as_str()))
        .take(64)
        .map(|(k, i)| {
            let rank = i.shape.as_ref().map_or(0, |s| s.dimensions.len());
            (k as u64, rank)
        })
        .collect();
    let mut out = Vec::with_capacity(runs);
    for r in 0..runs {
        let layout = LayoutConfig {
            nodes: configurable
                .iter()
                .map(|&(_, rank)| {
                    if r == 0 {
                        NodeLayout::new(vec![], vec![], vec![])
                    } else {
                        NodeLayout::new(
                            random_perm(&mut rng, rank),
                            if rng.below(2) == 0 {
                                vec![]
                            } else {
                                random_perm(&mut rng, rank)
                            },
                            vec![],
                        )
                    }
                })
                .collect(),
        };
        out.push(Run {
            config: RunConfig::Layout(layout),
            error: r % 7 == 3,
            is_default: r == 0,
            profile: if r % 11 == 5 {
                None
            } else {
                Some(Profile::from_time_ns(1000 + rng.below(1_000_000) as i64))
            },
        });
    }
    ModuleTuning {
        module: Some(module),
        fingerprint: rng.next(),
        runs: out,
        config_index_to_node: configurable.iter().map(|&(k, _)| k).collect(),
    }
}

/// A tile `TuningSet`: one kernel per module, `runs` tile runs each (run 0
/// default, every 5th an error).
pub fn synthetic_tiles(modules: Vec<HloModuleProto>, runs: usize, seed: u64) -> TuningSet {
    let mut rng = Rng(seed);
    let bounds = |rng: &mut Rng, n: u64| -> Vec<i64> {
        (0..rng.below(n)).map(|_| 1 << rng.below(10)).collect()
    };
    TuningSet {
        modules: modules
            .into_iter()
            .map(|m| ModuleTuning {
                module: Some(m),
                fingerprint: rng.next(),
                runs: (0..runs)
                    .map(|r| Run {
                        config: RunConfig::Tile(Some(TileConfig {
                            kernel_bounds: bounds(&mut rng, 5),
                            output_bounds: bounds(&mut rng, 7),
                            input_bounds: bounds(&mut rng, 4),
                            iteration_bounds: bounds(&mut rng, 3),
                        })),
                        error: r % 5 == 4,
                        is_default: r == 0,
                        profile: Some(Profile {
                            compute_time_ns: rng.below(50_000) as i64,
                            compute_cycle_count: rng.below(1 << 40) as i64,
                            ..Profile::default()
                        }),
                    })
                    .collect(),
                config_index_to_node: vec![],
            })
            .collect(),
    }
}
