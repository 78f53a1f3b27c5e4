//! `mpio.toml(5)`: the config reference (`docs/CONFIG.md`) as a manual
//! page, so the page and the reference are one text.
//!
//! The reference is written in the Markdown subset this module reads, and
//! nothing else: `##`/`###` headings (sections, subsections), paragraphs,
//! definition lists (a term line, then `:   ` and its body indented by
//! four spaces; bodies nest), ``` fences, `- ` and `1. ` items, and
//! inline `code`, *emphasis* and **strong**. What comes before the first
//! `##` heading (the `#` title, a note to the reference's editors) is not
//! the page's: the page's header names it. Indentation is counted in steps of four spaces:
//! text at step `n` belongs to the body of the term at step `n - 1`.

use std::fmt::Write;

/// The roff (man macros) page for `markdown`.
pub fn page(markdown: &str) -> String {
    let mut out = String::from(".TH MPIO.TOML 5 \"\" \"mpio\" \"mpio\"\n");
    let mut writer = Writer::default();
    let lines: Vec<&str> = markdown.lines().collect();
    let mut at = lines
        .iter()
        .position(|line| line.starts_with("## "))
        .unwrap_or(lines.len());
    while at < lines.len() {
        let line = lines[at];
        let step = indent(line) / 4;
        let text = line.trim_start();
        at += 1;
        if text.is_empty() {
            writer.blank = true;
        } else if let Some(title) = text.strip_prefix("## ") {
            writer.nest_at(&mut out, 0);
            writeln!(out, ".SH {}", escape(title)).unwrap();
            writer.blank = false;
        } else if let Some(title) = text.strip_prefix("### ") {
            writer.nest_at(&mut out, 0);
            writeln!(out, ".SS {}", escape(title)).unwrap();
            writer.blank = false;
        } else if text.starts_with("```") {
            writer.paragraph(&mut out, step);
            out.push_str(".nf\n");
            let margin = indent(line);
            while at < lines.len() && !lines[at].trim_start().starts_with("```") {
                let verbatim = lines[at].get(margin..).unwrap_or(lines[at].trim_start());
                writeln!(out, "{}", escape_line(&verbatim.replace('\\', "\\e"))).unwrap();
                at += 1;
            }
            at += 1;
            out.push_str(".fi\n");
        } else if let Some(item) = text.strip_prefix("- ") {
            // Items in a body nest in it (`.RE` then restores the
            // body's indentation for what follows them).
            writer.nest_at(&mut out, step);
            let item = gather(item, &lines, &mut at);
            writeln!(out, ".IP \\(bu 2\n{}", inline(&item)).unwrap();
            writer.blank = false;
        } else if let Some((number, item)) = numbered(text) {
            writer.nest_at(&mut out, step);
            let item = gather(item, &lines, &mut at);
            writeln!(out, ".IP {number}. 4\n{}", inline(&item)).unwrap();
            writer.blank = false;
        } else {
            let text = gather(text, &lines, &mut at);
            let body = lines
                .get(at)
                .filter(|next| is_body_of(next, line))
                .map(|next| next.trim_start()[":   ".len()..].trim_start());
            if let Some(body) = body {
                // A term (of one line or more) and its definition.
                at += 1;
                writer.nest_at(&mut out, step);
                writeln!(out, ".TP\n{}", inline(&text)).unwrap();
                writeln!(out, "{}", inline(&gather(body, &lines, &mut at))).unwrap();
                writer.blank = false;
            } else {
                writer.paragraph(&mut out, step);
                writeln!(out, "{}", inline(&text)).unwrap();
            }
        }
    }
    writer.nest_at(&mut out, 0);
    out
}

/// Where the page stands: how many `.RS` are open, and whether a blank
/// line came since the last text (a new paragraph).
#[derive(Default)]
struct Writer {
    depth: usize,
    blank: bool,
}

impl Writer {
    /// Opens or closes `.RS` blocks until `depth` are open.
    fn nest_at(&mut self, out: &mut String, depth: usize) {
        while self.depth < depth {
            out.push_str(".RS\n");
            self.depth += 1;
        }
        while self.depth > depth {
            out.push_str(".RE\n");
            self.depth -= 1;
        }
    }

    /// Places text at indentation `step`: at the top a paragraph, below
    /// it the body of the term one step out (a new indented paragraph
    /// after a blank line).
    fn paragraph(&mut self, out: &mut String, step: usize) {
        self.nest_at(out, step.saturating_sub(1));
        if self.blank {
            out.push_str(if step == 0 { ".PP\n" } else { ".IP\n" });
        }
        self.blank = false;
    }
}

