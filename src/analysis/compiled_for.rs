//! Recognising HLO that a CPU or GPU compiler has already compiled.
//!
//! tpusim compiles unoptimised HLO the way XLA's TPU pipeline would (TpuGraphs layout
//! graphs are pre-optimisation HLO too). A module that XLA:CPU or XLA:GPU has already
//! compiled carries that backend's fusions, layouts and rewrites, and its TPU estimate
//! means little (docs/jax.md). [`compiled_for`] finds the backend-specific marks such a
//! module carries; plain HLO, however it was written, carries none of them:
//!
//! | backend | mark | where it comes from |
//! |---|---|---|
//! | XLA:CPU | `backend_config` with `"kind":"__ynn_fusion"` | YNNPACK fusions (`ynn_fusion.N`, `kind=kCustom`) |
//! | XLA:CPU | `backend_config` with `outer_dimension_partitions` | the CPU's parallel task assignment |
//! | XLA:CPU | `custom-call` target `__onednn$…` | oneDNN rewrites |
//! | XLA:GPU | `backend_config` with `fusion_backend_config` | GPU fusion kinds (`__triton_gemm`, `__cudnn$fusion`, …) |
//! | XLA:GPU | `backend_config` with `operation_queue_id`, `gemm_backend_config` or `cudnn_conv_backend_config` | the GPU's stream assignment, cuBLAS and cuDNN configs |
//! | XLA:GPU | `custom-call` target `__cublas$…` or `__cudnn$…` | cuBLAS / cuDNN calls |
//!
//! `is_scheduled=true` alone says only "optimised by some backend" (TPU too) and is
//! reported as supporting evidence, never as the reason.

use std::fmt;

use crate::ir::{Module, Opcode};

/// The backend an input was compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Cpu,
    Gpu,
}

impl Backend {
    /// `XLA:CPU` or `XLA:GPU`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "XLA:CPU",
            Backend::Gpu => "XLA:GPU",
        }
    }
}

/// One kind of mark found: how many instructions carry it and the first of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub backend: Backend,
    /// What the mark is, e.g. `__ynn_fusion fusions`.
    pub what: &'static str,
    pub count: usize,
    /// The first instruction carrying it.
    pub example: String,
}

/// A module recognised as compiled for a backend, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledFor {
    pub backend: Backend,
    /// The marks of that backend, in the order of the table above.
    pub marks: Vec<Mark>,
    /// Whether the module says `is_scheduled=true`.
    pub scheduled: bool,
}

impl fmt::Display for CompiledFor {
    /// The evidence, e.g. `89 __ynn_fusion fusions such as ynn_fusion.95, …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, m) in self.marks.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {} such as {}", m.count, m.what, m.example)?;
        }
        if self.scheduled {
            f.write_str(", is_scheduled=true")?;
        }
        Ok(())
    }
}

/// The marks, in table order: backend, description, test.
type Test = fn(opcode: Opcode, target: &str, config: &str) -> bool;
const MARKS: &[(Backend, &str, Test)] = &[
    (Backend::Cpu, "__ynn_fusion fusions", |op, _, c| {
        op == Opcode::Fusion && c.contains("__ynn_fusion")
    }),
    (
        Backend::Cpu,
        "instructions with outer_dimension_partitions",
        |_, _, c| c.contains("outer_dimension_partitions"),
    ),
    (Backend::Cpu, "__onednn$ custom-calls", |op, t, _| {
        op == Opcode::CustomCall && t.starts_with("__onednn$")
    }),
    (
        Backend::Gpu,
        "instructions with fusion_backend_config",
        |_, _, c| c.contains("fusion_backend_config"),
    ),
    (
        Backend::Gpu,
        "instructions with operation_queue_id, gemm_backend_config or cudnn_conv_backend_config",
        |_, _, c| {
            c.contains("operation_queue_id")
                || c.contains("gemm_backend_config")
                || c.contains("cudnn_conv_backend_config")
        },
    ),
    (
        Backend::Gpu,
        "__cublas$ or __cudnn$ custom-calls",
        |op, t, _| {
            op == Opcode::CustomCall && (t.starts_with("__cublas$") || t.starts_with("__cudnn$"))
        },
    ),
];

