//! HLO text → IR: the pest grammar (`grammar/hlo.pest`) plus a builder that resolves
//! names, types attributes and checks what XLA's parser checks.

use pest::iterators::Pair;
use pest::Parser;
use smallvec::SmallVec;
use std::collections::HashMap;

/// Instruction names → ids while a computation is built (a fast, fixed-seed hash: the
/// map is only looked up, never iterated).
type NameMap<'a> = HashMap<&'a str, InstrId, foldhash::fast::FixedState>;
/// Shapes read in one computation, by their text: an instruction whose shape is written
/// like an earlier one's shares it (`SharedShape`) instead of reading it again.
type ShapeMemo<'a> = HashMap<&'a str, SharedShape, foldhash::fast::FixedState>;

use super::attrs::{self as av, ValueError};
use super::error::HloError;
use super::names::NameUniquer;
use crate::ir::*;

#[derive(pest_derive::Parser)]
#[grammar = "../grammar/hlo.pest"]
struct HloGrammar;

/// Deepest bracket nesting accepted before parsing (real HLO nests < 20 deep).
pub const MAX_NESTING: usize = 256;

/// Parse one HLO module from text. `file` is used in error messages only.
pub fn parse_module(file: &str, src: &str) -> Result<Module, HloError> {
    parse_module_with(file, src, true, &mut FastPathStats::default())
}

/// [`parse_module`] with the general rules only (no printer-form fast path): the
/// reference the fast path is tested against.
#[doc(hidden)]
pub fn parse_module_general(file: &str, src: &str) -> Result<Module, HloError> {
    parse_module_with(file, src, false, &mut FastPathStats::default())
}

/// How many computations the printer-form fast path read, and how many went through
/// the general rules.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FastPathStats {
    pub fast: usize,
    pub general: usize,
}

/// [`parse_module`], also saying which rules read each computation.
pub fn parse_module_stats(file: &str, src: &str) -> Result<(Module, FastPathStats), HloError> {
    let mut st = FastPathStats::default();
    let m = parse_module_with(file, src, true, &mut st)?;
    Ok((m, st))
}

fn parse_module_with(
    file: &str,
    src: &str,
    try_fast: bool,
    stats: &mut FastPathStats,
) -> Result<Module, HloError> {
    check_nesting(file, src)?;
    let head = HloGrammar::parse(Rule::module_head, src)
        .map_err(|e| pest_error(file, src, 0, e))?
        .next();
    let b = Builder {
        file,
        src,
        base: 0,
        fast: false,
    };
    let mut m = Module {
        name: String::new(),
        attrs: ModuleAttrs::default(),
        stack_frames: None,
        computations: indexmap::IndexMap::new(),
        entry: 0,
    };
    let mut name = None;
    let mut pos = 0;
    if let Some(head) = head {
        pos = head.as_span().end();
        for p in head.into_inner() {
            match p.as_rule() {
                Rule::header => {
                    let mut inner = p.into_inner();
                    if let Some(n) = inner.next() {
                        name = Some(strip_pct(n.as_str()).to_string());
                    }
                    for a in inner {
                        b.module_attr(a, &mut m.attrs)?;
                    }
                }
                Rule::stack_frames => m.stack_frames = Some(p.as_str().trim_end().to_string()),
                _ => {}
            }
        }
    }
    let mut entry: Option<CompId> = None;
    let mut lines = LineCounter::default();
    let mut naming = Naming::default();
    while pos < src.len() {
        let start = pos;
        let (comp, is_entry, end) = match computation_span(src, pos) {
            Some(span) => {
                // First the fast rules for the printer's form; then the general rules in
                // batches of lines; then (a batch boundary may have cut an instruction
                // written over several lines) the whole body as one batch, which is exact
                // and gives the error. A failed attempt leaves nothing behind: inline
                // computations it added are dropped, names it registered forgotten.
                let (at, mark, saved) = (lines, m.computations.len(), naming.clone());
                let attempts: [(bool, usize); 3] = [
                    (true, BATCH_LINES),
                    (false, BATCH_LINES),
                    (false, usize::MAX),
                ];
                let mut result = Err(not_fast());
                for (k, &(fast, batch)) in attempts.iter().enumerate() {
                    if fast && !try_fast {
                        continue;
                    }
                    lines = at;
                    m.computations.truncate(mark);
                    naming = saved.clone();
                    let mut cx = Cx {
                        comps: &mut m.computations,
                        naming: &mut naming,
                        lines: &mut lines,
                    };
                    result = read_computation(file, src, &span, &mut cx, batch, fast);
                    if k == 0 {
                        if result.is_ok() {
                            stats.fast += 1;
                        } else {
                            stats.general += 1;
                        }
                    }
                    if result.is_ok() {
                        break;
                    }
                }
                if !try_fast {
                    stats.general += 1;
                }
                let (c, e) = result?;
                (c, e, span.end)
            }
            None => {
                // Not delimitable: let the grammar say what is wrong.
                HloGrammar::parse(Rule::computation_chunk, &src[pos..])
                    .map_err(|e| pest_error(file, src, pos, e))?;
                return Err(HloError::at(file, src, pos, "unterminated computation"));
            }
        };
        let b = Builder {
            file,
            src,
            base: 0,
            fast: false,
        };
        if m.computations.contains_key(&comp.name) {
            return Err(b.err_abs(
                start,
                format!("computation '{}' is defined twice", comp.name),
            ));
        }
        let id = m.computations.len();
        if is_entry {
            if entry.is_some() {
                return Err(b.err_abs(start, "more than one ENTRY computation"));
            }
            entry = Some(id);
        }
        if let Some(u) = naming.comps.as_mut() {
            u.register(&comp.name);
        }
        m.computations.insert(comp.name.clone(), comp);
        pos = skip_space(src, end);
    }
    if m.computations.is_empty() {
        let at = skip_space(src, pos);
        return Err(HloError::at(
            file,
            src,
            at,
            if at >= src.len() {
                "expected a computation, found end of input".to_string()
            } else {
                "expected a computation".to_string()
            },
        ));
    }
    m.entry = entry.unwrap_or(m.computations.len() - 1);
    m.name = name.unwrap_or_else(|| format!("module_{}", m.computations[m.entry].name));
    // The rules every front end shares (shapes' sizes, call nesting): crate::ir::check.
    crate::ir::check_module(&m).map_err(|e| {
        HloError::at_line_col(file, src, e.line as usize, e.col as usize, e.message)
    })?;
    Ok(m)
}

/// Index of the quote that closes the string opening at `i` (or the end of input).
fn string_end(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while let Some(k) = b.get(i..).and_then(|r| memchr::memchr2(b'"', b'\\', r)) {
        i += k;
        if b[i] == b'"' {
            return i;
        }
        i += 2;
    }
    b.len()
}

/// Bytes the bracket scanners look at: quotes, `/` (comments), newlines, brackets.
/// Everything else is skipped by one table lookup per byte.
const SCAN_CLASS: [bool; 256] = {
    let mut t = [false; 256];
    let special = b"\"/\n{}()[]";
    let mut k = 0;
    while k < special.len() {
        t[special[k] as usize] = true;
        k += 1;
    }
    t
};

/// Finds, in order, the bytes a bracket scanner must look at (`SCAN_CLASS`). It keeps
/// the bit mask of the sixteen-byte block it last compared, so consecutive special
/// bytes in one block cost a mask step each rather than a new comparison.
struct Specials<'b> {
    b: &'b [u8],
    base: usize,
    mask: u32,
}

impl<'b> Specials<'b> {
    fn new(b: &'b [u8]) -> Self {
        Specials {
            b,
            base: usize::MAX,
            mask: 0,
        }
    }

    /// The first special byte at or after `i` (or the end of the text).
    #[inline]
    fn next(&mut self, mut i: usize) -> usize {
        loop {
            if i >= self.base && i - self.base < 16 {
                let m = self.mask & (!0u32 << (i - self.base));
                if m != 0 {
                    return self.base + m.trailing_zeros() as usize;
                }
                i = self.base + 16;
            }
            if i + 16 > self.b.len() {
                while i < self.b.len() && !SCAN_CLASS[self.b[i] as usize] {
                    i += 1;
                }
                return i;
            }
            self.base = i;
            self.mask = block_mask(self.b, i);
        }
    }
}

