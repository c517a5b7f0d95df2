//! The forms of HLO text that XLA's parser accepts beyond what its printer writes:
//! instructions without a result shape (the shape is inferred), nested operands
//! (`add(negate(x), y)`), instructions continued on the next line, comments inside
//! instructions and inline computation bodies (`to_apply={ ... }`). Each is parsed
//! with the meaning XLA gives it, printed in the canonical form, and the printed text
//! parses back to the same module; where jaxlib is installed, XLA's own parser judges
//! both the input and the printed text.

mod common;

use tpusim::hlo::printer::write_shape;
use tpusim::hlo::{parse_module, print_module};
use tpusim::ir::{CallRole, Computation, Module, Opcode};

/// Parse `src`, check that its printed form parses back to the same module and prints
/// the same again, and return the module and the printed text.
fn round_trip(label: &str, src: &str) -> (Module, String) {
    let m = parse_module(label, src).unwrap_or_else(|e| panic!("{e}"));
    let printed = print_module(&m);
    let m2 = parse_module(&format!("{label} (printed)"), &printed)
        .unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert!(
        m == m2,
        "{label}: parse(print(m)) differs from m:\n{printed}"
    );
    assert_eq!(
        print_module(&m2),
        printed,
        "{label}: printing is not stable"
    );
    (m, printed)
}

fn comp<'m>(m: &'m Module, name: &str) -> &'m Computation {
    m.computations
        .get(name)
        .unwrap_or_else(|| panic!("no computation '{name}'"))
}

/// The shape of instruction `name` of `c`, as the printer writes it (with layout).
fn shape_of(c: &Computation, name: &str) -> String {
    let id = c
        .find(name)
        .unwrap_or_else(|| panic!("no instruction '{name}'"));
    let mut s = String::new();
    write_shape(&mut s, &c.instr(id).shape, true);
    s
}

/// Instruction names of `c` in program order.
fn order(c: &Computation) -> Vec<String> {
    c.order
        .iter()
        .map(|&i| c.instr(i).name.to_string())
        .collect()
}

/// Names of the operands of instruction `name` of `c`.
fn operand_names(c: &Computation, name: &str) -> Vec<String> {
    let id = c.find(name).unwrap();
    c.operands(id)
        .iter()
        .map(|&o| c.instr(o).name.to_string())
        .collect()
}

const OMITTED_SHAPES: &str = r#"HloModule omitted
cond {
  p = (s32[], f32[3]) parameter(0)
  i = get-tuple-element(p), index=0
  four = s32[] constant(4)
  ROOT lt = compare(i, four), direction=LT
}
body {
  p = (s32[], f32[3]) parameter(0)
  i = get-tuple-element(p), index=0
  v = get-tuple-element(p), index=1
  one = s32[] constant(1)
  n = add(i, one)
  ROOT t = tuple(n, v)
}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = add(x, y)
}
ENTRY e {
  a = f32[2,3]{0,1} parameter(0)
  b = f32[3,4] parameter(1)
  h = bf16[3,4] parameter(2)
  ROOT d = dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  m = dot(a, h), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  n = negate(a)
  c = compare(a, a), direction=GT
  tr = transpose(a), dimensions={1,0}
  z = f32[] constant(0)
  r = reduce(a, z), dimensions={1}, to_apply=add
  bs = broadcast(z)
  bd = broadcast(r), dimensions={5}
  i0 = s32[] constant(0)
  v0 = f32[3] constant({1, 2, 3})
  t = tuple(i0, v0)
  w = while(t), condition=cond, body=body
  g = get-tuple-element(w), index=1
}
"#;

