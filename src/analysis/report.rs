//! Human-readable rendering of a [`CostReport`]: module totals and the top
//! instructions by flops and by bytes accessed.

use std::fmt::Write;

use super::cost::{CostReport, InstrCost};

/// `1234567` → `1.23 M`; exact integers below 10 000 stay as they are.
fn si(v: f64) -> String {
    let a = v.abs();
    if a < 10_000.0 {
        if v.fract() == 0.0 {
            return format!("{v:.0}");
        }
        return format!("{v:.2}");
    }
    let units = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (scale, u) in units {
        if a >= scale {
            return format!("{:.2} {u}", v / scale);
        }
    }
    format!("{v:.0}")
}

fn pct(v: f64, total: f64) -> String {
    if total > 0.0 {
        format!("{:5.1}%", 100.0 * v / total)
    } else {
        "    -".to_string()
    }
}

fn top(rows: &[InstrCost], n: usize, key: impl Fn(&InstrCost) -> f64) -> Vec<&InstrCost> {
    let mut v: Vec<(usize, &InstrCost)> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| key(r) > 0.0)
        .collect();
    // Largest first; ties keep program order (deterministic).
    v.sort_by(|(ia, a), (ib, b)| key(b).total_cmp(&key(a)).then(ia.cmp(ib)));
    v.into_iter().take(n).map(|(_, r)| r).collect()
}

/// Render totals and the `top_n` instructions by flops and by bytes accessed.
pub fn render_report(r: &CostReport, top_n: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "module totals (entry computation, callees folded in)");
    let _ = writeln!(
        s,
        "  flops            {:>12}  ({:.0})",
        si(r.flops),
        r.flops
    );
    let _ = writeln!(
        s,
        "  transcendentals  {:>12}  ({:.0})",
        si(r.transcendentals),
        r.transcendentals
    );
    let _ = writeln!(
        s,
        "  bytes accessed   {:>12}  ({:.0})",
        si(r.bytes_accessed),
        r.bytes_accessed
    );
    let _ = writeln!(s, "  instructions     {:>12}", r.instructions.len());
    type Key = fn(&InstrCost) -> f64;
    let sections: [(&str, Key, f64); 2] = [
        ("flops", |x| x.flops, r.flops),
        ("bytes accessed", |x| x.bytes_accessed, r.bytes_accessed),
    ];
    for (title, key, total) in sections {
        let rows = top(&r.instructions, top_n, key);
        let _ = writeln!(s, "\ntop {} instructions by {title}", rows.len());
        let _ = writeln!(
            s,
            "  {:>12} {:>6} {:>12} {:>12}  {:<20} name",
            title.split(' ').next().unwrap_or(title),
            "share",
            "transc.",
            if title == "flops" { "bytes" } else { "flops" },
            "opcode"
        );
        for x in rows {
            let other = if title == "flops" {
                x.bytes_accessed
            } else {
                x.flops
            };
            let _ = writeln!(
                s,
                "  {:>12} {:>6} {:>12} {:>12}  {:<20} {}",
                si(key(x)),
                pct(key(x), total),
                si(x.transcendentals),
                si(other),
                x.opcode,
                x.name
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_units() {
        assert_eq!(si(12.0), "12");
        assert_eq!(si(1_500_000.0), "1.50 M");
        assert_eq!(si(2.5e11), "250.00 G");
        assert_eq!(si(-1.0), "-1");
    }
}
