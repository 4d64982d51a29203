//! The subset of Markdown that docs/config.md is written in, as man(7)
//! roff, so that softpart.toml(5) is rendered from the same text as the
//! document: headings, paragraphs, fenced code, "- " lists, tables of two
//! columns, `code` (bold). A paragraph starting "Guest tests:" is for the
//! project's maintainers and is left out.

/// roff's escapes for text: backslashes, and a leading `.` or `'` that
/// would be read as a request.
fn escape(text: &str) -> String {
    let s = text.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// Inline text: `code` in bold, everything escaped.
fn inline(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str(&format!(
                "\\fB{}\\fR",
                escape(part).trim_start_matches("\\&")
            ));
        } else {
            out.push_str(&escape(part));
        }
    }
    // A line made by joining may still start with a dot after a code span.
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

fn cells(row: &str) -> Vec<String> {
    row.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// The document as roff, without the title line (`.TH`), which the caller
/// writes; the first `# ` heading becomes the DESCRIPTION's first line.
pub fn render(md: &str) -> String {
    let mut out = String::from(".SH DESCRIPTION\n");
    let mut para: Vec<String> = Vec::new();
    let mut lines = md.lines().peekable();
    let flush = |para: &mut Vec<String>, out: &mut String| {
        if !para.is_empty() {
            let text = para.join(" ");
            if !text.starts_with("Guest tests:") {
                out.push_str(".PP\n");
                out.push_str(&inline(&text));
                out.push('\n');
            }
            para.clear();
        }
    };
    let mut first_heading = true;
    while let Some(line) = lines.next() {
        if let Some(h) = line.strip_prefix("# ").or_else(|| line.strip_prefix("## ")) {
            flush(&mut para, &mut out);
            if first_heading {
                first_heading = false;
                out.push_str(&format!(".PP\n{}\n", inline(h)));
            } else {
                out.push_str(&format!(".SH {}\n", escape(&h.to_uppercase())));
            }
        } else if line.starts_with("```") {
            flush(&mut para, &mut out);
            out.push_str(".PP\n.nf\n.RS 4\n");
            for code in lines.by_ref() {
                if code.starts_with("```") {
                    break;
                }
                out.push_str(&escape(code));
                out.push('\n');
            }
            out.push_str(".RE\n.fi\n");
        } else if let Some(item) = line.strip_prefix("- ") {
            flush(&mut para, &mut out);
            let mut text = item.to_string();
            while let Some(next) = lines.peek() {
                if next.starts_with("  ") && !next.trim().is_empty() {
                    text.push(' ');
                    text.push_str(next.trim());
                    lines.next();
                } else {
                    break;
                }
            }
            out.push_str(&format!(".IP \\(bu 2\n{}\n", inline(&text)));
        } else if line.starts_with('|') {
            flush(&mut para, &mut out);
            let mut rows = vec![cells(line)];
            while let Some(next) = lines.peek() {
                if next.starts_with('|') {
                    rows.push(cells(next));
                    lines.next();
                } else {
                    break;
                }
            }
            // The header and the rule under it; then one tagged paragraph a row.
            for row in rows.iter().skip(2) {
                let (tag, text) = (row.first().cloned().unwrap_or_default(), row[1..].join(" "));
                out.push_str(&format!(".TP\n{}\n{}\n", inline(&tag), inline(&text)));
            }
        } else if line.trim().is_empty() {
            flush(&mut para, &mut out);
        } else {
            para.push(line.trim().to_string());
        }
    }
    flush(&mut para, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_markdown_form_becomes_its_roff() {
        let md = "# The file (`x`)\n\nSome text\nwrapped.\n\n```toml\n[[home]]\ncgroup = '\\x2d'\n```\n\n\
                  ## Fields\n\n| field | meaning |\n| --- | --- |\n| `cpus` | a list |\n\n\
                  - one\n  two\n- `.dot`\n\nGuest tests: `t`\n";
        let roff = render(md);
        for want in [
            ".SH DESCRIPTION\n.PP\nThe file (\\fBx\\fR)\n",
            ".PP\nSome text wrapped.\n",
            ".nf\n.RS 4\n[[home]]\ncgroup = '\\ex2d'\n.RE\n.fi\n",
            ".SH FIELDS\n",
            ".TP\n\\fBcpus\\fR\na list\n",
            ".IP \\(bu 2\none two\n",
            ".IP \\(bu 2\n\\fB.dot\\fR\n",
        ] {
            assert!(roff.contains(want), "no {want:?} in\n{roff}");
        }
        assert!(!roff.contains("Guest tests"), "{roff}");
        // No line starts a request by accident.
        for l in roff.lines() {
            assert!(
                !l.starts_with('.')
                    || l.starts_with(".SH")
                    || l.starts_with(".PP")
                    || l.starts_with(".TP")
                    || l.starts_with(".IP")
                    || l.starts_with(".nf")
                    || l.starts_with(".fi")
                    || l.starts_with(".RS")
                    || l.starts_with(".RE"),
                "{l:?}"
            );
        }
    }
}
