//! Deny-write patterns as written and as compiled; load-time errors and
//! warnings.

use std::fmt;

use crate::glob::{Comp, Lit, Malformed};

/// A deny-write pattern accepted by [`GuardBuilder::build`](crate::GuardBuilder::build).
///
/// Keeps the text exactly as the operator wrote it, which is what a
/// [`Refusal`](crate::Refusal) names, next to its compiled form.
#[derive(Clone, Debug)]
pub struct Pattern {
    written: Box<str>,
    anchored: bool,
    has_recursive: bool,
    recursive_mask: Option<u64>,
    shape: Shape,
    pub(crate) comps: Vec<Comp>,
}

/// Common pattern shapes that a check can decide directly.
#[derive(Clone, Debug)]
pub(crate) enum Shape {
    /// `**/name/**`: some component is `name`.
    AnyName(Lit),
    /// `**/name`: the last component is `name`.
    LastName(Lit),
    /// Anything else.
    General,
}

impl Pattern {
    /// The pattern exactly as written (leading `./` included).
    pub fn as_str(&self) -> &str {
        &self.written
    }

    /// Whether the pattern is anchored at the root (it has a `/` once any
    /// leading `./` is dropped). An unanchored pattern is one component,
    /// matched against the base name at any depth.
    pub fn is_anchored(&self) -> bool {
        self.anchored
    }

    /// Whether the pattern has a `**` component.
    pub(crate) fn has_recursive(&self) -> bool {
        self.has_recursive
    }

    pub(crate) fn shape(&self) -> &Shape {
        &self.shape
    }

    /// Bit `j` set where component `j` is `**`, for patterns short enough
    /// for the one-word state set (fewer than 64 components).
    pub(crate) fn recursive_mask(&self) -> Option<u64> {
        self.recursive_mask
    }

    /// Parses and compiles `written`; malformed components become `*` and
    /// are appended to `warnings`.
    pub(crate) fn parse(
        written: &str,
        warnings: &mut Vec<Warning>,
    ) -> Result<Pattern, PatternError> {
        let refuse = |kind| PatternError {
            pattern: written.to_owned(),
            kind,
        };
        if written.is_empty() {
            return Err(refuse(PatternErrorKind::Empty));
        }
        if written.starts_with(['/', '\\']) {
            return Err(refuse(PatternErrorKind::Absolute));
        }
        if written.contains('\0') {
            return Err(refuse(PatternErrorKind::Nul));
        }
        if written.chars().any(char::is_control) {
            return Err(refuse(PatternErrorKind::Control));
        }
        if written.starts_with(char::is_whitespace) || written.ends_with(char::is_whitespace) {
            return Err(refuse(PatternErrorKind::Blank));
        }
        let mut rest = written;
        while let Some(r) = rest.strip_prefix("./") {
            rest = r;
        }
        let anchored = rest.contains('/');
        let mut raw: Vec<&str> = Vec::new();
        for c in rest.split('/') {
            match c {
                ".." => return Err(refuse(PatternErrorKind::ParentComponent)),
                "" | "." => {}
                _ => raw.push(c),
            }
        }
        if raw.is_empty() {
            return Err(refuse(PatternErrorKind::Empty));
        }
        // `dir/` names the directory; protect what is beneath it too rather
        // than only the directory entry, the fail-closed reading.
        if rest.ends_with('/') && raw.last() != Some(&"**") {
            raw.push("**");
        }
        let comps: Vec<Comp> = raw
            .iter()
            .map(|c| {
                Comp::compile(c).unwrap_or_else(|reason| {
                    warnings.push(Warning {
                        pattern: written.to_owned(),
                        component: (*c).to_owned(),
                        reason,
                    });
                    Comp::Star
                })
            })
            .collect();
        let shape = match comps.as_slice() {
            [Comp::Recursive, Comp::Literal(l), Comp::Recursive] => Shape::AnyName(l.clone()),
            [Comp::Recursive, Comp::Literal(l)] => Shape::LastName(l.clone()),
            _ => Shape::General,
        };
        let recursive_mask = (comps.len() < 64).then(|| {
            comps
                .iter()
                .enumerate()
                .filter(|(_, c)| matches!(c, Comp::Recursive))
                .fold(0, |m, (j, _)| m | 1 << j)
        });
        Ok(Pattern {
            written: written.into(),
            anchored,
            has_recursive: comps.iter().any(|c| matches!(c, Comp::Recursive)),
            recursive_mask,
            shape,
            comps,
        })
    }
}

/// A pattern refused at load (docs/reference/deny-write.md): the guard is not built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("deny-write pattern `{}` is refused: {kind}", shown(pattern))]
pub struct PatternError {
    pattern: String,
    kind: PatternErrorKind,
}

/// `pattern` with its control characters written `\u{…}`, so that a
/// refusal cannot break its message's line or drive a terminal; every
/// other character, the backslashes of escapes included, as written.
fn shown(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    for c in pattern.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

impl PatternError {
    /// The offending pattern, as written.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Why it was refused.
    pub fn kind(&self) -> PatternErrorKind {
        self.kind
    }
}

/// Why a pattern was refused at load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PatternErrorKind {
    /// The pattern is empty, or only `.` components and slashes (`./`), so
    /// it names nothing but the root.
    Empty,
    /// The pattern starts with `/` or `\`; patterns are relative to the root.
    Absolute,
    /// The pattern has a `..` component.
    ParentComponent,
    /// The pattern holds a NUL byte, which no name can: it would protect
    /// nothing while seeming to protect something.
    Nul,
    /// The pattern holds another control character (a line break, a tab):
    /// a pattern read with its line's end (`"Makefile\n"`) protected only
    /// that odd name, leaving `Makefile` writable. `?` matches one.
    Control,
    /// The pattern begins or ends with white space (`" Makefile"`), which
    /// protected only a name with that space, leaving `Makefile`
    /// writable. `[ ]` matches a space a name really has there.
    Blank,
}

impl fmt::Display for PatternErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PatternErrorKind::Empty => "it is empty",
            PatternErrorKind::Absolute => {
                "it is absolute (starts with `/` or `\\`); patterns are relative to the root"
            }
            PatternErrorKind::ParentComponent => "it has a `..` component",
            PatternErrorKind::Nul => {
                "it holds a NUL byte, which no name can hold, so it would protect nothing"
            }
            PatternErrorKind::Control => {
                "it holds a control character (a line break, a tab), so it would protect only a \
                 name holding one; write `?` to match one"
            }
            PatternErrorKind::Blank => {
                "it begins or ends with white space, so it would protect only a name with that \
                 space; write `[ ]` to match a space a name has there"
            }
        })
    }
}

/// A malformed pattern component, reported at load. The guard was built and
/// the component matches like `*`, so it protects more than intended, never
/// less (docs/reference/deny-write.md: fails closed). Show these to the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pattern: String,
    component: String,
    reason: Malformed,
}

impl Warning {
    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The malformed component as written.
    pub fn component(&self) -> &str {
        &self.component
    }

    /// What is wrong with it.
    pub fn reason(&self) -> Malformed {
        self.reason
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "deny-write pattern `{}`: component `{}` is malformed ({}); it is treated as `*`",
            self.pattern, self.component, self.reason
        )
    }
}
