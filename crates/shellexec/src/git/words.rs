//! The strict word splitter: a request becomes words, or is refused when a
//! shell would read more into it than words.

use super::{shown, GitError};

/// The longest request word [`split_words`] accepts, and the most words.
pub(super) const MAX_WORD: usize = 4096;
const MAX_WORDS: usize = 256;

/// Characters refused outside quotes: everything a POSIX shell (or bash)
/// would give a meaning to.
const METACHARS: &str = ";|&$`<>(){}*?[]!#\\\"'";

/// Splits a request into words, strictly.
///
/// Words are separated by spaces and tabs. A single-quoted part is taken
/// literally; a double-quoted part too, but `$`, `` ` ``, `\` and `!` are
/// refused inside it (a shell would expand them, so the request would not
/// mean what it says). Outside quotes every shell metacharacter
/// (`; | & $ ` < > ( ) { } * ? [ ] ! # \`) is refused, and so is `~` at the
/// start of a word or right after `=` (tilde expansion); `~` elsewhere
/// (`HEAD~1`) is plain. Control characters (newline included) are refused
/// everywhere. So no request can chain, redirect, substitute or glob.
pub fn split_words(command: &str) -> Result<Vec<String>, GitError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ' ' || c == '\t' {
            if in_word {
                push_word(&mut words, &mut word)?;
                in_word = false;
            }
            continue;
        }
        if c.is_control() {
            return Err(GitError::syntax(format!(
                "confined git refuses the control character {:?} in the request",
                c
            )));
        }
        match c {
            '\'' | '"' => {
                let quote = c;
                let mut closed = false;
                for q in chars.by_ref() {
                    if q == quote {
                        closed = true;
                        break;
                    }
                    if q.is_control() {
                        return Err(GitError::syntax(format!(
                            "confined git refuses the control character {:?} in the request",
                            q
                        )));
                    }
                    if quote == '"' && matches!(q, '$' | '`' | '\\' | '!') {
                        return Err(GitError::syntax(format!(
                            "confined git refuses `{q}` inside double quotes (a shell would \
                             expand it); use single quotes"
                        )));
                    }
                    word.push(q);
                }
                if !closed {
                    return Err(GitError::syntax(format!(
                        "confined git refuses an unterminated {quote} quote"
                    )));
                }
                in_word = true;
            }
            '~' if !in_word || word.ends_with('=') => {
                return Err(GitError::syntax(
                    "confined git refuses `~` at the start of a word (tilde expansion)",
                ));
            }
            _ if METACHARS.contains(c) => {
                let rest: String = chars.clone().take_while(|x| *x != ' ').collect();
                return Err(GitError::syntax(format!(
                    "confined git refuses the shell metacharacter `{}` in `{}{}{}`: nothing \
                     may chain, redirect, substitute or glob (quote it if it is literal)",
                    shown(c.encode_utf8(&mut [0; 4])),
                    shown(&word),
                    shown(c.encode_utf8(&mut [0; 4])),
                    shown(&rest)
                )));
            }
            _ => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        push_word(&mut words, &mut word)?;
    }
    Ok(words)
}

fn push_word(words: &mut Vec<String>, word: &mut String) -> Result<(), GitError> {
    if word.len() > MAX_WORD {
        return Err(GitError::syntax(format!(
            "confined git refuses a word longer than {MAX_WORD} bytes"
        )));
    }
    if words.len() == MAX_WORDS {
        return Err(GitError::syntax(format!(
            "confined git refuses more than {MAX_WORDS} words"
        )));
    }
    words.push(std::mem::take(word));
    Ok(())
}