#[test]
fn omitted_result_shapes_are_inferred() {
    let (m, printed) = round_trip("omitted.hlo", OMITTED_SHAPES);
    let e = m.entry();
    // dot: batch, lhs free, rhs free dims; the default layout; the higher-precision
    // element type of mixed operands.
    assert_eq!(shape_of(e, "d"), "f32[2,4]{1,0}");
    assert_eq!(shape_of(e, "m"), "f32[2,4]{1,0}");
    // Element-wise results keep the operand's layout, as XLA's inference does.
    assert_eq!(shape_of(e, "n"), "f32[2,3]{0,1}");
    assert_eq!(shape_of(e, "c"), "pred[2,3]{0,1}");
    assert_eq!(shape_of(e, "tr"), "f32[3,2]{1,0}");
    assert_eq!(shape_of(e, "r"), "f32[2]{0}");
    // broadcast: `dimensions` are sizes put before the operand's (XLA's parser calls
    // InferBroadcastShape(operand, dimensions)); a scalar operand needs none.
    assert_eq!(shape_of(e, "bs"), "f32[]");
    assert_eq!(shape_of(e, "bd"), "f32[5,2]{1,0}");
    assert_eq!(shape_of(e, "t"), "(s32[], f32[3]{0})");
    assert_eq!(shape_of(e, "w"), "(s32[], f32[3]{0})");
    assert_eq!(shape_of(e, "g"), "f32[3]{0}");
    let cond = comp(&m, "cond");
    assert_eq!(shape_of(cond, "i"), "s32[]");
    assert_eq!(shape_of(cond, "lt"), "pred[]");
    assert_eq!(shape_of(comp(&m, "body"), "t"), "(s32[], f32[3]{0})");
    // The explicit ROOT stays the root although instructions follow it.
    assert_eq!(e.instr(e.root).name.as_str(), "d");
    // The printed form writes every shape.
    assert!(
        printed.contains("ROOT %d = f32[2,4]{1,0} dot(%a, %b)"),
        "{printed}"
    );
    // A scalar broadcast without `dimensions` has `dimensions={}`, as in XLA.
    assert!(
        printed.contains("%bs = f32[] broadcast(%z), dimensions={}"),
        "{printed}"
    );
    assert!(
        printed.contains("%w = (s32[], f32[3]{0}) while(%t), condition=%cond, body=%body"),
        "{printed}"
    );
}

const NESTED: &str = r#"HloModule nested
ENTRY e {
  p0 = f32[4] parameter(0)
  s = subtract(f32[4] parameter(1), negate(f32[4] parameter(2)))
  z = f32[2,3] broadcast(f32[] constant(0)), dimensions={}
  n = f32[4] negate(p0)
  ROOT t = tuple(s, z, n, negate(p0), add(negate(p0), f32[4] multiply(p0, p0)))
}
"#;

#[test]
fn nested_operands_become_instructions_before_their_user() {
    let (m, printed) = round_trip("nested.hlo", NESTED);
    let e = m.entry();
    // Each nested operand is an instruction of its own, placed before its user and
    // named as XLA's parser names it: `<opcode>.anon`, then `.1`, `.2`, ...
    assert_eq!(
        order(e),
        [
            "p0",
            "parameter.anon",
            "parameter.anon.1",
            "negate.anon",
            "s",
            "constant.anon",
            "z",
            "n",
            "negate.anon.1",
            "negate.anon.2",
            "multiply.anon",
            "add.anon",
            "t",
        ]
    );
    // Nested parameters are parameters of the computation, by their numbers.
    let params: Vec<&str> = e.params.iter().map(|&p| e.instr(p).name.as_str()).collect();
    assert_eq!(params, ["p0", "parameter.anon", "parameter.anon.1"]);
    assert_eq!(operand_names(e, "s"), ["parameter.anon", "negate.anon"]);
    assert_eq!(operand_names(e, "negate.anon"), ["parameter.anon.1"]);
    assert_eq!(operand_names(e, "z"), ["constant.anon"]);
    assert_eq!(
        operand_names(e, "t"),
        ["s", "z", "n", "negate.anon.1", "add.anon"]
    );
    assert_eq!(
        operand_names(e, "add.anon"),
        ["negate.anon.2", "multiply.anon"]
    );
    assert_eq!(shape_of(e, "s"), "f32[4]{0}");
    assert_eq!(shape_of(e, "constant.anon"), "f32[]");
    assert_eq!(shape_of(e, "z"), "f32[2,3]{1,0}");
    assert_eq!(shape_of(e, "add.anon"), "f32[4]{0}");
    let c = e.instr(e.find("constant.anon").unwrap());
    assert_eq!(c.opcode, Opcode::Constant);
    assert_eq!(c.attrs.literal.as_deref(), Some("0"));
    assert!(
        printed.contains("%negate.anon = f32[4]{0} negate(%parameter.anon.1)"),
        "{printed}"
    );
}

