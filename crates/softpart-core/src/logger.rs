//! The daemons' log (scx_softpart, softpart-nri), on stderr. When stderr
//! is the journal (systemd says so in `JOURNAL_STREAM`, the device and
//! inode of the stream it gave), each line starts with its syslog
//! priority, `<4>` for a warning, which journald takes off and keeps as
//! the entry's priority: `journalctl -p warning` then finds a refused
//! reload. Elsewhere lines are plain text.

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::io::Write;
use std::os::unix::fs::MetadataExt;

struct Logger {
    level: LevelFilter,
    prefix: bool,
}

/// syslog's priority for a level (sd-daemon(3)'s SD_ERR ... SD_DEBUG).
fn priority(level: Level) -> u8 {
    match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

/// The line as written, with the priority prefix or without.
fn line(prefix: bool, level: Level, msg: &std::fmt::Arguments) -> String {
    if prefix {
        format!("<{}>{msg}\n", priority(level))
    } else {
        match level {
            Level::Error => format!("error: {msg}\n"),
            Level::Warn => format!("warning: {msg}\n"),
            _ => format!("{msg}\n"),
        }
    }
}

/// Whether `JOURNAL_STREAM` ("DEV:INODE") names this process's stderr.
fn stderr_is_journal(journal_stream: Option<&str>) -> bool {
    let Some((dev, ino)) = journal_stream.and_then(|v| v.split_once(':')) else {
        return false;
    };
    let Ok(meta) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    dev.parse() == Ok(meta.dev()) && ino.parse() == Ok(meta.ino())
}

impl Log for Logger {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= self.level
    }

    fn log(&self, r: &Record) {
        if self.enabled(r.metadata()) {
            let text = line(self.prefix, r.level(), r.args());
            // One write a line, so that threads' lines do not interleave.
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        }
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

pub fn init(level: LevelFilter) -> Result<(), log::SetLoggerError> {
    let journal = std::env::var("JOURNAL_STREAM").ok();
    let prefix = stderr_is_journal(journal.as_deref());
    log::set_boxed_logger(Box::new(Logger { level, prefix }))?;
    log::set_max_level(level);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_gets_priorities_and_a_terminal_gets_words() {
        let msg = format_args!("reload refused");
        assert_eq!(line(true, Level::Warn, &msg), "<4>reload refused\n");
        assert_eq!(line(true, Level::Info, &format_args!("x")), "<6>x\n");
        assert_eq!(
            line(false, Level::Warn, &format_args!("reload refused")),
            "warning: reload refused\n"
        );
        assert_eq!(line(false, Level::Info, &format_args!("x")), "x\n");
    }

    #[test]
    fn only_a_journal_stream_naming_stderr_counts() {
        assert!(!stderr_is_journal(None));
        assert!(!stderr_is_journal(Some("garbage")));
        assert!(!stderr_is_journal(Some("0:0")));
        let meta = std::fs::metadata("/proc/self/fd/2").unwrap();
        let mine = format!("{}:{}", meta.dev(), meta.ino());
        assert!(stderr_is_journal(Some(&mine)));
    }
}
