//! The guest's watchdog for sched_ext stuck half-attached or half-detached
//! (`enabling` or `disabling`): an attachment that hangs, as one racing a
//! CPU hotplug did (docs/reliability.md, Soak).
//!
//! Every stall is reported once it has lasted STUCK_AFTER_S, with the
//! blocked tasks, every CPU's stack, sched_ext's own dump (per-CPU
//! runqueues and their tasks) and the runnable tasks per CPU; a stall that
//! lasts GIVE_UP_AFTER_S is reported again and ends the boot. Without
//! that, a hung guest whose heartbeat still beats ran to the bench's
//! timeout (6120 s for the soak).
//!
//! The thread is SCHED_FIFO, which sched_ext never schedules, and it
//! neither forks nor starts threads once a stall begins (a stuck
//! attachment holds off every fork and clone), so it runs when every
//! normal task is stuck. It reads the kernel's reports back itself (from
//! /dev/kmsg and the trace buffer) because the console's printing thread
//! may be one of the stuck tasks.

use crate::plan::Message;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::mpsc;
use std::time::Duration;

pub const STUCK_AFTER_S: u64 = 30;
pub const GIVE_UP_AFTER_S: u64 = 180;
/// Reports per boot, so that a guest attaching and stalling over and over
/// does not flood the results channel.
const MAX_REPORTS: u32 = 6;
const POLL_S: u64 = 5;

const SCX_STATE: &str = "/sys/kernel/sched_ext/state";
const SCX_DUMP_EVENT: &str = "/sys/kernel/tracing/events/sched_ext/sched_ext_dump/enable";
const TRACE_PIPE: &str = "/sys/kernel/tracing/trace_pipe";
const SCHED_DEBUG: &str = "/sys/kernel/debug/sched/debug";

#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    Wait,
    Report,
    GiveUp,
}

/// How long sched_ext has been between states, polled every few seconds.
#[derive(Debug, Default)]
pub struct Stall {
    stuck_for: u64,
    reported: bool,
    reports: u32,
}

impl Stall {
    /// `state` read `secs` after the previous read.
    pub fn step(&mut self, state: &str, secs: u64) -> Action {
        if state != "enabling" && state != "disabling" {
            self.stuck_for = 0;
            self.reported = false;
            return Action::Wait;
        }
        self.stuck_for += secs;
        if self.stuck_for >= GIVE_UP_AFTER_S {
            return Action::GiveUp;
        }
        if self.stuck_for >= STUCK_AFTER_S && !self.reported && self.reports < MAX_REPORTS {
            self.reported = true;
            self.reports += 1;
            return Action::Report;
        }
        Action::Wait
    }

    pub fn stuck_for(&self) -> u64 {
        self.stuck_for
    }
}