#[test]
fn anonymous_names_avoid_names_read_before() {
    // The uniquer is module-wide and knows every name read before: an explicit
    // `negate.anon` in an earlier computation, and an explicit `.1`, push the nested
    // operand to `negate.anon.2`.
    let src = r#"HloModule names
f {
  negate.anon = f32[] parameter(0)
  ROOT negate.anon.1 = f32[] negate(negate.anon)
}
ENTRY e {
  x = f32[] parameter(0)
  ROOT c = f32[] call(negate(x)), to_apply=f
}
"#;
    let (m, _) = round_trip("names.hlo", src);
    assert_eq!(order(m.entry()), ["x", "negate.anon.2", "c"]);
}

const MULTI_LINE: &str = "HloModule multi_line
cond {
  p = (s32[], s32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  c = s32[] constant(4)
  ROOT lt = pred[] compare(i, c),
    direction=LT
}
body {
  p = (s32[], s32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = s32[3] get-tuple-element(p), index=1
  one = s32[] constant(1)
  n = s32[] add(i, one)
  ROOT t = (s32[], s32[3]) tuple(n, v)
}
add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
ENTRY e {
  a = s32[] constant(0)
  b = s32[3] constant({1, 2, 3})
  t = (s32[], s32[3]) tuple(a, b)
  w = (s32[], s32[3]) while(t), condition=
    cond, body=body
  v = s32[3] get-tuple-element(w), index=1
  ROOT r = s32[]
    reduce(
      v, a), dimensions=
      {0}, to_apply=add
}
";

#[test]
fn instructions_continued_on_the_next_line() {
    let (m, _) = round_trip("multi_line.hlo", MULTI_LINE);
    let e = m.entry();
    let w = e.instr(e.find("w").unwrap());
    let name_of = |id| m.computations.get_index(id).unwrap().0.as_str();
    assert_eq!(
        name_of(w.attrs.called_with(CallRole::Condition).unwrap()),
        "cond"
    );
    assert_eq!(
        name_of(w.attrs.called_with(CallRole::Body).unwrap()),
        "body"
    );
    let r = e.instr(e.find("r").unwrap());
    assert_eq!(r.opcode, Opcode::Reduce);
    assert_eq!(r.attrs.dimensions.as_deref(), Some(&[0i64][..]));
    assert_eq!(
        name_of(r.attrs.called_with(CallRole::ToApply).unwrap()),
        "add"
    );
    assert_eq!(operand_names(e, "r"), ["v", "a"]);
    // Source positions are those of the instructions' first lines.
    assert_eq!((r.line, r.col), (29, 3));
    let lt = comp(&m, "cond");
    let lt = lt.instr(lt.find("lt").unwrap());
    assert_eq!(lt.attrs.comparison.map(|c| c.name()), Some("LT"));
}

const COMMENTS: &str = "HloModule comments
ENTRY e {
  c = /*x*/f32[1]{0} constant({1 /*y*/})
  p = f32[1] /* a */ parameter(/* n */ 0)
  ROOT a = f32[1]{0} add(/* lhs */ c, p /* rhs */), metadata= /* m */ {op_name=\"a\"}
}
";

#[test]
fn comments_inside_instructions() {
    let (m, printed) = round_trip("comments.hlo", COMMENTS);
    let e = m.entry();
    assert_eq!(shape_of(e, "c"), "f32[1]{0}");
    assert_eq!(operand_names(e, "a"), ["c", "p"]);
    let a = e.instr(e.find("a").unwrap());
    assert_eq!(a.attrs.metadata.as_deref(), Some("{op_name=\"a\"}"));
    let p = e.instr(e.find("p").unwrap());
    assert_eq!(p.attrs.parameter_number, Some(0));
    assert!(printed.contains("ROOT %a = f32[1]{0} add(%c, %p), metadata={op_name=\"a\"}"));
}

const INLINE: &str = r#"HloModule inline
ENTRY e {
  a = f32[4] parameter(0)
  z = f32[] constant(0)
  r = f32[] reduce(a, z), dimensions={0}, to_apply={
    x = f32[] parameter(0)
    y = f32[] parameter(1)
    ROOT s = f32[] maximum(x, y)
  }
  c = call(a), to_apply={ p = f32[4] parameter(0)
    ROOT n = negate(p) }
  i = s32[] constant(1)
  b = f32[4] conditional(i, a, c), branch_computations={{
    p = f32[4] parameter(0)
    ROOT n = f32[4] abs(p)
  }, {
    p = f32[4] parameter(0)
    ROOT n = f32[4] sqrt(p)
  }}
  s = ((f32[4]), f32[4], s32[]) call-start(b), to_apply={
    p = f32[4] parameter(0)
    ROOT n = f32[4] exponential(p)
  }
  d = f32[4] call-done(s)
  ROOT t = tuple(r, c, d)
}
"#;

#[test]
fn inline_bodies_become_computations_before_their_caller() {
    let (m, printed) = round_trip("inline.hlo", INLINE);
    let names: Vec<&str> = m.computations.keys().map(String::as_str).collect();
    assert_eq!(names, ["_", "_.1", "_.2", "_.3", "_.4", "e"]);
    assert_eq!(m.entry().name, "e");
    let e = m.entry();
    let r = e.instr(e.find("r").unwrap());
    assert_eq!(r.attrs.called_with(CallRole::ToApply), Some(0));
    let c = e.instr(e.find("c").unwrap());
    assert_eq!(c.attrs.called_with(CallRole::ToApply), Some(1));
    let max = comp(&m, "_");
    assert_eq!(order(max), ["x", "y", "s"]);
    assert_eq!(max.instr(max.root).opcode, Opcode::Maximum);
    // The call's shape is inferred from the inline body's root.
    assert_eq!(shape_of(e, "c"), "f32[4]{0}");
    assert_eq!(shape_of(comp(&m, "_.1"), "n"), "f32[4]{0}");
    assert!(printed.contains("to_apply=%_.1"), "{printed}");
    // Inline bodies in a list, and for the op an async `call-start` wraps.
    let b = e.instr(e.find("b").unwrap());
    let branches: Vec<_> = b.attrs.called.iter().map(|&(_, id)| id).collect();
    assert_eq!(branches, [2, 3]);
    let root_op = |name: &str| {
        let c = comp(&m, name);
        c.instr(c.root).opcode
    };
    assert_eq!(root_op("_.2"), Opcode::Abs);
    assert_eq!(root_op("_.3"), Opcode::Sqrt);
    assert_eq!(root_op("_.4"), Opcode::Exp);
    let s = e.instr(e.find("s").unwrap());
    assert_eq!(
        (s.opcode, s.async_wrapped),
        (Opcode::AsyncStart, Some(Opcode::Call))
    );
    assert_eq!(s.attrs.called_with(CallRole::ToApply), Some(4));
    assert!(
        printed.contains("branch_computations={%_.2, %_.3}"),
        "{printed}"
    );
}

/// Modules XLA's parser rejects, and the start of our error for each.
const REJECTED: [(&str, &str); 5] = [
    // XLA infers no shape for convert (the element type is the instruction's own).
    (
        "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = convert(p)\n}\n",
        "t.hlo:4:12: error: 'convert' needs an explicit result shape",
    ),
    // Inference that fails says why, at the opcode.
    (
        "HloModule m\nENTRY e {\n  a = f32[2,3] parameter(0)\n  b = f32[4,5] parameter(1)\n  ROOT d = dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
        "t.hlo:5:12: error: cannot infer the shape of 'dot': dot: contracting dimension sizes differ",
    ),
    // Nested instructions take no attributes (XLA: the comma would be ambiguous).
    (
        "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p, broadcast(p), dimensions={0})\n}\n",
        "t.hlo:4:",
    ),
    // An operand that is neither a defined name nor an instruction.
    (
        "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p, q)\n}\n",
        "t.hlo:4:26: error: operand 'q' is not defined",
    ),
    // An inline body is checked like any computation.
    (
        "HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply={ ROOT q = f32[] negate(r) }\n}\n",
        "t.hlo:4:60: error: operand 'r' is not defined",
    ),
];

#[test]
fn what_xla_rejects_stays_a_located_error() {
    for (src, start) in REJECTED {
        match parse_module("t.hlo", src) {
            Ok(_) => panic!("expected an error for:\n{src}"),
            Err(e) => {
                let e = e.to_string();
                assert!(e.starts_with(start), "{e}");
            }
        }
    }
}

/// XLA's parser (jaxlib) accepts each input module and our printed form of it.
#[test]
fn xla_accepts_the_inputs_and_the_printed_forms() {
    if !common::has(
        common::Need::Jax,
        "xla_accepts_the_inputs_and_the_printed_forms",
    ) {
        return;
    }
    let Some(shared) = common::shared("xla_accepts_the_inputs_and_the_printed_forms") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (name, src) in [
        ("omitted", OMITTED_SHAPES),
        ("nested", NESTED),
        ("multi_line", MULTI_LINE),
        ("comments", COMMENTS),
        ("inline", INLINE),
    ] {
        let (_, printed) = round_trip(name, src);
        for (suffix, text) in [("in", src), ("printed", printed.as_str())] {
            let p = dir.path().join(format!("{name}.{suffix}.hlo"));
            std::fs::write(&p, text).unwrap();
            paths.push(p);
        }
    }
    let stdout = common::xla_oracle(&shared, &paths);
    let bad: Vec<&str> = stdout.lines().filter(|l| !l.starts_with("ok\t")).collect();
    assert!(bad.is_empty(), "XLA rejected: {bad:#?}");
    assert_eq!(stdout.lines().count(), paths.len(), "{stdout}");
    // And XLA rejects what we reject.
    let mut rejected = Vec::new();
    for (i, (src, _)) in REJECTED.iter().enumerate() {
        let p = dir.path().join(format!("rejected{i}.hlo"));
        std::fs::write(&p, src).unwrap();
        rejected.push(p);
    }
    let stdout = common::xla_oracle(&shared, &rejected);
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("err\t")).count(),
        REJECTED.len(),
        "{stdout}"
    );
}

#[test]
fn nesting_up_to_the_bracket_limit_parses() {
    // 250 nested operands (the bracket limit is 256), on a test thread's stack.
    let mut e = String::from("p");
    for _ in 0..250 {
        e = format!("negate({e})");
    }
    let src = format!(
        "HloModule m\nENTRY e {{\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] add(p, {e})\n}}\n"
    );
    let m = parse_module("deep.hlo", &src).unwrap_or_else(|e| panic!("{e}"));
    let c = m.entry();
    assert_eq!(c.order.len(), 252);
    assert_eq!(operand_names(c, "r"), ["p", "negate.anon.249"]);
    assert_eq!(operand_names(c, "negate.anon"), ["p"]);
}
