//! CSV text, written with the `csv` crate: a field is quoted when it needs it (a comma,
//! a quote, a line break), lines end in `\n`. Every CSV tpusim writes (sweeps, the
//! roofline, `estimate --runs`, `predict`) is made here; `eval::csv_rows` reads them.

/// A CSV document being written into memory.
pub struct CsvText {
    w: csv::Writer<Vec<u8>>,
}

impl CsvText {
    /// A document whose first line is `header`, the column names joined by commas.
    pub fn new(header: &str) -> Self {
        let mut t = CsvText {
            w: csv::WriterBuilder::new()
                .flexible(true)
                .from_writer(Vec::new()),
        };
        t.row(header.split(','));
        t
    }

    /// One line, a field per item (`Display`ed).
    pub fn row<I>(&mut self, fields: I)
    where
        I: IntoIterator,
        I::Item: std::fmt::Display,
    {
        let fields: Vec<String> = fields.into_iter().map(|f| f.to_string()).collect();
        // In memory and flexible: the writer has no I/O and no record length to refuse.
        if let Err(e) = self.w.write_record(&fields) {
            unreachable!("writing CSV into memory: {e}");
        }
    }

    /// The document.
    pub fn finish(self) -> String {
        match self.w.into_inner() {
            // the fields were strings and the writer adds only ASCII
            Ok(bytes) => String::from_utf8(bytes).unwrap_or_default(),
            Err(e) => unreachable!("flushing CSV into memory: {}", e.error()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CsvText;

    #[test]
    fn quotes_only_what_needs_it() {
        let mut t = CsvText::new("ID,layout,ns");
        t.row(["a", "{1,0}", "12"]);
        t.row(["b,c", "{0}", ""]);
        t.row(["say \"x\"", "{}", "3.5"]);
        assert_eq!(
            t.finish(),
            "ID,layout,ns\na,\"{1,0}\",12\n\"b,c\",{0},\n\"say \"\"x\"\"\",{},3.5\n"
        );
    }
}