/// Whether `module` looks already compiled by XLA:CPU or XLA:GPU, and why; `None` for
/// HLO that carries no mark of either (see the module docs). When both backends' marks
/// occur, the one with more marked instructions wins.
pub fn compiled_for(module: &Module) -> Option<CompiledFor> {
    let mut found: Vec<Option<Mark>> = vec![None; MARKS.len()];
    for comp in module.computations.values() {
        for &id in &comp.order {
            let ins = comp.instr(id);
            let config = ins.attrs.backend_config.as_deref().unwrap_or("");
            let target = ins.attrs.custom_call_target.as_deref().unwrap_or("");
            if config.is_empty() && target.is_empty() {
                continue;
            }
            for (slot, (backend, what, test)) in found.iter_mut().zip(MARKS) {
                if test(ins.opcode, target, config) {
                    slot.get_or_insert_with(|| Mark {
                        backend: *backend,
                        what,
                        count: 0,
                        example: ins.name.to_string(),
                    })
                    .count += 1;
                }
            }
        }
    }
    let marks: Vec<Mark> = found.into_iter().flatten().collect();
    let weight = |b: Backend| -> usize {
        marks
            .iter()
            .filter(|m| m.backend == b)
            .map(|m| m.count)
            .sum()
    };
    let (cpu, gpu) = (weight(Backend::Cpu), weight(Backend::Gpu));
    let backend = match (cpu, gpu) {
        (0, 0) => return None,
        (c, g) if c >= g => Backend::Cpu,
        _ => Backend::Gpu,
    };
    Some(CompiledFor {
        backend,
        marks: marks.into_iter().filter(|m| m.backend == backend).collect(),
        scheduled: module.attrs.is_scheduled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::parse_module;

    fn check(text: &str) -> Option<CompiledFor> {
        compiled_for(&parse_module("t", text).expect("parses"))
    }

    #[test]
    fn plain_hlo_is_not_compiled() {
        let text = r#"HloModule m, entry_computation_layout={(f32[8,16]{1,0})->f32[8,16]{1,0}}

ENTRY %main (p: f32[8,16]) -> f32[8,16] {
  %p = f32[8,16]{1,0} parameter(0)
  %c = f32[8,16]{1,0} custom-call(%p), custom_call_target="Sharding", backend_config="x"
  ROOT %e = f32[8,16]{1,0} exponential(%c)
}
"#;
        assert_eq!(check(text), None);
    }

    #[test]
    fn ynn_fusion_and_partitions_mean_cpu() {
        let text = r#"HloModule m, is_scheduled=true

%f (a: f32[8,16]) -> f32[8,16] {
  %a = f32[8,16]{1,0} parameter(0)
  ROOT %n = f32[8,16]{1,0} negate(%a)
}

ENTRY %main (p: f32[8,16]) -> f32[8,16] {
  %p = f32[8,16]{1,0} parameter(0)
  %ynn_fusion = f32[8,16]{1,0} fusion(%p), kind=kCustom, calls=%f, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  ROOT %e = f32[8,16]{1,0} exponential(%ynn_fusion), backend_config={"outer_dimension_partitions":["2"]}
}
"#;
        let c = check(text).expect("CPU marks");
        assert_eq!(c.backend, Backend::Cpu);
        assert!(c.scheduled);
        let got: Vec<(usize, &str)> = c
            .marks
            .iter()
            .map(|m| (m.count, m.example.as_str()))
            .collect();
        assert_eq!(got, [(1, "ynn_fusion"), (2, "ynn_fusion")]);
        assert_eq!(
            c.to_string(),
            "1 __ynn_fusion fusions such as ynn_fusion, 2 instructions with \
             outer_dimension_partitions such as ynn_fusion, is_scheduled=true"
        );
    }

    #[test]
    fn cublas_and_triton_mean_gpu() {
        let text = r#"HloModule m

%f (a: f32[8,16]) -> f32[8,16] {
  %a = f32[8,16]{1,0} parameter(0)
  ROOT %n = f32[8,16]{1,0} negate(%a)
}

ENTRY %main (p: f32[8,16]) -> (f32[8,8], s8[0]) {
  %p = f32[8,16]{1,0} parameter(0)
  %t = f32[8,16]{1,0} fusion(%p), kind=kCustom, calls=%f, backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  ROOT %g = (f32[8,8]{1,0}, s8[0]{0}) custom-call(%t, %t), custom_call_target="__cublas$gemm"
}
"#;
        let c = check(text).expect("GPU marks");
        assert_eq!(c.backend, Backend::Gpu);
        assert!(!c.scheduled);
        let got: Vec<(&str, usize, &str)> = c
            .marks
            .iter()
            .map(|m| (m.what, m.count, m.example.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("instructions with fusion_backend_config", 1, "t"),
                ("__cublas$ or __cudnn$ custom-calls", 1, "g"),
            ]
        );
    }
}
