//! Names for what the text does not name, as XLA's parser gives them: a nested operand
//! `add(negate(x), y)` becomes an instruction `negate.anon`, an inline computation
//! body `to_apply={...}` a computation `_`; a second one gets `.1`, and so on.
//!
//! XLA's `NameUniquer` (separator `.`): a name `root.N` (N a number) registers id N
//! under `root`, any other name id 0 under itself; asking for a name that is taken
//! gives the root with the next free id.

use std::collections::{HashMap, HashSet};

/// XLA's `NameUniquer` with separator `.`.
#[derive(Debug, Clone, Default)]
pub struct NameUniquer {
    roots: HashMap<String, IdGenerator>,
}

/// XLA's `SequentialIdGenerator`.
#[derive(Debug, Clone, Default)]
struct IdGenerator {
    used: HashSet<i64>,
    next: i64,
}

impl IdGenerator {
    fn register(&mut self, id: i64) -> i64 {
        if self.used.insert(id) {
            return id;
        }
        while !self.used.insert(self.next) {
            self.next += 1;
        }
        self.next += 1;
        self.next - 1
    }
}

impl NameUniquer {
    /// A name unique among those registered so far, derived from `prefix`; it is
    /// registered too. For a name that is free this is the name itself.
    pub fn unique(&mut self, prefix: &str) -> String {
        let prefix = if prefix.is_empty() { "name" } else { prefix };
        // A numeric suffix after the last `.` (not at either end) is an id.
        let (root, suffix) = match prefix.rfind('.') {
            Some(i) if i > 0 && i + 1 < prefix.len() => match prefix[i + 1..].parse::<i64>() {
                Ok(n) if prefix[i + 1..].bytes().all(|c| c.is_ascii_digit()) => {
                    (&prefix[..i], Some(n))
                }
                _ => (prefix, None),
            },
            _ => (prefix, None),
        };
        let id = self
            .roots
            .entry(root.to_string())
            .or_default()
            .register(suffix.unwrap_or(0));
        if id == 0 {
            match suffix {
                Some(_) => format!("{root}.0"),
                None => root.to_string(),
            }
        } else {
            format!("{root}.{id}")
        }
    }

    /// Note a name the text gives (XLA registers every instruction name it reads).
    pub fn register(&mut self, name: &str) {
        self.unique(name);
    }
}

#[cfg(test)]
mod tests {
    use super::NameUniquer;

    #[test]
    fn as_xla_names_them() {
        let mut u = NameUniquer::default();
        assert_eq!(u.unique("negate.anon"), "negate.anon");
        assert_eq!(u.unique("negate.anon"), "negate.anon.1");
        u.register("add.anon.3");
        assert_eq!(u.unique("add.anon"), "add.anon");
        assert_eq!(u.unique("add.anon"), "add.anon.1");
        assert_eq!(u.unique("add.anon"), "add.anon.2");
        assert_eq!(u.unique("add.anon"), "add.anon.4");
        assert_eq!(u.unique("_"), "_");
        assert_eq!(u.unique("_"), "_.1");
        assert_eq!(u.unique("x.0"), "x.0");
        assert_eq!(u.unique("x"), "x.1");
    }
}