/// From the scheduler's debug file, one line per CPU: its run count, the
/// task running there and the tasks it counts as runnable (state R),
/// grouped by name with their pids when alone: which task keeps a CPU
/// busy, in a few hundred bytes even when 60 tasks wait on one CPU.
pub fn runnable_tasks(sched_debug: &str) -> String {
    struct Cpu {
        heading: String,
        nr_running: String,
        running: Vec<String>,
        runnable: Vec<(String, String)>,
    }
    let mut cpus: Vec<Cpu> = Vec::new();
    for line in sched_debug.lines() {
        if let Some(rest) = line.strip_prefix("cpu#") {
            cpus.push(Cpu {
                heading: format!("cpu#{}", rest.split(',').next().unwrap_or(rest)),
                nr_running: "?".into(),
                running: Vec::new(),
                runnable: Vec::new(),
            });
            continue;
        }
        let Some(cpu) = cpus.last_mut() else {
            continue;
        };
        let t = line.trim_start();
        if let Some(v) = t.strip_prefix(".nr_running") {
            cpu.nr_running = v.trim_start_matches([' ', ':']).trim().to_string();
            continue;
        }
        let b = line.as_bytes();
        if b.len() > 2 && (b[0] == b' ' || b[0] == b'>') && b[1] == b'R' && b[2] == b' ' {
            let mut f = line[2..].split_whitespace();
            let (name, pid) = (f.next().unwrap_or("?"), f.next().unwrap_or("?"));
            if b[0] == b'>' {
                cpu.running.push(format!("{name}[{pid}]"));
            } else {
                cpu.runnable.push((name.to_string(), pid.to_string()));
            }
        }
    }
    let mut out = String::new();
    for c in cpus {
        let mut by_name: Vec<(String, Vec<String>)> = Vec::new();
        for (name, pid) in c.runnable {
            match by_name.iter_mut().find(|(n, _)| *n == name) {
                Some((_, pids)) => pids.push(pid),
                None => by_name.push((name, vec![pid])),
            }
        }
        let waiting: Vec<String> = by_name
            .iter()
            .map(|(n, pids)| match pids.as_slice() {
                [pid] => format!("{n}[{pid}]"),
                _ => format!("{n} x{}", pids.len()),
            })
            .collect();
        out.push_str(&format!(
            "{}: nr_running {}; running {}; runnable {}\n",
            c.heading,
            c.nr_running,
            if c.running.is_empty() {
                "-".into()
            } else {
                c.running.join(" ")
            },
            if waiting.is_empty() {
                "-".into()
            } else {
                waiting.join(", ")
            },
        ));
    }
    out
}

/// Cuts `text` to at most `max` bytes at a character boundary.
fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let at = (0..=max)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(at);
        text.push_str("\n(cut)");
    }
    text
}

/// The message text of every /dev/kmsg record not read yet.
fn read_kmsg(kmsg: &mut fs::File) -> String {
    let mut text = String::new();
    let mut buf = vec![0u8; 8192];
    // One record per read; EAGAIN when there is no more.
    while let Ok(n) = kmsg.read(&mut buf) {
        if n == 0 {
            break;
        }
        let rec = String::from_utf8_lossy(&buf[..n]);
        if let Some((_, msg)) = rec.split_once(';') {
            text.push_str(msg.lines().next().unwrap_or(""));
            text.push('\n');
        }
    }
    text
}

/// Everything in a non-blocking pipe now.
fn drain(pipe: &mut Option<fs::File>) -> String {
    let Some(f) = pipe else {
        return String::new();
    };
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 16384];
    while let Ok(n) = f.read(&mut buf) {
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n]);
        if bytes.len() > 1 << 20 {
            break;
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Reads the scheduler's debug file on a thread started before any stall:
/// reading it may itself wait on a stuck lock, and the watchdog must not.
fn sched_debug_reader() -> (mpsc::Sender<()>, mpsc::Receiver<String>) {
    let (ask, asked) = mpsc::channel::<()>();
    let (answer, answers) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        while asked.recv().is_ok() {
            let text = fs::read_to_string(SCHED_DEBUG)
                .map(|t| runnable_tasks(&t))
                .unwrap_or_else(|e| format!("({SCHED_DEBUG}: {e})"));
            if answer.send(text).is_err() {
                break;
            }
        }
    });
    (ask, answers)
}

struct Sources {
    kmsg: fs::File,
    trace: Option<fs::File>,
    ask_sched_debug: mpsc::Sender<()>,
    sched_debug: mpsc::Receiver<String>,
}

impl Sources {
    /// What the kernel says about the stall now.
    fn dump(&mut self) -> String {
        // Only what the requests below print.
        let _ = read_kmsg(&mut self.kmsg);
        let _ = drain(&mut self.trace);
        let _ = fs::write("/proc/sysrq-trigger", "w");
        let _ = fs::write("/proc/sysrq-trigger", "l");
        let _ = fs::write("/proc/sysrq-trigger", "D");
        let _ = self.ask_sched_debug.send(());
        std::thread::sleep(Duration::from_secs(2));
        let stacks = cut(read_kmsg(&mut self.kmsg), 24000);
        let scx = cut(drain(&mut self.trace), 12000);
        let runnable = cut(
            self.sched_debug
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| format!("({SCHED_DEBUG} not read within 10 s)")),
            8000,
        );
        format!(
            "{stacks}\n-- sched_ext dump (SysRq-D) --\n{}\n-- runnable tasks per CPU ({SCHED_DEBUG}) --\n{runnable}\n-- the scheduler's log, its end --\n{}",
            if scx.trim().is_empty() {
                "(none)"
            } else {
                &scx
            },
            scheduler_log_tail(std::path::Path::new("/tmp"), 6000)
        )
    }
}

