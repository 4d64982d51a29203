//! Homes set at run time (`softpart prefer`, `softpart exec`) kept in
//! `--state-dir`, so that they outlive a restart of the service (systemd
//! keeps /run/softpart across a restart and a stop with RuntimeDirectoryPreserve).
//!
//! Threads are kept by id and start time: a thread id the kernel has given
//! to another thread since gets nothing. Cgroups are kept by path. Entries
//! for threads and cgroups that are gone are dropped when the file is read.
//! Homes from the config file and the balancer are not kept: they are
//! worked out again at start.

use crate::homes::Home;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use softpart_core::cpulist;
use softpart_core::softness::Softness;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const FILE: &str = "homes.json";
const VERSION: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct StateFile {
    version: u32,
    tasks: Vec<TaskEntry>,
    cgroups: Vec<CgroupEntry>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct TaskEntry {
    tid: u32,
    /// Since boot, in clock ticks (/proc/TID/stat, field 22).
    start_time: u64,
    label: String,
    cpus: String,
    softness: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct CgroupEntry {
    /// From the cgroup2 root, as `softpart prefer --cgroup` takes it.
    path: String,
    cpus: String,
    softness: Option<String>,
    /// Who gave it (Request::Prefer's origin), if a program said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    origin: Option<String>,
}

/// The homes read back: by thread id, and by cgroup id with the cgroup's
/// path as label; and how many entries were dropped as gone.
#[derive(Debug, Default)]
pub(crate) struct Restored {
    pub(crate) tasks: Vec<(u32, Home)>,
    pub(crate) cgroups: Vec<(u64, Home)>,
    /// Who gave the cgroups theirs, where a program said.
    pub(crate) origins: std::collections::BTreeMap<u64, String>,
    pub(crate) dropped: usize,
}

pub(crate) use softpart_core::pending::task_start_time;

fn softness_text(s: Option<Softness>) -> Option<String> {
    s.map(|s| s.to_string())
}

fn home_of(label: String, cpus: &str, softness: &Option<String>) -> Option<Home> {
    let cpus = cpulist::parse(cpus).ok().filter(|c| !c.is_empty())?;
    let softness = match softness {
        None => None,
        Some(s) => Some(s.parse::<Softness>().ok()?),
    };
    Some(Home {
        label,
        cpus,
        softness,
    })
}

/// Writes the homes (threads with their start time, cgroups by path) to
/// DIR/homes.json, whole: a new file renamed over the old one.
pub(crate) fn save(
    dir: &Path,
    tasks: &[(u32, u64, Home)],
    cgroups: &[(String, Home, Option<String>)],
) -> Result<()> {
    let state = StateFile {
        version: VERSION,
        tasks: tasks
            .iter()
            .map(|(tid, start_time, h)| TaskEntry {
                tid: *tid,
                start_time: *start_time,
                label: h.label.clone(),
                cpus: cpulist::format(&h.cpus),
                softness: softness_text(h.softness),
            })
            .collect(),
        cgroups: cgroups
            .iter()
            .map(|(path, h, origin)| CgroupEntry {
                path: path.clone(),
                cpus: cpulist::format(&h.cpus),
                softness: softness_text(h.softness),
                origin: origin.clone(),
            })
            .collect(),
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(FILE);
    let tmp = dir.join(format!("{FILE}.new"));
    std::fs::write(&tmp, serde_json::to_string_pretty(&state)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("replacing {}", path.display()))
}

/// Reads DIR/homes.json (none: nothing to restore). `start_time` and
/// `cgroup_id` say whether a thread and a cgroup still exist.
pub(crate) fn load(
    dir: &Path,
    start_time: impl Fn(u32) -> Option<u64>,
    cgroup_id: impl Fn(&str) -> Option<u64>,
) -> Result<Restored> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Restored::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let state: StateFile =
        serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Restored::default();
    for t in state.tasks {
        let alive = start_time(t.tid) == Some(t.start_time);
        match home_of(t.label, &t.cpus, &t.softness) {
            Some(h) if alive => out.tasks.push((t.tid, h)),
            _ => out.dropped += 1,
        }
    }
    for c in state.cgroups {
        match (
            cgroup_id(&c.path),
            home_of(c.path.clone(), &c.cpus, &c.softness),
        ) {
            (Some(id), Some(h)) => {
                if let Some(o) = c.origin {
                    out.origins.insert(id, o);
                }
                out.cgroups.push((id, h))
            }
            _ => out.dropped += 1,
        }
    }
    Ok(out)
}

/// A cgroup's id from its path (from the cgroup2 root), if it exists.
pub(crate) fn cgroup_id(path: &str) -> Option<u64> {
    let dir = Path::new(crate::control::CGROUP_ROOT).join(path.trim_start_matches('/'));
    std::fs::metadata(dir).ok().map(|m| m.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(label: &str, cpus: &str, softness: Option<&str>) -> Home {
        home_of(label.to_string(), cpus, &softness.map(str::to_string)).unwrap()
    }

    #[test]
    fn homes_come_back_and_the_gone_are_dropped() {
        let dir = std::env::temp_dir().join(format!("softpart-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        save(
            &dir,
            &[
                (10, 500, home("pid 10", "0-3", Some("5:4"))),
                (11, 600, home("pid 10", "0-3", Some("5:4"))),
                (12, 700, home("pid 12", "4", None)),
            ],
            &[
                (
                    "/db.slice".to_string(),
                    home("/db.slice", "4-7", None),
                    Some("kubernetes db/pg-0 node=1".to_string()),
                ),
                (
                    "/gone.slice".to_string(),
                    home("/gone.slice", "0", None),
                    None,
                ),
            ],
        )
        .unwrap();
        // Thread 11's id now belongs to another thread; 12 has ended.
        let start = |tid| match tid {
            10 => Some(500),
            11 => Some(601),
            _ => None,
        };
        let cgid = |p: &str| (p == "/db.slice").then_some(77);
        let r = load(&dir, start, cgid).unwrap();
        assert_eq!(r.tasks.len(), 1);
        assert_eq!(r.tasks[0].0, 10);
        assert_eq!(r.tasks[0].1.cpus, (0..4).collect());
        assert_eq!(r.tasks[0].1.softness, "5:4".parse().ok());
        assert_eq!(r.cgroups.len(), 1);
        assert_eq!(r.cgroups[0].0, 77);
        assert_eq!(r.cgroups[0].1.label, "/db.slice");
        assert_eq!(r.origins[&77], "kubernetes db/pg-0 node=1");
        assert_eq!(r.dropped, 3);
        // No file: nothing to restore. A broken file: an error naming it.
        std::fs::remove_file(dir.join(FILE)).unwrap();
        assert!(load(&dir, start, cgid).unwrap().tasks.is_empty());
        std::fs::write(dir.join(FILE), "{").unwrap();
        let e = format!("{:#}", load(&dir, start, cgid).unwrap_err());
        assert!(e.contains("homes.json"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
