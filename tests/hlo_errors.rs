//! Bad input gives `FILE:LINE:COL: error: ...` and never a panic.

use tpusim::hlo::parse_module;

fn err(src: &str) -> String {
    match parse_module("t.hlo", src) {
        Ok(_) => panic!("expected an error for:\n{src}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn syntax_error_has_location_and_line() {
    let e =
        err("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p p)\n}\n");
    assert!(e.starts_with("t.hlo:4:"), "{e}");
    assert!(e.contains("error: expected"), "{e}");
    assert!(e.contains("ROOT a = f32[2] add(p p)"), "{e}");
}

#[test]
fn undefined_operand() {
    let e =
        err("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p, q)\n}\n");
    assert!(
        e.starts_with("t.hlo:4:26: error: operand 'q' is not defined"),
        "{e}"
    );
}

#[test]
fn undefined_computation() {
    let e = err("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  c = f32[] constant(0)\n  ROOT r = f32[] reduce(p, c), dimensions={0}, to_apply=%nosuch\n}\n");
    assert!(e.starts_with("t.hlo:5:"), "{e}");
    assert!(e.contains("computation 'nosuch' is not defined"), "{e}");
}

#[test]
fn duplicate_names() {
    let e = err("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  p = f32[2] negate(p)\n}\n");
    assert!(
        e.starts_with("t.hlo:4:3: error: instruction 'p' is defined twice"),
        "{e}"
    );
    let e = err("HloModule m\nc {\n  ROOT p = f32[] parameter(0)\n}\nc {\n  ROOT p = f32[] parameter(0)\n}\n");
    assert!(e.contains("computation 'c' is defined twice"), "{e}");
    assert!(e.starts_with("t.hlo:5:1:"), "{e}");
}

#[test]
fn wrong_operand_count() {
    let e = err("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p)\n}\n");
    assert!(e.contains("'add' takes 2 operands, found 1"), "{e}");
    assert!(e.starts_with("t.hlo:4:19:"), "{e}");
}

#[test]
fn unknown_opcode_and_type() {
    let e = err(
        "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] frobnicate(p)\n}\n",
    );
    assert!(e.contains("unknown opcode 'frobnicate'"), "{e}");
    let e = err("HloModule m\nENTRY e {\n  ROOT p = f31[2] parameter(0)\n}\n");
    assert!(e.contains("unknown element type 'f31'"), "{e}");
    assert!(e.starts_with("t.hlo:3:12:"), "{e}");
}

#[test]
fn bad_layouts() {
    let e = err("HloModule m\nENTRY e {\n  ROOT p = f32[2,3]{0} parameter(0)\n}\n");
    assert!(
        e.contains("layout has 1 dimensions but the shape has rank 2"),
        "{e}"
    );
    let e = err("HloModule m\nENTRY e {\n  ROOT p = f32[2,3]{1,1} parameter(0)\n}\n");
    assert!(e.contains("not a permutation"), "{e}");
}

#[test]
fn parameters_and_roots() {
    let e =
        err("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[] parameter(2)\n}\n");
    assert!(e.contains("parameter numbers must be 0..1"), "{e}");
    let e = err(
        "HloModule m\nENTRY e {\n  ROOT a = f32[] parameter(0)\n  ROOT b = f32[] negate(a)\n}\n",
    );
    assert!(e.contains("more than one ROOT"), "{e}");
    let e = err("HloModule m\nENTRY a {\n  ROOT x = f32[] parameter(0)\n}\nENTRY b {\n  ROOT x = f32[] parameter(0)\n}\n");
    assert!(e.contains("more than one ENTRY"), "{e}");
}

#[test]
fn bad_attribute_values() {
    let e = err("HloModule m\nENTRY e {\n  p = f32[2,3] parameter(0)\n  ROOT t = f32[3,2] transpose(p), dimensions={1,x}\n}\n");
    assert!(
        e.starts_with("t.hlo:4:49: error: expected an integer"),
        "{e}"
    );
    let e = err("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT t = f32[2] negate(p), metadata={}, metadata={}\n}\n");
    assert!(e.contains("attribute 'metadata' is given twice"), "{e}");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let src = format!(
        "HloModule m\nENTRY e {{\n  ROOT p = f32[] parameter(0), metadata={}\n}}\n",
        "{".repeat(100_000)
    );
    let e = err(&src);
    assert!(e.contains("nested more than"), "{e}");
    let src = format!(
        "HloModule m\nENTRY e {{\n  ROOT p = {}f32[]{} parameter(0)\n}}\n",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    assert!(err(&src).contains("nested more than"));
}

#[test]
fn empty_and_garbage_input() {
    assert!(err("").contains("t.hlo:1:1: error"));
    assert!(err("\u{0}\u{1}\u{2}").starts_with("t.hlo:1:1: error"));
    assert!(err("HloModule m").contains("expected"));
}

#[test]
fn parameter_without_number() {
    // Found by tests/hlo_fuzz.rs (round 1181 without ../shared): `parameter()` was taken
    // as parameter 0, printed as a second `parameter(0)`, and the print did not re-parse.
    for body in ["parameter()", "parameter(p)"] {
        let src = format!(
            "HloModule m\nENTRY e {{\n  p = f32[] parameter(0)\n  b = f32[] {body}\n  ROOT a = f32[] add(p, b)\n}}\n"
        );
        let e = err(&src);
        assert!(
            e.starts_with("t.hlo:4:13: error: parameter needs its number, as in parameter(0)"),
            "{e}"
        );
    }
}