/// The newest scheduler log in `dir` (the agent's `sched-*.err`): the
/// scheduler that stalled, whose log the bench would lose with the guest
/// if the stall ran to the time limit. At most `max` bytes: from its last
/// debug dump on (which opens with why the scheduler is exiting) half of
/// them, and the log's last half.
fn scheduler_log_tail(dir: &std::path::Path, max: usize) -> String {
    let newest = fs::read_dir(dir).ok().and_then(|entries| {
        entries
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with("sched-") && name.ends_with(".err")
            })
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .max()
    });
    let Some((_, path)) = newest else {
        return "(no scheduler log)".into();
    };
    let text = String::from_utf8_lossy(&fs::read(&path).unwrap_or_default()).into_owned();
    let tail_from = floor_char(&text, text.len().saturating_sub(max / 2));
    let head = match text.rfind("DEBUG DUMP") {
        Some(at) if at < tail_from => {
            let end = floor_char(&text, (at + max / 2).min(tail_from));
            format!("{}\n...\n", &text[at..end])
        }
        _ => String::new(),
    };
    let tail_from = if head.is_empty() {
        floor_char(&text, text.len().saturating_sub(max))
    } else {
        tail_from
    };
    format!("{}:\n{head}{}", path.display(), &text[tail_from..])
}

