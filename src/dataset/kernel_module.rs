//! The graph of one kernel as the TpuGraphs tile collection stores it: a small module
//! holding the fused computation (and what it calls), then an entry computation with
//! the kernel's parameters and the kernel instruction. Also a structural fingerprint
//! that names the kernel's file and de-duplicates identical kernels.

use std::collections::HashMap;

use crate::hlo::print_module;
use crate::ir::{CompId, Computation, InstrId, Instruction, Module, ModuleAttrs, Opcode};

/// Build the standalone module of kernel `instr` (a fusion or an unfused op) of
/// computation `comp`.
pub fn kernel_module(m: &Module, comp: CompId, instr: InstrId) -> Module {
    let c = m.comp(comp);
    let ins = c.instr(instr);
    // Computations reachable from the kernel, callees first, in module order.
    let mut needed = vec![false; m.computations.len()];
    let mut stack: Vec<CompId> = ins.attrs.called.iter().map(|(_, id)| *id).collect();
    while let Some(id) = stack.pop() {
        if id >= needed.len() || needed[id] {
            continue;
        }
        needed[id] = true;
        for &n in &m.comp(id).order {
            stack.extend(m.comp(id).instr(n).attrs.called.iter().map(|(_, x)| *x));
        }
    }
    let mut out = Module {
        name: format!("{}_{}", m.name, ins.name),
        attrs: ModuleAttrs::default(),
        stack_frames: None,
        computations: indexmap::IndexMap::new(),
        entry: 0,
    };
    let mut remap: HashMap<CompId, CompId> = HashMap::new();
    for (id, (name, src)) in m.computations.iter().enumerate() {
        if needed[id] {
            remap.insert(id, out.computations.len());
            out.computations
                .insert(name.clone(), copy_computation(src, &remap));
        }
    }
    // Entry: one parameter per operand, then the kernel instruction.
    let mut entry = Computation::new(unique_name(&out, "main"));
    let mut params = Vec::new();
    for (i, op) in c.operands(instr).iter().enumerate() {
        let o = c.instr(*op);
        let mut p = Instruction::new(format!("param.{i}"), Opcode::Parameter, o.shape.clone());
        p.attrs.parameter_number = Some(i as i64);
        let id = entry.add(p, &[]);
        entry.params.push(id);
        params.push(id);
    }
    let mut k = ins.clone();
    k.attrs.control_predecessors.clear();
    for (_, cid) in k.attrs.called.iter_mut() {
        *cid = remap.get(cid).copied().unwrap_or(*cid);
    }
    let root = entry.add(k, &params);
    entry.root = root;
    out.entry = out.computations.len();
    out.computations.insert(entry.name.clone(), entry);
    out
}

fn unique_name(m: &Module, base: &str) -> String {
    let mut name = base.to_string();
    let mut k = 0;
    while m.computations.contains_key(&name) {
        k += 1;
        name = format!("{base}.{k}");
    }
    name
}

/// Copy a computation, remapping called computation ids.
pub fn copy_computation(src: &Computation, remap: &HashMap<CompId, CompId>) -> Computation {
    let mut c = Computation::new(src.name.clone());
    c.execution_thread = src.execution_thread.clone();
    c.line = src.line;
    let mut ids: HashMap<InstrId, InstrId> = HashMap::with_capacity(src.len());
    for &n in &src.order {
        let mut ins = src.instr(n).clone();
        for (_, cid) in ins.attrs.called.iter_mut() {
            *cid = remap.get(cid).copied().unwrap_or(*cid);
        }
        let ops: Vec<InstrId> = src
            .operands(n)
            .iter()
            .filter_map(|o| ids.get(o).copied())
            .collect();
        let id = c.add(ins, &ops);
        ids.insert(n, id);
    }
    c.root = ids.get(&src.root).copied().unwrap_or(c.root);
    c.params = src
        .params
        .iter()
        .filter_map(|p| ids.get(p).copied())
        .collect();
    c
}

/// A 64-bit structural fingerprint: the module printed with instructions renamed by
/// position and computations by index, hashed with FNV-1a. Equal kernels that differ
/// only in names get the same fingerprint; metadata is ignored.
pub fn fingerprint(m: &Module) -> u64 {
    let mut canon = m.clone();
    canon.name = "k".into();
    canon.stack_frames = None;
    let names: Vec<String> = (0..canon.computations.len())
        .map(|i| format!("c{i}"))
        .collect();
    let old: Vec<Computation> = canon.computations.drain(..).map(|(_, c)| c).collect();
    for (i, mut c) in old.into_iter().enumerate() {
        c.name = names[i].clone();
        let order = c.order.clone();
        let mut rename: HashMap<String, String> = HashMap::new();
        for (k, n) in order.iter().enumerate() {
            let ins = c.instr_mut(*n);
            let new = format!("i{k}");
            rename.insert(
                std::mem::replace(&mut ins.name, new.as_str().into()).into(),
                new,
            );
            ins.attrs.metadata = None;
            ins.attrs.frontend_attributes = None;
        }
        for n in &order {
            let ins = c.instr_mut(*n);
            for p in ins.attrs.control_predecessors.iter_mut() {
                if let Some(r) = rename.get(p) {
                    *p = r.clone();
                }
            }
        }
        canon.computations.insert(names[i].clone(), c);
    }
    fnv1a(print_module(&canon).as_bytes())
}

/// FNV-1a, 64 bit.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::parse_module;

    const M: &str = r#"
HloModule m
fused {
  p0 = f32[4,8] parameter(0)
  p1 = f32[8] parameter(1)
  b = f32[4,8] broadcast(p1), dimensions={1}
  ROOT a = f32[4,8] add(p0, b)
}
fused2 {
  q0 = f32[4,8] parameter(0)
  q1 = f32[8] parameter(1)
  bb = f32[4,8] broadcast(q1), dimensions={1}
  ROOT aa = f32[4,8] add(q0, bb)
}
ENTRY e {
  x = f32[4,8] parameter(0)
  y = f32[8] parameter(1)
  f = f32[4,8] fusion(x, y), kind=kLoop, calls=fused
  ROOT g = f32[4,8] fusion(f, y), kind=kLoop, calls=fused2
}
"#;

    #[test]
    fn kernel_module_holds_the_fusion_and_its_parameters() {
        let m = parse_module("m", M).unwrap();
        let e = m.entry();
        let f = e.find("f").unwrap();
        let k = kernel_module(&m, m.entry, f);
        assert_eq!(k.computations.len(), 2);
        assert_eq!(k.entry().params.len(), 2);
        assert_eq!(k.entry().instr(k.entry().root).opcode, Opcode::Fusion);
        // It prints and re-parses.
        let text = print_module(&k);
        assert!(parse_module("k", &text).is_ok(), "{text}");
        // The two fusions differ only in names: same fingerprint.
        let g = e.find("g").unwrap();
        let k2 = kernel_module(&m, m.entry, g);
        assert_eq!(fingerprint(&k), fingerprint(&k2));
        assert_ne!(fingerprint(&k), fingerprint(&m));
    }
}
