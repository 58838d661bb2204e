//! Naming the key behind a TOML parse error.
//!
//! The `toml` crate refuses duplicated keys and syntax errors with a byte
//! span but not with the dotted path of the key (`x` rather than
//! `fs.max_read_bytes` when the duplicate sits under `[fs]`). The policy
//! contract promises errors that name the key, so this module replays the
//! document through `toml_parser`'s event stream, tracking the table a key
//! belongs to, and maps the span back to a full dotted key.

use toml_parser::decoder::Encoding;
use toml_parser::parser::{parse_document, EventReceiver};
use toml_parser::{ErrorSink, Raw, Source, Span};

/// What the locator found for an error span.
pub(crate) struct Located {
    /// The dotted key whose simple key starts exactly at the span, if any
    /// (this is what a duplicate-key error points at).
    pub(crate) exact: Option<String>,
    /// The last key-value or table header that began at or before the span:
    /// the key a syntax error most likely belongs to.
    pub(crate) enclosing: Option<String>,
}

/// Finds the dotted key at or before byte offset `at` of `text`.
pub(crate) fn locate(text: &str, at: usize) -> Located {
    let source = Source::new(text);
    let tokens: Vec<_> = source.lex().collect();
    let mut walker = Walker {
        text,
        target: at,
        table: Vec::new(),
        inline: Vec::new(),
        pending: Vec::new(),
        pending_start: None,
        in_header: false,
        last_value_key: Vec::new(),
        exact: None,
        enclosing: None,
    };
    let mut ignore = ();
    parse_document(&tokens, &mut walker, &mut ignore);
    Located {
        exact: walker.exact,
        enclosing: walker.enclosing,
    }
}

struct Walker<'a> {
    text: &'a str,
    target: usize,
    /// The path of the current `[table]` header.
    table: Vec<String>,
    /// Full paths of the inline tables we are inside, innermost last.
    inline: Vec<Vec<String>>,
    /// Simple keys of the dotted key being read.
    pending: Vec<String>,
    pending_start: Option<usize>,
    in_header: bool,
    /// The full path of the last `key =` read: the owner of an inline table
    /// that opens next.
    last_value_key: Vec<String>,
    exact: Option<String>,
    enclosing: Option<String>,
}

impl Walker<'_> {
    fn prefix(&self) -> &[String] {
        if self.in_header {
            &[]
        } else {
            self.inline.last().unwrap_or(&self.table)
        }
    }

    fn full(&self) -> Vec<String> {
        let mut path = self.prefix().to_vec();
        path.extend(self.pending.iter().cloned());
        path
    }

    /// Records the key just completed as the enclosing one if it began at
    /// or before the target.
    fn complete(&mut self) -> Vec<String> {
        let path = self.full();
        if self.pending_start.is_some_and(|start| start <= self.target) {
            self.enclosing = Some(join(&path));
        }
        self.pending.clear();
        self.pending_start = None;
        path
    }
}

fn join(path: &[String]) -> String {
    path.join(".")
}

impl EventReceiver for Walker<'_> {
    fn std_table_open(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.in_header = true;
        self.inline.clear();
        self.pending.clear();
        self.pending_start = None;
    }

    fn std_table_close(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.table = self.complete();
        self.in_header = false;
    }

    fn array_table_open(&mut self, span: Span, error: &mut dyn ErrorSink) {
        self.std_table_open(span, error);
    }

    fn array_table_close(&mut self, span: Span, error: &mut dyn ErrorSink) {
        self.std_table_close(span, error);
    }

    fn inline_table_open(&mut self, _span: Span, _error: &mut dyn ErrorSink) -> bool {
        // The key-value separator just before this brace completed the key
        // that owns the table.
        let owner = self.last_value_key.clone();
        self.inline.push(owner);
        true
    }

    fn inline_table_close(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.inline.pop();
    }

    fn simple_key(&mut self, span: Span, encoding: Option<Encoding>, _error: &mut dyn ErrorSink) {
        let raw = self.text.get(span.start()..span.end()).unwrap_or("");
        let mut name = String::new();
        let mut ignore = ();
        Raw::new_unchecked(raw, encoding, span).decode_key(&mut name, &mut ignore);
        if self.pending.is_empty() {
            self.pending_start = Some(span.start());
        }
        self.pending.push(name);
        if span.start() == self.target && self.exact.is_none() {
            self.exact = Some(join(&self.full()));
        }
    }

    fn key_val_sep(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.last_value_key = self.complete();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(text: &str, needle_at: usize) -> Option<String> {
        locate(text, needle_at).exact
    }

    #[test]
    fn keys_under_headers_are_dotted() {
        let text = "[fs]\nmax_read_bytes = 1\n";
        assert_eq!(exact(text, 5).as_deref(), Some("fs.max_read_bytes"));
        assert_eq!(exact(text, 1).as_deref(), Some("fs"));
    }

    #[test]
    fn dotted_headers_and_keys() {
        let text = "[a.b]\nc.d = 1\n";
        let at = text.find("d =").unwrap();
        assert_eq!(exact(text, at).as_deref(), Some("a.b.c.d"));
    }

    #[test]
    fn inline_tables_nest() {
        let text = "net = { sub = { x = 1 }, y = 2 }\n";
        assert_eq!(
            exact(text, text.find("x =").unwrap()).as_deref(),
            Some("net.sub.x")
        );
        assert_eq!(
            exact(text, text.find("y =").unwrap()).as_deref(),
            Some("net.y")
        );
    }

    #[test]
    fn quoted_keys_are_decoded() {
        let text = "[budgets]\n\"fs_ops\" = 1\n";
        assert_eq!(
            exact(text, text.find('"').unwrap()).as_deref(),
            Some("budgets.fs_ops")
        );
    }

    #[test]
    fn enclosing_key_of_a_value() {
        let text = "[exec]\nenabled = true\ntimeout_ms = oops\n";
        let at = text.find("oops").unwrap();
        let found = locate(text, at);
        assert_eq!(found.exact, None);
        assert_eq!(found.enclosing.as_deref(), Some("exec.timeout_ms"));
    }

    #[test]
    fn headers_reset_the_table() {
        let text = "[fs]\na = 1\n[net]\nb = 2\n";
        assert_eq!(
            exact(text, text.find("b =").unwrap()).as_deref(),
            Some("net.b")
        );
        let top = "x = 1\n";
        assert_eq!(exact(top, 0).as_deref(), Some("x"));
    }
}