/// The nearest char boundary of `text` at or below `at`.
fn floor_char(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Starts the watchdog; it writes its reports as result lines on `tty`.
pub fn start(tty: &'static str) {
    // Before any stall: turning a trace event on takes the CPU hotplug
    // lock, which a stuck attachment may hold. The event fires only on a
    // dump, so it costs nothing until then.
    let _ = fs::write(SCX_DUMP_EVENT, "1");
    let (ask_sched_debug, sched_debug) = sched_debug_reader();
    std::thread::spawn(move || {
        let param = libc::sched_param { sched_priority: 50 };
        // SAFETY: sets the calling thread's policy from a valid struct.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
            return;
        }
        let open_nonblocking = |p: &str| {
            fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(p)
        };
        let (Ok(mut out), Ok(kmsg)) = (
            fs::OpenOptions::new().write(true).open(tty),
            open_nonblocking("/dev/kmsg"),
        ) else {
            return;
        };
        let mut src = Sources {
            kmsg,
            trace: open_nonblocking(TRACE_PIPE).ok(),
            ask_sched_debug,
            sched_debug,
        };
        let mut send = |m: &Message| {
            if let Ok(line) = serde_json::to_string(m) {
                // One write per line: the agent writes its own lines on
                // another descriptor of the same tty.
                let _ = out.write_all(format!("{line}\n").as_bytes());
            }
        };
        let mut stall = Stall::default();
        loop {
            std::thread::sleep(Duration::from_secs(POLL_S));
            let state = fs::read_to_string(SCX_STATE)
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            match stall.step(&state, POLL_S) {
                Action::Wait => {}
                Action::Report => send(&Message::Error {
                    context: format!(
                        "guest watchdog: sched_ext {state} for {} s",
                        stall.stuck_for()
                    ),
                    message: src.dump(),
                }),
                Action::GiveUp => {
                    send(&Message::Error {
                        context: format!(
                            "guest watchdog: sched_ext {state} for {} s, no progress; \
                             the guest is restarted to end this boot (QEMU runs with -no-reboot)",
                            stall.stuck_for()
                        ),
                        message: src.dump(),
                    });
                    std::thread::sleep(Duration::from_secs(1));
                    let _ = fs::write("/proc/sysrq-trigger", "b");
                    return;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stall: &mut Stall, states: &[&str]) -> Vec<Action> {
        states.iter().map(|s| stall.step(s, POLL_S)).collect()
    }

    #[test]
    fn a_stall_is_reported_once_at_30_s_and_given_up_at_180_s() {
        let mut s = Stall::default();
        let acts = run(&mut s, &["enabling"; 36]);
        let at = |a: Action| {
            acts.iter()
                .position(|x| *x == a)
                .map(|i| (i as u64 + 1) * POLL_S)
        };
        assert_eq!(at(Action::Report), Some(STUCK_AFTER_S));
        assert_eq!(acts.iter().filter(|a| **a == Action::Report).count(), 1);
        assert_eq!(at(Action::GiveUp), Some(GIVE_UP_AFTER_S));
    }

    #[test]
    fn each_new_stall_is_reported_up_to_the_cap() {
        let mut s = Stall::default();
        let mut reports = 0;
        for _ in 0..10 {
            let mut states = vec!["disabling"; 7];
            states.push("enabled");
            reports += run(&mut s, &states)
                .iter()
                .filter(|a| **a == Action::Report)
                .count();
        }
        assert_eq!(reports, MAX_REPORTS as usize);
    }

    #[test]
    fn short_transitions_and_steady_states_are_not_stalls() {
        let mut s = Stall::default();
        let states = [
            "enabling",
            "enabled",
            "disabling",
            "disabled",
            "enabling",
            "enabled",
        ]
        .repeat(20);
        assert!(run(&mut s, &states).iter().all(|a| *a == Action::Wait));
        assert!(
            run(&mut s, &["enabled"; 100])
                .iter()
                .all(|a| *a == Action::Wait)
        );
    }

    #[test]
    fn runnable_tasks_is_one_line_per_cpu_with_what_keeps_it_busy() {
        let debug = "\
cpu#6, 2400.000 MHz
  .nr_running                    : 4
  .nr_switches                   : 1234
runnable tasks:
 S            task   PID
-------------------------
 I          rcu_gp     3 0.000
 S         cpuhp/6    44 0.000
 R     kworker/6:1    51 0.000
 R       stress-ng  1001 0.000
 R       stress-ng  1002 0.000
>R    hotplug.sh   300 0.000
 D      cgroup-rm   301 0.000
cpu#7, 2400.000 MHz
  .nr_running                    : 0
";
        assert_eq!(
            runnable_tasks(debug),
            "cpu#6: nr_running 4; running hotplug.sh[300]; runnable kworker/6:1[51], stress-ng x2\n\
             cpu#7: nr_running 0; running -; runnable -\n"
        );
    }

    #[test]
    fn the_newest_scheduler_log_is_the_one_told() {
        let dir = std::env::temp_dir().join(format!("watchdog-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(scheduler_log_tail(&dir, 100), "(no scheduler log)");
        fs::write(dir.join("sched-1.err"), "old run").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        fs::write(dir.join("sched-2.err"), "0123456789 the stall").unwrap();
        fs::write(dir.join("sched-3.out"), "not a log").unwrap();
        let told = scheduler_log_tail(&dir, 9);
        assert!(told.ends_with("sched-2.err:\nthe stall"), "{told}");
        // A dump: its opening (why), then the log's end.
        let log = format!(
            "start\nDEBUG DUMP\nwhy: stall\n{}\nthe end",
            "x".repeat(100)
        );
        fs::write(dir.join("sched-2.err"), log).unwrap();
        let told = scheduler_log_tail(&dir, 60);
        fs::remove_dir_all(&dir).unwrap();
        assert!(told.contains(":\nDEBUG DUMP\nwhy: stall\n"), "{told}");
        assert!(
            told.ends_with(&format!("\n...\n{}\nthe end", "x".repeat(22))),
            "{told}"
        );
    }

    #[test]
    fn cut_keeps_char_boundaries() {
        assert_eq!(cut("abc".into(), 5), "abc");
        assert_eq!(cut("aé".into(), 2), "a\n(cut)");
    }
}
