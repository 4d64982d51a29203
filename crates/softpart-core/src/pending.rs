//! Requests that wait for the scheduler. `softpart exec` run while the
//! scheduler is down starts its command anyway and leaves its request in
//! the `pending` directory beside the control socket; the scheduler applies
//! what is there when it attaches and removes it. A request names its
//! process by id and start time, so a process id reused by then gets
//! nothing.

use crate::control::Request;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub pid: u32,
    /// The process's start time, since boot in clock ticks
    /// (/proc/PID/stat, field 22).
    pub start_time: u64,
    pub request: Request,
}

/// The directory pending requests go to, beside the control socket
/// (`/run/softpart/pending` by default).
pub fn dir(socket: &Path) -> PathBuf {
    socket
        .parent()
        .unwrap_or_else(|| Path::new("/"))
        .join("pending")
}

/// A pending request's file: one per process.
pub fn file(socket: &Path, pid: u32) -> PathBuf {
    dir(socket).join(format!("{pid}.json"))
}

/// A task's start time, if it exists.
pub fn task_start_time(tid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    start_time_of(&stat)
}

/// Field `n` (numbered from 1, as proc(5) does) of a /proc/PID/stat line,
/// from 3 on: counted after the command name, which may hold spaces and
/// parentheses.
pub fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// Field 22 of a /proc/PID/stat line: the task's start time.
pub fn start_time_of(stat: &str) -> Option<u64> {
    stat_field(stat, 22)
}

/// Field 39: the CPU the task last ran on.
pub fn last_cpu_of(stat: &str) -> Option<usize> {
    stat_field(stat, 39).map(|c| c as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{HomeSpec, Target};

    #[test]
    fn start_time_survives_odd_command_names() {
        let stat = "42 (a) b) (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(start_time_of(stat), Some(98765));
        assert_eq!(start_time_of("42 (x) S 1"), None);
        assert_eq!(start_time_of(""), None);
        // Fields 3 to 39 after an odd name, field N holding N.
        let fields: Vec<String> = (3..=39).map(|n| n.to_string()).collect();
        let line = format!("42 (a) b) {}", fields.join(" "));
        assert_eq!(last_cpu_of(&line), Some(39));
        assert_eq!(stat_field(&line, 22), Some(22));
        assert_eq!(stat_field(&line, 2), None);
        let own = task_start_time(std::process::id()).unwrap();
        assert!(own > 0);
    }

    #[test]
    fn pending_requests_sit_beside_the_socket_and_read_back() {
        let sock = Path::new(crate::control::DEFAULT_SOCKET);
        assert_eq!(file(sock, 42), Path::new("/run/softpart/pending/42.json"));
        let p = Pending {
            pid: 42,
            start_time: 7,
            request: Request::Prefer {
                target: Target::Pids(vec![42]),
                home: HomeSpec::Node(1),
                softness: None,
                origin: None,
            },
        };
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Pending>(&text).unwrap(), p);
    }
}
