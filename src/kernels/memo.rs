//! Lowered kernels remembered by content, across the compilations of one module.
//!
//! A dataset generator compiles one module under thousands of configurations, and most
//! kernels of one compilation are, instruction for instruction and layout for layout,
//! kernels of an earlier one. [`KernelMemo`] keeps what lowering made of each kernel
//! body it has seen, and the body's default-tile evaluation on the memo's target, under
//! a key that holds the body's whole content: every instruction's opcode, laid-out
//! shape (by the input shape it lays out, an address in the input module, and its
//! packed layout, the identity the compiler's shape cache uses; by value for a shape
//! the compiler made), attributes (by identity in the input module, or by value),
//! operand positions and parameter number, and the body's root and leaves. Lowering
//! reads nothing else of a body (`lower::lower_body`), so a body with an equal key
//! lowers to an equal kernel: a remembered kernel is the kernel, not an approximation
//! of it. Keys are compared in full (no hash stands for a key). The kernel's own names
//! (its instruction's and its hero's) are the only part that differs between equal
//! bodies, and are set per use.
//!
//! [`KernelTimes`] writes the same keys with each input shape and set of attributes
//! named by its content id instead ([`super::content`]: equal values, one id), so that
//! equal bodies of different layers have one key. The memo, whose `default` search
//! changes a few tensors a configuration and finds nearly every kernel anyway, keys by
//! address: looking the ids up cost it more than the layers' sharing saved (200
//! configurations of ResNet-50 training: 2.7 % more instructions).
//!
//! `Sync`: one memo serves every thread compiling configurations of its module.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use super::content::ContentIds;
use super::kept::Kept;
use super::lower::{lower_body, lower_body_at, LowerError, LoweredKernel};
use crate::ir::{Attrs, Module};
use crate::passes::kernel::{BodyAttrs, KernelBody};
use crate::tpu::TpuTarget;

/// Shards of the table (a lock each), so that threads rarely wait for one another.
const SHARDS: usize = 16;

/// The identity of a module that a body's attribute addresses point into (its address:
/// a memo or table keys bodies of one module only).
fn module_id(module: &Module) -> usize {
    module as *const Module as usize
}

/// The shard that keeps the body keyed `key`.
fn shard_of(key: &[u8]) -> usize {
    let hash = foldhash::fast::FixedState::default().hash_one(key);
    (hash as usize) % SHARDS
}

/// What the shards of a table hold in all (`len` of each; a poisoned shard counts 0).
fn held<S>(shards: &[Mutex<S>], len: impl Fn(&S) -> usize) -> usize {
    shards
        .iter()
        .map(|s| s.lock().map(|s| len(&s)).unwrap_or(0))
        .sum()
}

/// Kernels remembered for one module and one target (see the module documentation).
pub struct KernelMemo {
    /// Identity of the module the bodies' attributes point into.
    module: usize,
    target: Arc<TpuTarget>,
    shards: Vec<Mutex<Shard>>,
    /// Bodies remembered per shard at most; a full shard forgets everything it holds and
    /// starts again (a bound on memory, not on correctness).
    per_shard: usize,
}

type Shard = HashMap<Box<[u8]>, Arc<Remembered>, foldhash::fast::FixedState>;

/// What lowering made of one kernel body.
#[derive(Debug)]
pub(crate) struct Remembered {
    /// The kernel (`None`: the body is no kernel, e.g. a zero-cost instruction), named
    /// after the body it was first lowered from.
    kernel: Option<LoweredKernel>,
    /// Position of the hero instruction in the body.
    hero: usize,
    /// The kernel's evaluation under its default tile on the memo's target.
    pub(crate) eval: OnceLock<super::program::Eval>,
}

/// A kernel as [`KernelMemo::lower`] gives it: lowered now, or remembered.
pub(crate) struct MemoKernel {
    pub kernel: LoweredKernel,
    /// The memo entry it came from (its evaluation can be shared).
    pub entry: Option<Arc<Remembered>>,
}

impl KernelMemo {
    /// An empty memo for the compilations of `module`, estimated on `target`; it
    /// remembers up to about 65,536 kernel bodies (a body takes about 4 KB: its key and
    /// its kernel).
    pub fn new(module: &Module, target: &TpuTarget) -> Self {
        Self::with_capacity(module, target, 1 << 16)
    }

    /// An empty memo that remembers up to about `bodies` kernel bodies.
    pub fn with_capacity(module: &Module, target: &TpuTarget, bodies: usize) -> Self {
        KernelMemo {
            module: module_id(module),
            target: Arc::new(target.clone()),
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: bodies.div_ceil(SHARDS).max(1),
        }
    }