/// Bit k set when `b[i + k]` is special, for k in 0..16 (`i + 16 <= b.len()`).
#[inline]
fn block_mask(b: &[u8], i: usize) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; the load reads b[i..i + 16],
        // which the caller keeps in bounds, and is unaligned-safe.
        unsafe {
            let set = |c: u8| _mm_set1_epi8(c as i8);
            let v = _mm_loadu_si128(b.as_ptr().add(i) as *const __m128i);
            let eq = |c: u8| _mm_cmpeq_epi8(v, set(c));
            let m = _mm_or_si128(
                _mm_or_si128(
                    _mm_or_si128(eq(b'"'), eq(b'/')),
                    _mm_or_si128(eq(b'\n'), eq(b'{')),
                ),
                _mm_or_si128(
                    _mm_or_si128(eq(b'}'), eq(b'(')),
                    _mm_or_si128(_mm_or_si128(eq(b')'), eq(b'[')), eq(b']')),
                ),
            );
            _mm_movemask_epi8(m) as u32
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0u32;
        for (k, &c) in b[i..i + 16].iter().enumerate() {
            m |= (SCAN_CLASS[c as usize] as u32) << k;
        }
        m
    }
}

/// Skip whitespace and comments.
fn skip_space(src: &str, mut i: usize) -> usize {
    let b = src.as_bytes();
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => match src[i + 2..].find("*/") {
                Some(p) => i += p + 4,
                None => return b.len(),
            },
            _ => break,
        }
    }
    i
}

/// Where a computation's pieces are: `start..=body_open` is the head,
/// `body_open+1..body_close` the instructions, `body_close..end` the tail.
struct CompSpan {
    start: usize,
    body_open: usize,
    body_close: usize,
    end: usize,
    /// Offsets (in the body) of newlines at bracket depth 0: candidate batch boundaries.
    line_breaks: Vec<usize>,
    /// Every newline from `start` to `body_close` (in strings and comments too).
    newlines: usize,
}

/// Instruction lines per batch handed to pest (bounds its token queue).
const BATCH_LINES: usize = 1024;

