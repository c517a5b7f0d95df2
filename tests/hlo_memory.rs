//! Parsing the 4 MB Mixtral module peaks under 20x the file size (heap, measured with a
//! counting allocator; the file text itself is included).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                let now = CURRENT.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                CURRENT.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn mixtral_parse_peaks_under_20x_file_size() {
    let Some(shared) = common::shared("mixtral_parse_peaks_under_20x_file_size") else {
        return;
    };
    let path = shared.join("hlo_corpus/xla/tools__benchmarks__hlo__hlo_mixtral_8x7b_bf16_2x8.hlo");
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let text = std::fs::read_to_string(&path).unwrap();
    let size = text.len();
    let m = tpusim::hlo::parse_module("mixtral", &text).unwrap();
    assert_eq!(m.instruction_count(), 43714);
    let peak = PEAK.load(Ordering::Relaxed) - base;
    eprintln!(
        "retained after parse: {} B",
        CURRENT.load(Ordering::Relaxed) - base
    );
    eprintln!(
        "sizes: Instruction {} Attrs {} Shape {}",
        std::mem::size_of::<tpusim::ir::Instruction>(),
        std::mem::size_of::<tpusim::ir::Attrs>(),
        std::mem::size_of::<tpusim::ir::Shape>()
    );
    eprintln!(
        "mixtral: file {size} B, peak heap {peak} B = {:.1}x",
        peak as f64 / size as f64
    );
    assert!(
        peak < 20 * size,
        "peak {peak} B is not under 20x the file size {size} B"
    );
    drop(m);
}