/// `first` and the lines from `at` that continue it (up to a blank line,
/// a definition's `:   ` or a line that starts something else), joined
/// by newlines so inline marks may span lines; `at` moves past them.
fn gather(first: &str, lines: &[&str], at: &mut usize) -> String {
    let mut text = first.to_string();
    while let Some(line) = lines.get(*at) {
        let next = line.trim_start();
        let ends = next.is_empty()
            || next.starts_with('#')
            || next.starts_with("```")
            || next.starts_with(":   ")
            || next.starts_with("- ")
            || numbered(next).is_some();
        if ends {
            break;
        }
        text.push('\n');
        text.push_str(next);
        *at += 1;
    }
    text
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Whether `line` is the definition of a term that starts at `term`:
/// `:   ` at the term's own indentation.
fn is_body_of(line: &str, term: &str) -> bool {
    indent(line) == indent(term) && line.trim_start().starts_with(":   ")
}

/// `1. text` as ("1", "text").
fn numbered(text: &str) -> Option<(&str, &str)> {
    let (number, rest) = text.split_once(". ")?;
    (!number.is_empty() && number.bytes().all(|byte| byte.is_ascii_digit()))
        .then_some((number, rest))
}

/// Inline Markdown as roff fonts: `code` and **strong** bold, *emphasis*
/// italic; a `[text](target)` link as its text.
fn inline(text: &str) -> String {
    let text = text.replace('\\', "\\e");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(['`', '*', '[']) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let (font, open, close) = if rest.starts_with('`') {
            ("\\fB", "`", "`")
        } else if rest.starts_with("**") {
            ("\\fB", "**", "**")
        } else if rest.starts_with('*') {
            ("\\fI", "*", "*")
        } else {
            match link(rest) {
                Some((label, after)) => {
                    out.push_str(label);
                    rest = after;
                }
                None => {
                    out.push('[');
                    rest = &rest[1..];
                }
            }
            continue;
        };
        match rest[open.len()..].find(close) {
            Some(end) => {
                let inner = &rest[open.len()..open.len() + end];
                write!(out, "{font}{inner}\\fR").unwrap();
                rest = &rest[open.len() + end + close.len()..];
            }
            None => {
                out.push_str(open);
                rest = &rest[open.len()..];
            }
        }
    }
    out.push_str(rest);
    out.lines().map(escape_line).collect::<Vec<_>>().join("\n")
}

/// `[label](target)...` as (label, what follows the link).
fn link(text: &str) -> Option<(&str, &str)> {
    let close = text.find("](")?;
    let end = text[close..].find(')')? + close;
    Some((&text[1..close], &text[end + 1..]))
}

/// A heading's text: no fonts, backslashes escaped.
fn escape(text: &str) -> String {
    escape_line(&text.replace('\\', "\\e"))
}

/// A line roff would read as a request (a leading `.` or `'`) made
/// text, and its characters beyond ASCII as roff's Unicode escapes.
fn escape_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len() + 2);
    if line.starts_with('.') || line.starts_with('\'') {
        out.push_str("\\&");
    }
    for character in line.chars() {
        if character.is_ascii() {
            out.push(character);
        } else {
            write!(out, "\\[u{:04X}]", u32::from(character)).unwrap();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::page;

    #[test]
    fn headings_become_sections_and_the_preface_is_left_out() {
        let out = page("# mpio config\n\nA preface.\n\n## NAME\n\nmpio.toml\n\n### Sub\n");
        assert_eq!(
            out,
            ".TH MPIO.TOML 5 \"\" \"mpio\" \"mpio\"\n.SH NAME\n.PP\nmpio.toml\n.SS Sub\n"
        );
    }

    #[test]
    fn definitions_nest_and_close_their_indentation() {
        let out = page(
            "## S\n`a` = *string*\n:   About a.\n\n    `b` = *bool*\n    :   About b.\n\n        More b.\n\n## NEXT\n",
        );
        assert_eq!(
            out,
            ".TH MPIO.TOML 5 \"\" \"mpio\" \"mpio\"\n.SH S\n\
             .TP\n\\fBa\\fR = \\fIstring\\fR\nAbout a.\n\
             .RS\n.TP\n\\fBb\\fR = \\fIbool\\fR\nAbout b.\n.IP\nMore b.\n\
             .RE\n.SH NEXT\n"
        );
    }

    #[test]
    fn a_term_may_take_two_lines() {
        let out = page("## S\n`a` = *int*, default: `x`\n(128)\n:   About a.\n");
        assert!(
            out.ends_with(".TP\n\\fBa\\fR = \\fIint\\fR, default: \\fBx\\fR\n(128)\nAbout a.\n"),
            "{out}"
        );
    }

    #[test]
    fn code_is_verbatim_and_requests_are_escaped() {
        let out = page("## S\n```\n.dot \\x\n  kept\n```\n'quote\n");
        assert!(
            out.contains(".nf\n\\&.dot \\ex\n  kept\n.fi\n\\&'quote\n"),
            "{out}"
        );
    }

    #[test]
    fn marks_span_the_lines_of_a_paragraph_and_unicode_is_escaped() {
        let out = page("## S\na **b\nc** `d\ne` \u{2014} f\n");
        assert!(
            out.ends_with("a \\fBb\nc\\fR \\fBd\ne\\fR \\[u2014] f\n"),
            "{out}"
        );
    }

    #[test]
    fn items_links_and_unclosed_marks() {
        let out = page("## S\n- one [see](x.md) *open\n1. two\n");
        assert!(out.contains(".IP \\(bu 2\none see *open\n"), "{out}");
        assert!(out.contains(".IP 1. 4\ntwo\n"), "{out}");
    }
}