    /// The target whose evaluations the memo keeps.
    pub fn target(&self) -> &TpuTarget {
        &self.target
    }

    /// The same, shared (a program lowered through the memo keeps it).
    pub(crate) fn shared_target(&self) -> Arc<TpuTarget> {
        self.target.clone()
    }

    /// Whether this memo was made for `module`.
    pub fn is_for(&self, module: &Module) -> bool {
        self.module == module_id(module)
    }

    /// Kernel bodies remembered now.
    pub fn len(&self) -> usize {
        held(&self.shards, HashMap::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`lower_body`] of `body` (a kernel of a compilation of this memo's module) named
    /// `name`: remembered when an equal body was lowered before.
    pub(crate) fn lower(
        &self,
        module: &Module,
        body: KernelBody<'_>,
        name: &str,
        key: &mut Vec<u8>,
    ) -> Result<Option<MemoKernel>, LowerError> {
        Ok(match self.find(module, body, name, key)? {
            Found::Lowered(kernel) => kernel.map(|kernel| MemoKernel {
                kernel: *kernel,
                entry: None,
            }),
            Found::Entry(r) => r.kernel.as_ref().map(|k| {
                let mut kernel = k.clone();
                kernel.rename(name);
                kernel.hero_name = body.name(r.hero);
                MemoKernel {
                    kernel,
                    entry: Some(r.clone()),
                }
            }),
        })
    }

    /// The entry of `body` (named `name` if it is lowered now), without copying its
    /// kernel out: remembered, or lowered now and remembered; or, for a body the memo
    /// cannot key (another module's, or with attributes the key does not name), the
    /// kernel lowered now.
    pub(crate) fn find(
        &self,
        module: &Module,
        body: KernelBody<'_>,
        name: &str,
        key: &mut Vec<u8>,
    ) -> Result<Found, LowerError> {
        if !self.is_for(module) || !body_key(body, key) {
            return Ok(Found::Lowered(
                lower_body(module, body, name)?.map(Box::new),
            ));
        }
        let shard = &self.shards[shard_of(key)];
        let found = shard.lock().ok().and_then(|s| s.get(&key[..]).cloned());
        if let Some(r) = found {
            return Ok(Found::Entry(r));
        }
        let lowered = lower_body_at(module, body, name)?;
        let entry = Arc::new(Remembered {
            hero: lowered.as_ref().map(|&(_, h)| h).unwrap_or(0),
            kernel: lowered.map(|(k, _)| k),
            eval: OnceLock::new(),
        });
        if let Ok(mut s) = shard.lock() {
            if s.len() >= self.per_shard {
                s.clear();
            }
            s.insert(key.as_slice().into(), entry.clone());
        }
        Ok(Found::Entry(entry))
    }
}

/// The times of small kernel bodies, for a module's compilations on one target: the
/// part of a [`KernelMemo`] that pays when configurations set every tensor (the
/// `random` search), where most kernels are new and keeping them costs more than
/// their hits save. A body of at most [`KernelTimes::MAX_BODY`] instructions (the
/// copies layout assignment inserts, a lone elementwise op or reduction, a
/// normalisation's or an activation's fusion) is keyed by its whole content, as the
/// memo keys it but with input shapes and attributes by content id (compared in full),
/// and keeps its kernel's time under its default tile alone (`None`: the body is no
/// kernel), a few dozen bytes where the memo keeps the kernel. Such bodies recur across
/// configurations and across the equal layers of a model: a copy is its tensor and its
/// two layouts. It also keeps the time of each kernel class lowered from the other bodies, under the class's structure key
/// ([`super::program::structure_key`]: what the cost model reads of a kernel, compared
/// in full), since a bigger kernel's lowered structure recurs more often than its body.
///
/// `Sync`: one table serves every thread costing configurations of its module.
pub struct KernelTimes {
    /// Identity of the module the bodies' attributes point into.
    module: usize,
    /// Content ids of the module's shapes and attributes, for keys: numbered when the
    /// first key is written (a table that keys nothing, as in the `default` search,
    /// costs nothing).
    ids: OnceLock<ContentIds>,
    target: TpuTarget,
    /// Times of small bodies, by body key ([`KernelTimes::append_key`]).
    bodies: Mutex<Kept<Option<f64>>>,
    /// Times of the kernel classes lowered, by structure key
    /// ([`super::program::structure_key`]).
    classes: Mutex<Kept<f64>>,
}

impl KernelTimes {
    /// Instructions (leaves included) of the largest body kept. Random configurations
    /// of ResNet-50 training: of the bodies of 33 instructions or more, few recur, and
    /// keying them costs more than finding the few saves (`docs/kernels.md` §3.6).
    pub const MAX_BODY: usize = 32;

    /// An empty table for the compilations of `module` on `target`; it keeps up to
    /// 524,288 bodies (two generations of 262,144; up to about a kilobyte each) and
    /// 262,144 classes (two generations of 131,072; about 200 bytes each).
    pub fn new(module: &Module, target: &TpuTarget) -> Self {
        KernelTimes {
            module: module_id(module),
            ids: OnceLock::new(),
            target: target.clone(),
            bodies: Mutex::new(Kept::new(1 << 18)),
            classes: Mutex::new(Kept::new(1 << 17)),
        }
    }

    /// The target whose times the table keeps.
    pub fn target(&self) -> &TpuTarget {
        &self.target
    }

    /// Whether this table was made for `module`.
    pub fn is_for(&self, module: &Module) -> bool {
        self.module == module_id(module)
    }

    /// The content ids of `module` (the table's: see [`KernelTimes::is_for`]) that its
    /// keys name shapes and attributes by, numbered on first use.
    pub(crate) fn content_ids(&self, module: &Module) -> &ContentIds {
        self.ids.get_or_init(|| ContentIds::of(module))
    }

    /// Bodies kept now (0 if a thread panicked holding the table).
    pub fn len(&self) -> usize {
        self.bodies.lock().map(|t| t.len()).unwrap_or(0)
    }

    /// Kernel classes kept now (the same).
    pub fn classes_len(&self) -> usize {
        self.classes.lock().map(|t| t.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the key of `body` to `keys` when the table keeps bodies like it (small,
    /// and keyed by the memo's rules); else leaves `keys` as it was.
    pub(crate) fn append_key(body: KernelBody<'_>, ids: &ContentIds, keys: &mut Vec<u8>) -> bool {
        let at = keys.len();
        if body.instrs.len() <= Self::MAX_BODY && write_body_key(body, Some(ids), keys) {
            return true;
        }
        keys.truncate(at);
        false
    }

    /// The times kept for the bodies keyed `keys` ([`KernelTimes::append_key`]), in
    /// order, into `out`: `Some(None)` for a body that is no kernel, `None` when the
    /// table has no entry. All at once, so that the lookups' cache misses overlap
    /// ([`Kept::get_many`]).
    pub(crate) fn get_many(&self, keys: &[&[u8]], out: &mut Vec<Option<Option<f64>>>) {
        match self.bodies.lock() {
            Ok(mut t) => t.get_many(keys, out),
            Err(_) => out.clear(),
        }
        out.resize(keys.len(), None);
    }

    /// Keep `time` for the body keyed `key`.
    pub(crate) fn insert(&self, key: &[u8], time: Option<f64>) {
        if let Ok(mut t) = self.bodies.lock() {
            t.insert(key, time);
        }
    }

    /// The default-tile times kept for the kernel classes keyed `keys`
    /// ([`super::program::structure_key`]), in order, into `out` (as
    /// [`KernelTimes::get_many`]).
    pub(crate) fn class_times(&self, keys: &[&[u8]], out: &mut Vec<Option<f64>>) {
        match self.classes.lock() {
            Ok(mut t) => t.get_many(keys, out),
            Err(_) => out.clear(),
        }
        out.resize(keys.len(), None);
    }

    /// Keep `time` for the kernel class keyed `key`.
    pub(crate) fn keep_class(&self, key: &[u8], time: f64) {
        if let Ok(mut t) = self.classes.lock() {
            t.insert(key, time);
        }
    }
}

/// What [`KernelMemo::find`] gives.
pub(crate) enum Found {
    /// The memo's entry for the body.
    Entry(Arc<Remembered>),
    /// A body the memo does not keep, lowered now (`None`: no kernel).
    Lowered(Option<Box<LoweredKernel>>),
}

impl Remembered {
    /// The kernel (`None`: the body is no kernel), named after the body it was first
    /// lowered from.
    pub(crate) fn kernel(&self) -> Option<&LoweredKernel> {
        self.kernel.as_ref()
    }
}

/// Writes every value the derived `Hash` impls feed it, in order: for the derived impls
/// of the IR's shapes (which prefix every list with its length and every enum with its
/// variant) that is an encoding of the value, so equal records mean equal values. The
/// keys' own fields are written with it too, each as it is made. (Gathering an
/// instruction's fields on the stack and appending them in one copy took fewer
/// instructions, but the copy read them back before their narrow stores had landed,
/// and waited for them: a third of the keys' time.)
struct Recorder<'a>(&'a mut Vec<u8>);

impl Hasher for Recorder<'_> {
    fn finish(&self) -> u64 {
        0
    }
    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}

/// Tags that keep the parts of a key apart.
const PARAMETER: u8 = 1;
const INSTRUCTION: u8 = 2;
const INPUT_ATTRS: u8 = 3;
const NO_ATTRS: u8 = 4;
const STRIPPED_ATTRS: u8 = 5;
const TUPLE_INDEX: u8 = 6;

const SHAPE_ID: u8 = 7;
const SHAPE: u8 = 8;
/// Added to a tag whose value is a content id ([`ContentIds`]) rather than an address.
const CONTENT: u8 = 16;
const SHAPE_CONTENT: u8 = SHAPE_ID + CONTENT;

/// Input attributes into a key, tagged `tag`: by their content id, or by address when
/// they have none (the same address is the same attributes while the input module is
/// borrowed).
#[inline(always)]
fn attrs_key(tag: u8, a: &Attrs, ids: Option<&ContentIds>, r: &mut Recorder<'_>) {
    match ids.and_then(|ids| ids.attrs(a)) {
        Some(id) => {
            r.write(&[tag + CONTENT]);
            r.write(&id.to_le_bytes());
        }
        None => {
            r.write(&[tag]);
            r.write(&(a as *const Attrs as usize).to_le_bytes());
        }
    }
}

/// A body node's laid-out shape, into a key: the content id (else the address) of the
/// input shape it lays out and its packed layout as the cost model reads it
/// (`BodyNode::model_layout`) when it has a shape id, else the whole shape.
#[inline]
fn shape_key(
    n: &crate::passes::kernel::BodyNode<'_>,
    ids: Option<&ContentIds>,
    r: &mut Recorder<'_>,
) {
    match n.shape_id {
        Some((at, _)) => {
            match ids.and_then(|ids| ids.shape(at)) {
                Some(id) => {
                    r.write(&[SHAPE_CONTENT]);
                    r.write(&id.to_le_bytes());
                }
                None => {
                    r.write(&[SHAPE_ID]);
                    r.write(&at.to_le_bytes());
                }
            }
            // the layout as the model reads it (`BodyNode::model_layout`)
            r.write(&n.model_layout.to_le_bytes());
        }
        None => {
            r.write(&[SHAPE]);
            n.shape.hash(r);
        }
    }
}

/// The memo's key of `body` (by address), into `out` (cleared first): everything lowering
/// reads of it. False when the body holds attributes the compiler made (other than
/// none, or a tuple index), which the key does not name: such a body is lowered every
/// time.
fn body_key(body: KernelBody<'_>, out: &mut Vec<u8>) -> bool {
    out.clear();
    write_body_key(body, None, out)
}

/// [`body_key`] appended to `out` (on false, `out` holds part of a key).
fn write_body_key(body: KernelBody<'_>, ids: Option<&ContentIds>, out: &mut Vec<u8>) -> bool {
    let mut r = Recorder(out);
    r.write(&body.root.to_le_bytes());
    r.write(&body.leaves.to_le_bytes());
    r.write(&[body.single as u8]);
    r.write(&(body.instrs.len() as u32).to_le_bytes());
    for b in body.instrs {
        let n = &body.nodes[b.node as usize];
        if let Some(p) = b.parameter.get() {
            // a fusion parameter: its number and the shape of the value it stands for
            // (its attributes are the parameter number's)
            r.write(&[PARAMETER]);
            r.write(&p.to_le_bytes());
            shape_key(n, ids, &mut r);
            continue;
        }
        r.write(&[INSTRUCTION]);
        r.write(&(n.opcode as u16).to_le_bytes());
        r.write(
            &n.async_wrapped
                .map(|o| o as u16 + 1)
                .unwrap_or(0)
                .to_le_bytes(),
        );
        shape_key(n, ids, &mut r);
        match &n.attrs {
            // the input module's attributes: by content id, or by address (the same
            // address is the same attributes)
            BodyAttrs::Input(a) => attrs_key(INPUT_ATTRS, a, ids, &mut r),
            // the input's without `dimensions`: a function of the input's
            BodyAttrs::Stripped(a, _) => attrs_key(STRIPPED_ATTRS, a, ids, &mut r),
            BodyAttrs::Own(a) if a.is_unset() => r.write(&[NO_ATTRS]),
            // an instruction the compiler made: a tuple index at most (a
            // get-tuple-element), else the body is not remembered
            BodyAttrs::Own(a) => {
                let only_index = Attrs {
                    tuple_index: a.tuple_index,
                    ..Attrs::default()
                };
                if **a != only_index {
                    return false;
                }
                r.write(&[TUPLE_INDEX]);
                a.tuple_index.hash(&mut r);
            }
        }
        r.write(&(b.operands.len() as u32).to_le_bytes());
        for o in &b.operands {
            r.write(&(o.index() as u32).to_le_bytes());
        }
    }
    true
}