/// Find the pieces of the computation that starts at `start`. A `{` at bracket depth 0
/// opens the body unless an int or `:` follows it (then it is a layout of the
/// signature's result shape). `None` for text that cannot be delimited.
fn computation_span(src: &str, start: usize) -> Option<CompSpan> {
    let b = src.as_bytes();
    let mut specials = Specials::new(b);
    let mut i = start;
    let mut depth = 0usize;
    let mut body_open = None;
    let mut line_breaks = Vec::new();
    let mut newlines = 0usize;
    let count = |r: &[u8]| memchr::memchr_iter(b'\n', r).count();
    loop {
        i = specials.next(i);
        if i >= b.len() {
            break;
        }
        match b[i] {
            b'"' => {
                let e = string_end(b, i);
                newlines += count(&b[i..e.min(b.len())]);
                i = e;
            }
            b'/' if matches!(b.get(i + 1), Some(b'/') | Some(b'*')) => {
                let j = skip_space(src, i);
                newlines += count(&b[i..j]);
                i = j;
                continue;
            }
            b'\n' => {
                newlines += 1;
                if depth == 1 && body_open.is_some() {
                    line_breaks.push(i);
                }
            }
            b'{' => {
                if depth == 0 && body_open.is_none() {
                    let j = skip_space(src, i + 1);
                    let layout = b.get(j).is_some_and(|c| c.is_ascii_digit() || *c == b':');
                    if !layout {
                        body_open = Some(i);
                    }
                }
                depth += 1;
            }
            b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 && b[i] == b'}' {
                    if let Some(open) = body_open {
                        // Trailing computation attributes: `, name=value` ...
                        let mut end = i + 1;
                        loop {
                            let j = skip_space(src, end);
                            if b.get(j) != Some(&b',') {
                                break;
                            }
                            end = attribute_end(src, j + 1);
                        }
                        return Some(CompSpan {
                            start,
                            body_open: open,
                            body_close: i,
                            end,
                            line_breaks,
                            newlines,
                        });
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Read one computation from its pieces; the body is read in batches of
/// `batch_lines` lines (`usize::MAX` = all at once). `fast` reads head and body with
/// the printer-form rules (`fast_head`, `fast_batch`), which fail on anything else.
fn read_computation(
    file: &str,
    src: &str,
    span: &CompSpan,
    cx: &mut Cx<'_>,
    batch_lines: usize,
    fast: bool,
) -> Result<(Computation, bool), HloError> {
    let parse = |rule: Rule, from: usize, to: usize| {
        HloGrammar::parse(rule, &src[from..to])
            .map_err(|e| {
                if fast {
                    // Not the printer's form: the general rules will say what is wrong.
                    not_fast()
                } else {
                    pest_error(file, src, from, e)
                }
            })
            .map(|mut p| p.next().map(|p| p.into_inner()))
    };
    let b = Builder {
        file,
        src,
        base: span.start,
        fast,
    };
    let mut cb = CompBuilder::new(span.line_breaks.len() + 1);
    cb.comp.line = cx.lines.line_of(src, span.start) as u32;
    // One head item (the fast rules only delimit parameter names and shapes: check them
    // as the general rules would).
    let head_item = |p: P<'_>, cb: &mut CompBuilder| -> Result<(), HloError> {
        match p.as_rule() {
            Rule::entry_kw => cb.is_entry = true,
            Rule::name => cb.comp.name = strip_pct(p.as_str()).to_string(),
            Rule::name_tok => cb.comp.name = b.name_tok(&p)?.to_string(),
            Rule::param_tok => {
                b.name_tok(&p)?;
            }
            Rule::sig_param => {
                // `name: shape`; the name stops at the first `:`.
                let t = p.as_str();
                let colon = t.bytes().position(|c| c == b':').ok_or_else(not_fast)?;
                name_of_token(&t[..colon]).ok_or_else(not_fast)?;
                scanned_shape(t.get(colon + 2..).ok_or_else(not_fast)?)?;
            }
            Rule::array_tok | Rule::tuple_shape => {
                b.shape(p)?;
            }
            _ => {}
        }
        Ok(())
    };
    if fast && span.line_breaks.len() < batch_lines {
        // A computation of one batch (most are): head, body and closing brace in one go.
        if let Some(all) = parse(Rule::fast_computation, span.start, span.end)? {
            // One instruction per line, each after `\n  `, then `\n}`: positions follow
            // from the line structure (checked below against the newline count).
            let mut line = cb.comp.line;
            for p in all {
                if p.as_rule() == Rule::fast_instruction {
                    line += 1;
                    b.add_instruction(p, &mut cb, cx, Pos::Known(line, 3), false)?;
                } else {
                    head_item(p, &mut cb)?;
                }
            }
        }
        // A newline inside a token (a string, a brace value, `parameter\n(0)`) breaks
        // the one-line-per-instruction numbering: the general rules count instead.
        if cb.comp.order.len() + 1 != span.newlines {
            return Err(not_fast());
        }
        return b.finish_computation(cb);
    }
    let head_rule = if fast {
        Rule::fast_head
    } else {
        Rule::computation_head
    };
    if let Some(head) = parse(head_rule, span.start, span.body_open + 1)? {
        for p in head {
            head_item(p, &mut cb)?;
        }
    }
    // Batch boundaries: every `batch_lines`-th depth-0 newline of the body.
    let mut from = span.body_open + 1;
    let mut cuts: Vec<usize> = span
        .line_breaks
        .iter()
        .copied()
        .skip(batch_lines.saturating_sub(1))
        .step_by(batch_lines.max(1))
        .filter(|_| batch_lines != usize::MAX)
        .collect();
    cuts.push(span.body_close);
    for to in cuts {
        let b = Builder {
            file,
            src,
            base: from,
            fast,
        };
        let rule = if fast {
            Rule::fast_batch
        } else {
            Rule::instruction_batch
        };
        if let Some(batch) = parse(rule, from, to)? {
            for p in batch {
                if matches!(p.as_rule(), Rule::instruction | Rule::fast_instruction) {
                    b.add_instruction(p, &mut cb, cx, Pos::Count, false)?;
                }
            }
        }
        from = to;
    }
    let tb = Builder {
        file,
        src,
        base: span.body_close,
        fast,
    };
    if let Some(tail) = parse(Rule::computation_tail, span.body_close, span.end)? {
        for p in tail {
            if p.as_rule() == Rule::attribute {
                tb.computation_attribute(p, &mut cb.comp)?;
            }
        }
    }
    b.finish_computation(cb)
}

/// A computation being built, instruction by instruction.
struct CompBuilder<'a> {
    comp: Computation,
    is_entry: bool,
    names: NameMap<'a>,
    explicit_root: Option<InstrId>,
    param_numbers: Vec<(i64, InstrId, usize)>,
    pending_ctrl: Vec<(InstrId, usize)>,
    shapes: ShapeMemo<'a>,
    /// Names the parser gave to nested operands (`negate.anon`), which are not slices
    /// of the text; usually empty.
    anon: HashMap<String, InstrId, foldhash::fast::FixedState>,
}

/// What reading an instruction may add beyond its computation: inline computation
/// bodies (to the module's computations), names (to the module-wide uniquers) and
/// line positions.
struct Cx<'c> {
    comps: &'c mut indexmap::IndexMap<String, Computation>,
    naming: &'c mut Naming,
    lines: &'c mut LineCounter,
}

/// Module-wide names, as XLA's parser keeps them to name what the text does not
/// (`src/hlo/names.rs`). Set up, by replaying the names read so far, on the first
/// nested operand or inline body: a module without either never pays for it.
#[derive(Clone, Default)]
struct Naming {
    instrs: Option<NameUniquer>,
    comps: Option<NameUniquer>,
}

impl Naming {
    fn activate(&mut self, comps: &indexmap::IndexMap<String, Computation>, cur: &Computation) {
        if self.instrs.is_some() {
            return;
        }
        let mut i = NameUniquer::default();
        let mut c = NameUniquer::default();
        for (name, comp) in comps {
            c.register(name);
            for &id in &comp.order {
                i.register(&comp.graph[id].name);
            }
        }
        for &id in &cur.order {
            i.register(&cur.graph[id].name);
        }
        self.instrs = Some(i);
        self.comps = Some(c);
    }
}

impl<'a> CompBuilder<'a> {
    /// `n`: about how many instructions (lines) the body has.
    fn new(n: usize) -> Self {
        let mut comp = Computation::new("");
        comp.graph = petgraph::stable_graph::StableDiGraph::with_capacity(n, 2 * n);
        comp.order.reserve(n);
        CompBuilder {
            comp,
            is_entry: false,
            names: NameMap::with_capacity_and_hasher(n, Default::default()),
            explicit_root: None,
            param_numbers: Vec::new(),
            pending_ctrl: Vec::new(),
            shapes: ShapeMemo::default(),
            anon: HashMap::default(),
        }
    }
}

/// End of one `name=value` (value ends at bracket depth 0 before whitespace or `,`).
fn attribute_end(src: &str, start: usize) -> usize {
    let b = src.as_bytes();
    let mut i = skip_space(src, start);
    let mut depth = 0usize;
    while i < b.len() {
        match b[i] {
            b'"' => i = string_end(b, i),
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => {
                if depth == 0 {
                    return i;
                }
                depth -= 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' | b',' if depth == 0 => return i,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Split a file on lines that are exactly `// -----` (XLA's lit-test convention) and
/// return each part that holds something other than comments, with the line it starts on.
pub fn split_modules(src: &str) -> Vec<(usize, &str)> {
    let mut parts = Vec::new();
    let mut start = 0usize;
    let mut start_line = 1usize;
    let mut pos = 0usize;
    for (line_no, line) in (1usize..).zip(src.split_inclusive('\n')) {
        let content = line.strip_suffix('\n').unwrap_or(line);
        let content = content.strip_suffix('\r').unwrap_or(content);
        if content == "// -----" {
            parts.push((start_line, &src[start..pos]));
            start = pos + line.len();
            start_line = line_no + 1;
        }
        pos += line.len();
    }
    parts.push((start_line, &src[start..]));
    parts
        .into_iter()
        .filter(|(_, p)| {
            p.lines().any(|l| {
                let t = l.trim();
                !t.is_empty() && !t.starts_with("//")
            })
        })
        .collect()
}

/// Reject inputs nested deeper than [`MAX_NESTING`] before the recursive grammar sees
/// them (so that 100,000 `{` is an error, not a stack overflow).
fn check_nesting(file: &str, src: &str) -> Result<(), HloError> {
    let b = src.as_bytes();
    let mut specials = Specials::new(b);
    let mut depth = 0usize;
    let mut i = 0usize;
    loop {
        i = specials.next(i);
        if i >= b.len() {
            break;
        }
        match b[i] {
            b'"' => i = string_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'{' | b'(' | b'[' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(HloError::at(
                        file,
                        src,
                        i,
                        format!("brackets nested more than {MAX_NESTING} deep"),
                    ));
                }
            }
            b'}' | b')' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

fn rule_name(r: &Rule) -> &'static str {
    match r {
        Rule::EOI => "end of input",
        Rule::name => "a name",
        Rule::ident => "an identifier",
        Rule::int => "an integer",
        Rule::string => "a string",
        Rule::brace => "'{...}'",
        Rule::paren => "'(...)'",
        Rule::tuple_shape | Rule::array_shape | Rule::buffer_shape => "a shape",
        Rule::attribute | Rule::attr_name | Rule::ecl_attr | Rule::literal_attr => {
            "an attribute (name=value)"
        }
        Rule::attr_value => "an attribute value",
        Rule::header => "'HloModule'",
        Rule::stack_frames => "a stack-frame section",
        Rule::computation => "a computation",
        Rule::entry_kw => "'ENTRY'",
        Rule::signature => "a signature '(...) -> shape'",
        Rule::instruction => "an instruction 'name = shape opcode(operands)'",
        Rule::root_kw => "'ROOT'",
        Rule::constant_body | Rule::parameter_body | Rule::op_body => "an opcode and operands",
        Rule::opcode => "an opcode",
        Rule::operand => "an operand",
        Rule::program_shape => "a program shape '(...)->shape'",
        _ => "valid HLO",
    }
}

fn pest_error(file: &str, src: &str, base: usize, e: pest::error::Error<Rule>) -> HloError {
    use pest::error::{ErrorVariant, InputLocation};
    let offset = base
        + match e.location {
            InputLocation::Pos(p) => p,
            InputLocation::Span((a, _)) => a,
        };
    let msg = match &e.variant {
        ErrorVariant::ParsingError { positives, .. } => {
            let mut names: Vec<&str> = positives.iter().map(rule_name).collect();
            names.sort_unstable();
            names.dedup();
            let found = src[offset.min(src.len())..]
                .chars()
                .take_while(|c| !c.is_whitespace())
                .take(24)
                .collect::<String>();
            let found = if found.is_empty() {
                "end of input".to_string()
            } else {
                format!("'{found}'")
            };
            if names.is_empty() {
                format!("syntax error at {found}")
            } else {
                format!("expected {}, found {found}", names.join(" or "))
            }
        }
        ErrorVariant::CustomError { message } => message.clone(),
    };
    HloError::at(file, src, offset, msg)
}

struct Builder<'a> {
    file: &'a str,
    /// The whole module text (errors are located in it).
    src: &'a str,
    /// Offset of the text the current pairs were parsed from.
    base: usize,
    /// Reading with the printer-form rules: an inline computation body sends the
    /// computation to the general rules.
    fast: bool,
}

type P<'i> = Pair<'i, Rule>;

fn strip_pct(s: &str) -> &str {
    s.strip_prefix('%').unwrap_or(s)
}

impl<'a> Builder<'a> {
    /// Error at an offset relative to the current pairs' text.
    fn err_at(&self, offset: usize, msg: impl Into<String>) -> HloError {
        HloError::at(self.file, self.src, self.base + offset, msg)
    }

    /// Error at an absolute offset in the module text.
    fn err_abs(&self, offset: usize, msg: impl Into<String>) -> HloError {
        HloError::at(self.file, self.src, offset, msg)
    }

    fn value_err(&self, base: usize, e: ValueError) -> HloError {
        self.err_at(base + e.offset, e.message)
    }

    fn module_attr(&self, a: P<'a>, attrs: &mut ModuleAttrs) -> Result<(), HloError> {
        let mut inner = a.into_inner();
        let first = match inner.next() {
            Some(i) => i,
            None => return Ok(()),
        };
        match first.as_rule() {
            Rule::ecl_attr => {
                let ps = match first.into_inner().next() {
                    Some(p) => p,
                    None => return Ok(()),
                };
                let mut shapes: Vec<Shape> = Vec::new();
                for s in ps.into_inner() {
                    let mut sh = self.shape(s)?;
                    sh.fill_default_layouts();
                    shapes.push(sh);
                }
                let result = shapes.pop().unwrap_or(Shape::Tuple(vec![]));
                attrs.entry_computation_layout = Some((shapes, result));
            }
            Rule::attr_name => {
                let n = first.as_str();
                let n = &n[..n.len() - 1];
                let v = inner.next().map(|v| v.as_str()).unwrap_or("");
                if n == "is_scheduled" && v == "true" {
                    attrs.is_scheduled = true;
                } else {
                    attrs.other.push((n.to_string(), v.to_string()));
                }
            }
            _ => {
                let t = first.as_str();
                let (k, v) = t.split_once('=').unwrap_or((t, ""));
                attrs.other.push((k.to_string(), v.trim().to_string()));
            }
        }
        Ok(())
    }

    /// Read one instruction (an `instruction`, `fast_instruction` or, with `nested`, a
    /// `nested_instr` operand, which gets its name from the module-wide uniquer as in
    /// XLA: `<opcode>.anon`) and add it to the computation.
    fn add_instruction(
        &self,
        p: P<'a>,
        cb: &mut CompBuilder<'a>,
        cx: &mut Cx<'_>,
        pos: Pos,
        nested: bool,
    ) -> Result<InstrId, HloError> {
        let istart = p.as_span().start();
        let (mut instr, operands, is_root, name) = self.instruction(p, cb, cx, pos)?;
        let anon = if nested {
            cx.naming.activate(cx.comps, &cb.comp);
            let u = cx.naming.instrs.as_mut().ok_or_else(not_fast)?;
            let n = u.unique(&format!("{}.anon", instr.opcode.name()));
            instr.name = n.as_str().into();
            Some(n)
        } else {
            if let Some(u) = cx.naming.instrs.as_mut() {
                u.register(name);
            }
            None
        };
        let taken = match &anon {
            Some(n) => cb.names.contains_key(n.as_str()) || cb.anon.contains_key(n),
            None => {
                cb.names.contains_key(name) || (!cb.anon.is_empty() && cb.anon.contains_key(name))
            }
        };
        if taken {
            return Err(self.err_at(
                istart,
                format!(
                    "instruction '{}' is defined twice in computation '{}'",
                    instr.name, cb.comp.name
                ),
            ));
        }
        let pnum = instr.attrs.parameter_number;
        let has_ctrl = !instr.attrs.control_predecessors.is_empty();
        let id = cb.comp.add(instr, &operands);
        match anon {
            Some(n) => {
                cb.anon.insert(n, id);
            }
            None => {
                cb.names.insert(name, id);
            }
        }
        if let Some(n) = pnum {
            cb.param_numbers.push((n, id, self.base + istart));
        }
        if has_ctrl {
            cb.pending_ctrl.push((id, self.base + istart));
        }
        if is_root {
            if cb.explicit_root.is_some() {
                return Err(self.err_at(
                    istart,
                    format!("computation '{}' has more than one ROOT", cb.comp.name),
                ));
            }
            cb.explicit_root = Some(id);
        }
        Ok(id)
    }

    fn computation_attribute(&self, p: P<'a>, comp: &mut Computation) -> Result<(), HloError> {
        let mut inner = p.into_inner();
        if let Some(n) = inner.next() {
            let key = n.as_str();
            match (key, inner.next()) {
                ("execution_thread=", Some(v)) => {
                    let s = av::string(v.as_str())
                        .map_err(|e| self.value_err(v.as_span().start(), e))?;
                    comp.execution_thread = Some(s);
                }
                _ => {
                    let k = key.split('=').next().unwrap_or(key);
                    return Err(self.err_at(
                        n.as_span().start(),
                        format!("unknown computation attribute '{k}'"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks that need the whole computation; `self.base` is the computation start.
    fn finish_computation(&self, cb: CompBuilder<'a>) -> Result<(Computation, bool), HloError> {
        let CompBuilder {
            mut comp,
            is_entry,
            names,
            explicit_root,
            mut param_numbers,
            pending_ctrl,
            ..
        } = cb;
        // Control predecessors must be defined earlier in the same computation.
        for (id, at) in pending_ctrl {
            for p in &comp.graph[id].attrs.control_predecessors {
                match names.get(p.as_str()) {
                    Some(&pid) if pid.index() < id.index() => {}
                    _ => {
                        return Err(self.err_abs(
                            at,
                            format!("control predecessor '{p}' is not defined before its use"),
                        ))
                    }
                }
            }
        }
        comp.root = match explicit_root.or_else(|| comp.order.last().copied()) {
            Some(r) => r,
            None => return Err(self.err_at(0, "computation has no instructions")),
        };
        // Parameters must be numbered 0..k-1, each once.
        param_numbers.sort_by_key(|(n, _, _)| *n);
        for (i, (n, id, at)) in param_numbers.iter().enumerate() {
            if *n != i as i64 {
                let msg = if i > 0 && param_numbers[i - 1].0 == *n {
                    format!("parameter number {n} is used twice")
                } else {
                    format!(
                        "parameter numbers must be 0..{} without gaps; found {n}",
                        param_numbers.len().saturating_sub(1)
                    )
                };
                return Err(self.err_abs(*at, msg));
            }
            comp.params.push(*id);
        }
        comp.graph.shrink_to_fit();
        comp.order.shrink_to_fit();
        Ok((comp, is_entry))
    }

    #[allow(clippy::type_complexity)]
    fn instruction(
        &self,
        pair: P<'a>,
        cb: &mut CompBuilder<'a>,
        cx: &mut Cx<'_>,
        pos: Pos,
    ) -> Result<(Instruction, SmallVec<[InstrId; 4]>, bool, &'a str), HloError> {
        let start = pair.as_span().start();
        let (line, col) = match pos {
            Pos::Known(l, c) => (l, c),
            Pos::Count => cx.lines.line_col(self.src, self.base + start),
        };
        let mut is_root = false;
        let mut name: &'a str = "";
        // A shape token of the fast path (shared through `shapes`), or a shape read by
        // the general rules.
        let mut shared: Option<SharedShape> = None;
        let mut shape: Option<Shape> = None;
        let mut opcode = Opcode::Tuple;
        let mut wrapped = None;
        // Allocated on the first attribute written (instructions without any allocate
        // nothing); built in place on the heap.
        let mut attrs = crate::ir::SharedAttrs::default();
        let mut operands: SmallVec<[InstrId; 4]> = SmallVec::new();
        let mut op_at = start;
        let mut seen: SmallVec<[&'a str; 8]> = SmallVec::new();
        let mut attr_pairs: SmallVec<[P<'a>; 8]> = SmallVec::new();
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::root_kw => is_root = true,
                Rule::name => name = strip_pct(p.as_str()),
                Rule::name_tok => name = self.name_tok(&p)?,
                Rule::fast_def => {
                    // `name = shape`, both scanned up to a blank.
                    let t = p.as_str();
                    let sp = t.bytes().position(|c| c == b' ').ok_or_else(not_fast)?;
                    let (n, sh) = (&t[..sp], t.get(sp + 3..).ok_or_else(not_fast)?);
                    name = name_of_token(n).ok_or_else(not_fast)?;
                    shared = Some(memo_shape(&mut cb.shapes, sh)?);
                }
                Rule::array_shape | Rule::array_tok | Rule::tuple_shape | Rule::buffer_shape => {
                    shape = Some(self.shape(p)?)
                }
                Rule::constant_body => {
                    opcode = Opcode::Constant;
                    op_at = p.as_span().start();
                    if let Some(lit) = p.into_inner().next() {
                        let t = lit.as_str();
                        attrs.literal = Some(t[1..t.len() - 1].trim().to_string());
                    }
                }
                Rule::parameter_body => {
                    opcode = Opcode::Parameter;
                    op_at = p.as_span().start();
                    if let Some(n) = p.into_inner().next() {
                        let v = av::int(n.as_str())
                            .map_err(|e| self.value_err(n.as_span().start(), e))?;
                        if v < 0 {
                            return Err(
                                self.err_at(n.as_span().start(), "negative parameter number")
                            );
                        }
                        attrs.parameter_number = Some(v);
                    }
                }
                Rule::fast_op => {
                    op_at = p.as_span().start();
                    (opcode, wrapped) = fast_op(p.as_str(), &cb.names, &mut operands)?;
                }
                Rule::fast_line => {
                    // `name = shape body`: the name and the shape hold no blank.
                    let t = p.as_str();
                    let sp = t.bytes().position(|c| c == b' ').ok_or_else(not_fast)?;
                    name = name_of_token(&t[..sp]).ok_or_else(not_fast)?;
                    let rest = t.get(sp + 3..).ok_or_else(not_fast)?;
                    let sp2 = rest.bytes().position(|c| c == b' ').ok_or_else(not_fast)?;
                    shared = Some(memo_shape(&mut cb.shapes, &rest[..sp2])?);
                    let body = &rest[sp2 + 1..];
                    op_at = p.as_span().start() + sp + 3 + sp2 + 1;
                    let number = body
                        .strip_prefix("parameter(")
                        .and_then(|r| r.strip_suffix(')'))
                        .filter(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()));
                    match number {
                        Some(n) => {
                            opcode = Opcode::Parameter;
                            attrs.parameter_number = Some(n.parse().map_err(|_| not_fast())?);
                        }
                        None => (opcode, wrapped) = fast_op(body, &cb.names, &mut operands)?,
                    }
                }
                Rule::op_body => {
                    let mut inner = p.into_inner();
                    if let Some(o) = inner.next() {
                        op_at = o.as_span().start();
                        let t = o.as_str();
                        match Opcode::from_name(t) {
                            Some(op) => opcode = op,
                            None => match async_sugar(t) {
                                Some((op, w)) => {
                                    opcode = op;
                                    wrapped = Some(w)
                                }
                                None => {
                                    return Err(self.err_at(op_at, format!("unknown opcode '{t}'")))
                                }
                            },
                        }
                    }
                    for operand in inner {
                        let oat = operand.as_span().start();
                        let mut oname = "";
                        let mut oshape = None;
                        let mut nested = None;
                        for q in operand.into_inner() {
                            match q.as_rule() {
                                Rule::name => oname = strip_pct(q.as_str()),
                                Rule::nested_instr => {
                                    nested =
                                        Some(self.add_instruction(q, cb, cx, Pos::Count, true)?)
                                }
                                _ => oshape = Some((q.as_span().start(), self.shape(q)?)),
                            }
                        }
                        if let Some(id) = nested {
                            operands.push(id);
                            continue;
                        }
                        let found = cb.names.get(oname).or_else(|| cb.anon.get(oname)).copied();
                        let id = match found {
                            Some(id) => id,
                            None => {
                                return Err(self.err_at(
                                    oat,
                                    format!("operand '{oname}' is not defined (before this use) in computation '{}'", cb.comp.name),
                                ))
                            }
                        };
                        if let Some((sat, s)) = oshape {
                            if !s.compatible(&cb.comp.graph[id].shape) {
                                return Err(self.err_at(
                                    sat,
                                    format!("operand shape does not match the shape of '{oname}'"),
                                ));
                            }
                        }
                        operands.push(id);
                    }
                }
                Rule::attribute | Rule::fast_attrs => attr_pairs.push(p),
                _ => {}
            }
        }
        if !attr_pairs.is_empty() {
            // One copy-on-write check for all of the instruction's attributes.
            let attrs_mut: &mut Attrs = &mut attrs;
            for p in attr_pairs {
                let pieces = if p.as_rule() == Rule::fast_attrs {
                    self.fast_attr_pieces(&p)?
                } else {
                    let at = p.as_span().start();
                    let (key, value, vat) = self.general_attribute(p)?;
                    smallvec::smallvec![(key, value, at, vat)]
                };
                for (key, value, at, vat) in pieces {
                    self.apply_attribute(
                        key, value, at, vat, opcode, attrs_mut, &mut seen, cb, cx,
                    )?;
                }
            }
        }
        // A broadcast of a scalar may leave out `dimensions`; XLA's parser gives it
        // `dimensions={}`, and so does the printed form.
        if opcode == Opcode::Broadcast && attrs.dimensions.is_none() {
            if let [o] = operands[..] {
                if cb.comp.graph[o]
                    .shape
                    .as_array()
                    .is_some_and(|a| a.rank() == 0)
                {
                    attrs.dimensions = Some(Default::default());
                }
            }
        }
        // `parameter()` reaches here through the generic operand list: XLA's parser
        // requires the number, and without it the printer could not write the module back.
        if opcode == Opcode::Parameter && attrs.parameter_number.is_none() {
            return Err(self.err_at(
                op_at,
                "parameter needs its number, as in parameter(0)".to_string(),
            ));
        }
        if wrapped.is_none() {
            if let Some(n) = opcode.arity() {
                if operands.len() != n {
                    return Err(self.err_at(
                        op_at,
                        format!(
                            "'{}' takes {n} operand{}, found {}",
                            opcode.name(),
                            if n == 1 { "" } else { "s" },
                            operands.len()
                        ),
                    ));
                }
            }
        }
        let shape: SharedShape = match (shared, shape) {
            (Some(s), _) => s,
            (None, Some(mut s)) => {
                s.fill_default_layouts();
                s.into()
            }
            (None, None) => {
                // As XLA's parser: the shape from the operands and attributes
                // (crate::analysis::infer), for the opcodes XLA infers.
                if !crate::analysis::infer::infers_omitted_shape(opcode) || wrapped.is_some() {
                    return Err(self.err_at(
                        op_at,
                        format!("'{}' needs an explicit result shape", opcode.name()),
                    ));
                }
                let mut instr = Instruction {
                    name: name.into(),
                    opcode,
                    async_wrapped: wrapped,
                    shape: SharedShape::new(Shape::Tuple(vec![])),
                    attrs,
                    line,
                    col,
                };
                let ops: SmallVec<[&Shape; 4]> =
                    operands.iter().map(|&o| &*cb.comp.graph[o].shape).collect();
                let mut s = crate::analysis::infer::infer_omitted_shape(cx.comps, &instr, &ops)
                    .map_err(|e| {
                        self.err_at(
                            op_at,
                            format!("cannot infer the shape of '{}': {e}", opcode.name()),
                        )
                    })?;
                s.fill_default_layouts();
                instr.shape = SharedShape::new(s);
                return Ok((instr, operands, is_root, name));
            }
        };
        let instr = Instruction {
            name: name.into(),
            opcode,
            async_wrapped: wrapped,
            shape,
            attrs,
            line,
            col,
        };
        Ok((instr, operands, is_root, name))
    }

    /// `(name, value, value offset)` of an attribute read by the general rules.
    fn general_attribute(&self, p: P<'a>) -> Result<(&'a str, &'a str, usize), HloError> {
        let at = p.as_span().start();
        let mut inner = p.into_inner();
        let Some(first) = inner.next() else {
            return Err(self.err_at(at, "empty attribute"));
        };
        Ok(match first.as_rule() {
            Rule::attr_name => {
                let n = first.as_str();
                let v = inner.next();
                let (vs, vat) = v
                    .map(|v| (v.as_str(), v.as_span().start()))
                    .unwrap_or(("", at));
                (&n[..n.len() - 1], vs, vat)
            }
            Rule::literal_attr => {
                let t = first.as_str();
                (
                    "literal",
                    t["literal=".len()..].trim(),
                    at + "literal=".len(),
                )
            }
            _ => {
                let t = first.as_str();
                let (k, v) = t.split_once('=').unwrap_or((t, ""));
                (k, v, at + k.len() + 1)
            }
        })
    }

    /// The attributes of a fast-path instruction, `(name, value, at, value at)`: one
    /// `fast_attrs` token, split here where the grammar's pieces end.
    #[allow(clippy::type_complexity)]
    fn fast_attr_pieces(
        &self,
        p: &P<'a>,
    ) -> Result<SmallVec<[(&'a str, &'a str, usize, usize); 4]>, HloError> {
        let base = p.as_span().start();
        let t = p.as_str();
        let b = t.as_bytes();
        let mut out = SmallVec::new();
        let mut i = 0;
        while i < b.len() {
            // `, name=`: the name stops at the first `=`.
            i += 2;
            let start = i;
            let eq = i + memchr::memchr(b'=', &b[i..]).ok_or_else(not_fast)?;
            let key = &t[start..eq];
            i = fast_value_end(b, eq + 1).ok_or_else(not_fast)?;
            let value = &t[eq + 1..i];
            // The general rules read these two keys with their own rules.
            if !key.bytes().all(is_ident_byte)
                || key == "literal"
                || key == "entry_computation_layout"
                || !fast_value_ok(value)
            {
                return Err(not_fast());
            }
            out.push((key, value, base + start, base + eq + 1));
        }
        Ok(out)
    }

    /// Type one attribute (`at`: where it starts, `vat`: where its value starts).
    #[allow(clippy::too_many_arguments)]
    fn apply_attribute(
        &self,
        key: &'a str,
        value: &'a str,
        at: usize,
        vat: usize,
        opcode: Opcode,
        attrs: &mut Attrs,
        seen: &mut SmallVec<[&'a str; 8]>,
        cb: &CompBuilder<'a>,
        cx: &mut Cx<'_>,
    ) -> Result<(), HloError> {
        if seen.contains(&key) {
            return Err(self.err_at(at, format!("attribute '{key}' is given twice")));
        }
        seen.push(key);
        // Nearly every instruction of XLA's output has metadata: settle it first.
        if key == "metadata" {
            attrs.metadata = Some(value.to_string());
            return Ok(());
        }
        let ve = |e: ValueError| self.value_err(vat, e);
        use Opcode as O;
        match key {
            "dimensions" => attrs.dimensions = Some(av::int_list(value).map_err(ve)?),
            "window" => attrs.window = Some(Box::new(av::window(value).map_err(ve)?)),
            "dim_labels" => attrs.conv_dims = Some(Box::new(av::dim_labels(value).map_err(ve)?)),
            "lhs_contracting_dims"
            | "rhs_contracting_dims"
            | "lhs_batch_dims"
            | "rhs_batch_dims" => {
                let v = av::int_list(value).map_err(ve)?;
                let d = attrs.dot_dims.get_or_insert_with(Default::default);
                match key {
                    "lhs_contracting_dims" => d.lhs_contracting = v,
                    "rhs_contracting_dims" => d.rhs_contracting = v,
                    "lhs_batch_dims" => d.lhs_batch = v,
                    _ => d.rhs_batch = v,
                }
            }
            "slice" if opcode == O::Slice => {
                attrs.slice = Some(av::slice(value).map_err(ve)?.into_vec().into_boxed_slice())
            }
            "padding" if opcode == O::Pad => {
                attrs.padding = Some(
                    av::padding(value)
                        .map_err(ve)?
                        .into_vec()
                        .into_boxed_slice(),
                )
            }
            "kind" if opcode == O::Fusion => {
                attrs.fusion_kind =
                    Some(FusionKind::from_name(value.trim()).ok_or_else(|| {
                        self.err_at(vat, format!("unknown fusion kind '{value}'"))
                    })?)
            }
            "to_apply"
            | "calls"
            | "condition"
            | "body"
            | "true_computation"
            | "false_computation"
            | "branch_computations"
            | "called_computations" => self.called(key, value, vat, attrs, cb, cx)?,
            "select" | "scatter" if opcode == O::SelectAndScatter => {
                self.called(key, value, vat, attrs, cb, cx)?
            }
            "direction" if opcode == O::Compare => {
                attrs.comparison = Some(Comparison::from_name(value.trim()).ok_or_else(|| {
                    self.err_at(vat, format!("unknown comparison direction '{value}'"))
                })?)
            }
            "type" if opcode == O::Compare => {
                attrs.comparison_type = Some(value.trim().to_string())
            }
            "index" if opcode == O::GetTupleElement => {
                attrs.tuple_index = Some(av::int(value).map_err(ve)?)
            }
            "iota_dimension" => attrs.iota_dimension = Some(av::int(value).map_err(ve)?),
            "feature_group_count" => attrs.feature_group_count = Some(av::int(value).map_err(ve)?),
            "batch_group_count" => attrs.batch_group_count = Some(av::int(value).map_err(ve)?),
            "fft_type" => attrs.fft_type = Some(value.trim().to_string()),
            "fft_length" => {
                attrs.fft_length = Some(
                    av::int_list(value)
                        .map_err(ve)?
                        .into_vec()
                        .into_boxed_slice(),
                )
            }
            "offset_dims"
            | "collapsed_slice_dims"
            | "start_index_map"
            | "operand_batching_dims"
            | "start_indices_batching_dims"
                if opcode == O::Gather =>
            {
                let v = av::int_list(value).map_err(ve)?;
                let g = attrs.gather.get_or_insert_with(Default::default);
                match key {
                    "offset_dims" => g.offset_dims = v,
                    "collapsed_slice_dims" => g.collapsed_slice_dims = v,
                    "start_index_map" => g.start_index_map = v,
                    "operand_batching_dims" => g.operand_batching_dims = v,
                    _ => g.start_indices_batching_dims = v,
                }
            }
            "slice_sizes" if opcode == O::Gather => {
                attrs
                    .gather
                    .get_or_insert_with(Default::default)
                    .slice_sizes = av::int_list(value).map_err(ve)?
            }
            "index_vector_dim" if opcode == O::Gather => {
                attrs
                    .gather
                    .get_or_insert_with(Default::default)
                    .index_vector_dim = av::int(value).map_err(ve)?
            }
            "update_window_dims"
            | "inserted_window_dims"
            | "scatter_dims_to_operand_dims"
            | "input_batching_dims"
            | "scatter_indices_batching_dims"
                if opcode == O::Scatter =>
            {
                let v = av::int_list(value).map_err(ve)?;
                let s = attrs.scatter.get_or_insert_with(Default::default);
                match key {
                    "update_window_dims" => s.update_window_dims = v,
                    "inserted_window_dims" => s.inserted_window_dims = v,
                    "scatter_dims_to_operand_dims" => s.scatter_dims_to_operand_dims = v,
                    "input_batching_dims" => s.input_batching_dims = v,
                    _ => s.scatter_indices_batching_dims = v,
                }
            }
            "index_vector_dim" if opcode == O::Scatter => {
                attrs
                    .scatter
                    .get_or_insert_with(Default::default)
                    .index_vector_dim = av::int(value).map_err(ve)?
            }
            "dynamic_slice_sizes" => {
                attrs.dynamic_slice_sizes = Some(
                    av::int_list(value)
                        .map_err(ve)?
                        .into_vec()
                        .into_boxed_slice(),
                )
            }
            "is_stable" => attrs.is_stable = Some(av::boolean(value).map_err(ve)?),
            "indices_are_sorted" => {
                attrs.indices_are_sorted = Some(av::boolean(value).map_err(ve)?)
            }
            "unique_indices" => attrs.unique_indices = Some(av::boolean(value).map_err(ve)?),
            "custom_call_target" => attrs.custom_call_target = Some(av::string(value).map_err(ve)?),
            "custom_call_has_side_effect" if opcode == O::CustomCall => {
                attrs.custom_call_has_side_effect = Some(av::boolean(value).map_err(ve)?)
            }
            "epsilon" => {
                attrs.epsilon =
                    Some(value.trim().parse::<f32>().map_err(|_| {
                        self.err_at(vat, format!("epsilon '{value}' is not a number"))
                    })?)
            }
            "feature_index" => attrs.feature_index = Some(av::int(value).map_err(ve)?),
            "exponent_bits" => attrs.exponent_bits = Some(av::int(value).map_err(ve)?),
            "mantissa_bits" => attrs.mantissa_bits = Some(av::int(value).map_err(ve)?),
            "distribution" => attrs.distribution = Some(value.trim().to_string()),
            "channel_id" => attrs.channel_id = Some(av::int(value).map_err(ve)?),
            "k" if opcode == O::TopK => attrs.k = Some(av::int(value).map_err(ve)?),
            "largest" if opcode == O::TopK => attrs.largest = Some(av::boolean(value).map_err(ve)?),
            "control-predecessors" => {
                for (_, n) in av::name_list(value).map_err(ve)? {
                    attrs.control_predecessors.push(n.to_string());
                }
            }
            "metadata" => attrs.metadata = Some(value.to_string()),
            "backend_config" => attrs.backend_config = Some(value.to_string()),
            "sharding" => attrs.sharding = Some(value.to_string()),
            "frontend_attributes" => attrs.frontend_attributes = Some(value.to_string()),
            _ => attrs.other.push((key.to_string(), value.to_string())),
        }
        Ok(())
    }

    fn called(
        &self,
        key: &str,
        value: &'a str,
        vat: usize,
        attrs: &mut Attrs,
        cb: &CompBuilder<'a>,
        cx: &mut Cx<'_>,
    ) -> Result<(), HloError> {
        let role = match CallRole::from_attr_name(key) {
            Some(r) => r,
            None => return Ok(()),
        };
        if value.starts_with('{') && !role.is_list() {
            let id = self.inline_body(value, vat, cb, cx)?;
            attrs.called.push((role, id));
            return Ok(());
        }
        if role.is_list() && value.starts_with('{') && value[1..].contains('{') {
            // A list with inline bodies, `branch_computations={{...}, %b}`.
            let elems = list_elements(value).ok_or_else(|| {
                self.err_at(
                    vat,
                    "expected a list of computation names or '{...}' bodies",
                )
            })?;
            for (off, e) in elems {
                let id = if e.starts_with('{') {
                    self.inline_body(e, vat + off, cb, cx)?
                } else {
                    let n = name_of_token(e)
                        .ok_or_else(|| self.err_at(vat + off, "expected a computation name"))?;
                    cx.comps.get_index_of(n).ok_or_else(|| {
                        self.err_at(
                            vat + off,
                            format!("computation '{n}' is not defined (computations must be defined before use)"),
                        )
                    })?
                };
                attrs.called.push((role, id));
            }
            return Ok(());
        }
        let comps = &*cx.comps;
        // The common case, one plain name, without the general list reader.
        if let Some(n) = name_of_token(value) {
            match comps.get_index_of(n) {
                Some(id) => {
                    attrs.called.push((role, id));
                    return Ok(());
                }
                None => {
                    return Err(self.err_at(
                        vat,
                        format!("computation '{n}' is not defined (computations must be defined before use)"),
                    ))
                }
            }
        }
        let names = av::name_list(value).map_err(|e| self.value_err(vat, e))?;
        for (off, n) in names {
            match comps.get_index_of(n) {
                Some(id) => attrs.called.push((role, id)),
                None => {
                    return Err(self.err_at(
                        vat + off,
                        format!("computation '{n}' is not defined (computations must be defined before use)"),
                    ))
                }
            }
        }
        Ok(())
    }

    /// An inline computation body, `to_apply={ instructions }` (`value` starts at
    /// `vat`): read as a computation of its own, named as XLA's parser names it (`_`,
    /// then `_.1`, ...) and placed before the computation that calls it.
    fn inline_body(
        &self,
        value: &'a str,
        vat: usize,
        parent: &CompBuilder<'a>,
        cx: &mut Cx<'_>,
    ) -> Result<CompId, HloError> {
        if self.fast {
            return Err(not_fast());
        }
        if !fast_value_ok(value) {
            return Err(self.err_at(
                vat,
                "expected a computation name or one '{...}' computation body",
            ));
        }
        cx.naming.activate(cx.comps, &parent.comp);
        let open = self.base + vat;
        let close = open + value.len() - 1;
        let b = Builder {
            file: self.file,
            src: self.src,
            base: open + 1,
            fast: false,
        };
        let body = &self.src[open + 1..close];
        let mut cb = CompBuilder::new(memchr::memchr_iter(b'\n', body.as_bytes()).count() + 1);
        cb.comp.line = cx.lines.line_of(self.src, open) as u32;
        let batch = HloGrammar::parse(Rule::instruction_batch, body)
            .map_err(|e| pest_error(self.file, self.src, open + 1, e))?
            .next();
        if let Some(batch) = batch {
            for p in batch.into_inner() {
                if p.as_rule() == Rule::instruction {
                    b.add_instruction(p, &mut cb, cx, Pos::Count, false)?;
                }
            }
        }
        let u = cx.naming.comps.as_mut().ok_or_else(not_fast)?;
        cb.comp.name = u.unique("_");
        let (comp, _) = b.finish_computation(cb)?;
        if cx.comps.contains_key(&comp.name) {
            return Err(self.err_at(vat, format!("computation '{}' is defined twice", comp.name)));
        }
        let id = cx.comps.len();
        cx.comps.insert(comp.name.clone(), comp);
        Ok(id)
    }

    fn shape(&self, p: P<'a>) -> Result<Shape, HloError> {
        match p.as_rule() {
            Rule::tuple_shape => {
                let mut v = Vec::new();
                for q in p.into_inner() {
                    v.push(self.shape(q)?);
                }
                Ok(Shape::Tuple(v))
            }
            Rule::buffer_shape => {
                let q = p.into_inner().next();
                match q {
                    Some(q) => Ok(Shape::Buffer(Box::new(self.shape(q)?))),
                    None => Ok(Shape::Tuple(vec![])),
                }
            }
            _ => self.array_shape(p),
        }
    }

    fn array_shape(&self, p: P<'a>) -> Result<Shape, HloError> {
        let start = p.as_span().start();
        let text = p.as_str();
        if matches!(p.as_rule(), Rule::array_tok) {
            return scanned_shape(text);
        }
        super::shape_text::array_shape(text)
            .map(Shape::Array)
            .map_err(|e| self.value_err(start, e))
    }

    /// The name in a scanned name token (see [`name_of_token`]).
    fn name_tok(&self, p: &P<'a>) -> Result<&'a str, HloError> {
        name_of_token(p.as_str()).ok_or_else(not_fast)
    }
}

/// The shape of a scanned token, with default layouts filled in; shared with earlier
/// instructions of the computation whose shape is written the same way.
fn memo_shape<'a>(shapes: &mut ShapeMemo<'a>, text: &'a str) -> Result<SharedShape, HloError> {
    if let Some(s) = shapes.get(text) {
        return Ok(s.clone());
    }
    let mut s = scanned_shape(text)?;
    s.fill_default_layouts();
    let s = SharedShape::new(s);
    shapes.insert(text, s.clone());
    Ok(s)
}

/// An array shape from a scanned token: the fast reader takes exactly the common valid
/// form; the rest must match the grammar's `array_shape` before the general reader.
fn scanned_shape(text: &str) -> Result<Shape, HloError> {
    if let Some(a) = super::shape_text::array_shape_fast(text) {
        return Ok(Shape::Array(a));
    }
    if HloGrammar::parse(Rule::array_shape_only, text).is_err() {
        return Err(not_fast());
    }
    super::shape_text::array_shape(text)
        .map(Shape::Array)
        .map_err(|_| not_fast())
}

/// The elements of a braced list of computations, `{%a, {...}, b}`: each a name or a
/// brace group (strings inside skipped), with its offset in `v`.
fn list_elements(v: &str) -> Option<Vec<(usize, &str)>> {
    let b = v.as_bytes();
    if b.first() != Some(&b'{') || b.last() != Some(&b'}') {
        return None;
    }
    let last = b.len() - 1;
    let mut out = Vec::new();
    let mut i = skip_space(v, 1);
    if i == last {
        return Some(out);
    }
    loop {
        let start = i;
        if b.get(i) == Some(&b'{') {
            let mut depth = 0usize;
            loop {
                match b.get(i)? {
                    b'"' => i = string_end(b, i),
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            i += 1;
        } else {
            while i < last && (b[i] == b'%' || is_ident_byte(b[i])) {
                i += 1;
            }
            if i == start {
                return None;
            }
        }
        out.push((start, &v[start..i]));
        i = skip_space(v, i);
        match b.get(i) {
            Some(b',') => i = skip_space(v, i + 1),
            Some(b'}') if i == last => return Some(out),
            _ => return None,
        }
    }
}

/// A fast-path token that the general rules must read instead (the error is never shown,
/// so it is cheap to make).
fn not_fast() -> HloError {
    HloError::whole_file("", "not in the printer's form")
}

/// The name in a scanned name token, if it is one (`%` then identifier characters, or
/// an identifier), as the grammar's `name` rule would read it.
fn name_of_token(t: &str) -> Option<&str> {
    let ok = match t.as_bytes() {
        [b'%', rest @ ..] => !rest.is_empty() && rest.iter().all(|&c| is_ident_byte(c)),
        [first, rest @ ..] => {
            (first.is_ascii_alphabetic() || *first == b'_')
                && rest.iter().all(|&c| is_ident_byte(c))
        }
        [] => false,
    };
    ok.then(|| strip_pct(t))
}

/// A fast-path `opcode(%a, %b, /*index=2*/%c)`: split at the first `(` and at `,`; each
/// piece must be a name (after one optional blank and the printer's `/*index=N*/`), so
/// a list in any other form goes to the general rules.
fn fast_op(
    t: &str,
    names: &NameMap<'_>,
    operands: &mut SmallVec<[InstrId; 4]>,
) -> Result<(Opcode, Option<Opcode>), HloError> {
    let b = t.as_bytes();
    let open = memchr::memchr(b'(', b).ok_or_else(not_fast)?;
    let op = opcode_of(&t[..open]).ok_or_else(not_fast)?;
    // The list runs from after `(` to the final `)`.
    let end = b
        .len()
        .checked_sub(1)
        .filter(|&e| e > open)
        .ok_or_else(not_fast)?;
    let mut i = open + 1;
    while i < end {
        // One piece: up to the next `,` (operand runs hold none) or the end.
        let stop = memchr::memchr(b',', &b[i..end]).map_or(end, |k| i + k);
        let mut s = i;
        if b[s] == b' ' && s > open + 1 {
            s += 1;
        }
        if b[s..stop].starts_with(b"/*index=") {
            let digits_end = s
                + 8
                + b[s + 8..stop]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
            if digits_end == s + 8 || !b[digits_end..stop].starts_with(b"*/") {
                return Err(not_fast());
            }
            s = digits_end + 2;
        }
        let oname = name_of_token(&t[s..stop]).ok_or_else(not_fast)?;
        operands.push(*names.get(oname).ok_or_else(not_fast)?);
        i = stop + 1;
        if i == end {
            // A trailing `,` leaves an empty last piece: not a valid list.
            return Err(not_fast());
        }
    }
    Ok(op)
}

/// An opcode name, or `X-start` / `X-update` / `X-done` sugar with the wrapped `X`.
fn opcode_of(t: &str) -> Option<(Opcode, Option<Opcode>)> {
    match Opcode::from_name(t) {
        Some(op) => Some((op, None)),
        None => async_sugar(t).map(|(op, w)| (op, Some(w))),
    }
}

/// The grammar's `ident_char` (a table: this runs for every byte of every name).
fn is_ident_byte(c: u8) -> bool {
    const T: [bool; 256] = {
        let mut t = [false; 256];
        let mut c = 0;
        while c < 256 {
            let b = c as u8;
            t[c] = b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-';
            c += 1;
        }
        t
    };
    T[c as usize]
}

/// Where the value of a `fast_attrs` piece that starts at `i` ends, as the grammar's
/// alternatives read it: braces balanced without regard to strings (`brace_scan`), a
/// string, or a run up to `,` or a newline. `None` when none of them matches.
fn fast_value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i) {
        Some(b'{') => {
            let mut depth = 0usize;
            let mut j = i;
            while let Some(k) = memchr::memchr2(b'{', b'}', &b[j..]) {
                j += k;
                if b[j] == b'{' {
                    depth += 1;
                } else {
                    depth -= 1;
                    if depth == 0 {
                        return Some(j + 1);
                    }
                }
                j += 1;
            }
            // Unbalanced: the grammar falls back to the run below.
            Some(run_end(b, i))
        }
        Some(b'"') => {
            let e = string_end(b, i);
            Some(if e < b.len() { e + 1 } else { run_end(b, i) })
        }
        _ => Some(run_end(b, i)),
    }
}

/// End of a run of bytes up to `,` or a newline.
fn run_end(b: &[u8], i: usize) -> usize {
    memchr::memchr2(b',', b'\n', &b[i..]).map_or(b.len(), |k| i + k)
}

/// The grammar's `plain` characters.
fn is_plain_byte(c: u8) -> bool {
    matches!(c, b'^'..=b'z' | b'-'..=b'Z' | b'#'..=b'\'' | b'*'..=b'+' | b'!' | b'\\' | b'|' | b'~')
}

/// Whether the value of a scanned `fast_attribute` is exactly what the grammar's `attr_value` reads there:
/// a brace group (the scan balances braces without looking at strings, so the group
/// must also end here when strings are skipped as the grammar does), a string, or a
/// non-empty run of `plain` characters.
fn fast_value_ok(v: &str) -> bool {
    let b = v.as_bytes();
    match b.first() {
        Some(b'{') => {
            let mut depth = 0usize;
            let mut i = 0;
            while let Some(k) = memchr::memchr3(b'"', b'{', b'}', &b[i..]) {
                i += k;
                match b[i] {
                    b'"' => i = string_end(b, i),
                    b'{' => depth += 1,
                    _ => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1 == b.len();
                        }
                    }
                }
                i += 1;
                if i >= b.len() {
                    break;
                }
            }
            false
        }
        Some(b'"') => string_end(b, 0) + 1 == b.len(),
        Some(_) => b.iter().all(|&c| is_plain_byte(c)),
        None => false,
    }
}

/// `X-start` / `X-update` / `X-done` sugar for async ops wrapping `X`.
fn async_sugar(t: &str) -> Option<(Opcode, Opcode)> {
    for (suffix, op) in [
        ("-start", Opcode::AsyncStart),
        ("-update", Opcode::AsyncUpdate),
        ("-done", Opcode::AsyncDone),
    ] {
        if let Some(base) = t.strip_suffix(suffix) {
            if let Some(w) = Opcode::from_name(base) {
                return Some((op, w));
            }
        }
    }
    None
}

/// Where an instruction starts: known (the fast path reads one per line) or counted
/// (with the context's `LineCounter`).
#[derive(Clone, Copy)]
enum Pos {
    Known(u32, u32),
    Count,
}

/// Incremental byte-offset → (line, col) conversion for increasing offsets.
#[derive(Default, Clone, Copy)]
struct LineCounter {
    offset: usize,
    line: usize,
    line_start: usize,
}

impl LineCounter {
    fn advance(&mut self, src: &str, to: usize) {
        if to < self.offset {
            *self = LineCounter::default();
        }
        let bytes = &src.as_bytes()[self.offset..to.min(src.len())];
        // Counting bytes vectorises; the last newline is found from the end.
        let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
        if newlines > 0 {
            self.line += newlines;
            if let Some(p) = bytes.iter().rposition(|&b| b == b'\n') {
                self.line_start = self.offset + p + 1;
            }
        }
        self.offset = to.min(src.len());
    }
    fn line_of(&mut self, src: &str, to: usize) -> usize {
        self.advance(src, to);
        self.line + 1
    }
    fn line_col(&mut self, src: &str, to: usize) -> (u32, u32) {
        self.advance(src, to);
        ((self.line + 1) as u32, (to - self.line_start + 1) as u32)
    }
}
