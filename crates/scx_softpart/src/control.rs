//! The control socket. The `softpart` CLI sends one JSON request per
//! connection; this side reads the peer's credentials (SO_PEERCRED), and
//! the scheduler's main loop validates the whole request before applying
//! any of it. Permissions follow sched_setaffinity: root or CAP_SYS_NICE, or
//! the task's own uid; for a cgroup, the owner of its directory.

use anyhow::{Context, Result, bail};
use softpart_core::control::{Request, Response};
use softpart_core::cpulist;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

pub use softpart_core::config::CGROUP_ROOT;
const CAP_SYS_NICE: u32 = 23;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub cap_sys_nice: bool,
}

impl Peer {
    /// The scheduler itself, acting on its config file.
    pub fn root() -> Peer {
        Peer {
            pid: std::process::id() as i32,
            uid: 0,
            cap_sys_nice: true,
        }
    }

    pub fn privileged(&self) -> bool {
        self.uid == 0 || self.cap_sys_nice
    }
}

/// A request waiting for the main loop, with where to send the answer.
pub struct Call {
    pub req: Request,
    pub peer: Peer,
    pub reply: Sender<Response>,
}

fn peer_of(stream: &UnixStream) -> Result<Peer> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        bail!("SO_PEERCRED: {}", std::io::Error::last_os_error());
    }
    let caps = std::fs::read_to_string(format!("/proc/{}/status", cred.pid)).unwrap_or_default();
    let cap_eff = caps
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    Ok(Peer {
        pid: cred.pid,
        uid: cred.uid,
        cap_sys_nice: cap_eff & (1 << CAP_SYS_NICE) != 0,
    })
}

/// Listens on `path` (world-connectable: every request is checked) and
/// hands requests to the returned channel.
/// `attached` says whether a BPF scheduler is attached; while it is not
/// (the kernel detached it for a CPU hotplug and the control plane is
/// attaching again), requests are answered at once with the reason.
pub fn serve(path: &Path, attached: Arc<AtomicBool>) -> Result<Receiver<Call>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if path.exists() {
        // A socket that answers belongs to a running scx_softpart: taking
        // its path would cut its CLI off (and this one cannot attach).
        if UnixStream::connect(path).is_ok() {
            bail!(
                "another scx_softpart is running (its control socket {} answers); stop it first",
                path.display()
            );
        }
        std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("listening on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = answer(stream, &tx, &attached);
        }
    });
    Ok(rx)
}

fn answer(mut stream: UnixStream, tx: &Sender<Call>, attached: &AtomicBool) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let peer = peer_of(&stream)?;
    let mut line = String::new();
    BufReader::new(stream.try_clone()?)
        .take(1 << 16)
        .read_line(&mut line)?;
    let resp = match serde_json::from_str::<Request>(&line) {
        Err(e) => Response::Error {
            message: format!("malformed request: {e}"),
        },
        Ok(_) if !attached.load(Ordering::Relaxed) => Response::Unavailable {
            message: "scx_softpart is not attached (stopping, or attaching again after a CPU \
                      hotplug, when the kernel detaches sched_ext schedulers); nothing was \
                      changed: try again in a few seconds"
                .into(),
        },
        Ok(req) => {
            let (rtx, rrx) = channel();
            tx.send(Call {
                req,
                peer,
                reply: rtx,
            })?;
            rrx.recv_timeout(Duration::from_secs(20))
                .unwrap_or(Response::Error {
                    message: "the scheduler did not answer in time".into(),
                })
        }
    };
    writeln!(stream, "{}", serde_json::to_string(&resp)?)?;
    Ok(())
}

/// Real and effective uid of a task, from /proc.
fn task_uids(pid: u32) -> Result<(u32, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("no process with pid {pid}"))?;
    let uids: Vec<u32> = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .map(|v| {
            v.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    match uids.as_slice() {
        [real, eff, ..] => Ok((*real, *eff)),
        _ => bail!("cannot read the owner of pid {pid}"),
    }
}

/// sched_setaffinity's rule: privileged, or the caller's uid is the task's
/// real or effective uid.
pub fn may_set_task(peer: &Peer, real: u32, effective: u32) -> bool {
    peer.privileged() || peer.uid == real || peer.uid == effective
}

/// The CPUs a task may run on (its real affinity).
pub fn allowed_cpus(tid: u32) -> Result<BTreeSet<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::sched_getaffinity(tid as libc::pid_t, std::mem::size_of_val(&set), &mut set)
    };
    if rc != 0 {
        bail!(
            "reading the affinity of pid {tid}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// The threads of a process (or just `pid` if it is a thread id).
pub fn tids_of(pid: u32) -> Vec<u32> {
    let mut tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    if tids.is_empty() {
        tids.push(pid);
    }
    tids
}

/// Checks that the peer may give `pid` a home of `cpus` (if any): the task
/// exists, the peer may change it, and the home is inside its allowed CPUs.
/// Returns its thread ids.
pub fn check_task(peer: &Peer, pid: u32, cpus: Option<&BTreeSet<usize>>) -> Result<Vec<u32>> {
    if pid == 0 {
        bail!("pid 0 is not a task");
    }
    let (real, eff) = task_uids(pid)?;
    if !may_set_task(peer, real, eff) {
        bail!(
            "permission denied: pid {pid} belongs to uid {real}, not to uid {} (needs root or CAP_SYS_NICE)",
            peer.uid
        );
    }
    if let Some(cpus) = cpus {
        let allowed = allowed_cpus(pid)?;
        let outside: BTreeSet<usize> = cpus.difference(&allowed).copied().collect();
        if !outside.is_empty() {
            bail!(
                "CPUs {} of the home are outside pid {pid}'s allowed CPUs {} (softpart never widens affinity)",
                cpulist::format(&outside),
                cpulist::format(&allowed)
            );
        }
    }
    Ok(tids_of(pid))
}

/// A cgroup path as given (absolute, with or without the /sys/fs/cgroup
/// prefix, or relative to it), resolved to its directory.
pub fn cgroup_dir(path: &str) -> Result<PathBuf> {
    if path.trim().is_empty() {
        bail!("cgroup path is empty (the root cgroup is \"/\")");
    }
    let rel = path.trim().trim_start_matches(CGROUP_ROOT);
    let dir = Path::new(CGROUP_ROOT).join(rel.trim_start_matches('/'));
    if rel.split('/').any(|c| c == "..") {
        bail!("cgroup {path:?}: '..' is not allowed");
    }
    if !dir.join("cgroup.procs").exists() {
        bail!(
            "cgroup {path:?} does not exist ({} is not a cgroup v2 directory)",
            dir.display()
        );
    }
    Ok(dir)
}

/// How stats and messages name a cgroup: its path from the cgroup2 root.
pub fn cgroup_label(dir: &Path) -> String {
    match dir.strip_prefix(CGROUP_ROOT) {
        Ok(rel) => format!("/{}", rel.display()),
        Err(_) => dir.display().to_string(),
    }
}

/// Checks that the peer may give the cgroup at `path` a home of `cpus`:
/// privileged or the owner of the directory, and the home inside the
/// cgroup's effective cpuset. Returns the cgroup id and its directory.
pub fn check_cgroup(
    peer: &Peer,
    path: &str,
    cpus: Option<&BTreeSet<usize>>,
) -> Result<(u64, PathBuf)> {
    let dir = cgroup_dir(path)?;
    let meta = std::fs::metadata(&dir)?;
    if !peer.privileged() && meta.uid() != peer.uid {
        bail!(
            "permission denied: cgroup {} belongs to uid {}, not to uid {}",
            dir.display(),
            meta.uid(),
            peer.uid
        );
    }
    if let Some(cpus) = cpus
        && let Ok(eff) = std::fs::read_to_string(dir.join("cpuset.cpus.effective"))
        && let Ok(eff) = cpulist::parse(eff.trim())
        && !eff.is_empty()
    {
        let outside: BTreeSet<usize> = cpus.difference(&eff).copied().collect();
        if !outside.is_empty() {
            bail!(
                "CPUs {} of the home are outside cgroup {}'s CPUs {}",
                cpulist::format(&outside),
                dir.display(),
                cpulist::format(&eff)
            );
        }
    }
    Ok((meta.ino(), dir))
}

/// The cgroup v2 path of a task ("/a/b"), from /proc/PID/cgroup.
pub fn task_cgroup(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, cap: bool) -> Peer {
        Peer {
            pid: 1,
            uid,
            cap_sys_nice: cap,
        }
    }

    #[test]
    fn task_permissions_follow_sched_setaffinity() {
        assert!(may_set_task(&peer(0, false), 1000, 1000));
        assert!(may_set_task(&peer(1001, true), 1000, 1000));
        assert!(may_set_task(&peer(1000, false), 1000, 0));
        assert!(may_set_task(&peer(1000, false), 0, 1000));
        assert!(!may_set_task(&peer(1001, false), 1000, 1000));
    }

    #[test]
    fn own_process_checks() {
        let me = std::process::id();
        let p = peer(unsafe { libc::geteuid() }, false);
        let allowed = allowed_cpus(me).unwrap();
        assert!(!allowed.is_empty());
        assert!(check_task(&p, me, Some(&allowed)).unwrap().contains(&me));
        let e = check_task(&p, me, Some(&[8000].into())).unwrap_err();
        assert!(
            e.to_string().contains("CPUs 8000 of the home are outside"),
            "{e}"
        );
        let e = check_task(&p, 0, None).unwrap_err();
        assert!(e.to_string().contains("pid 0"));
        let e = check_task(&p, 4_000_000, None).unwrap_err();
        assert!(e.to_string().contains("no process with pid 4000000"), "{e}");
    }

    #[test]
    fn cgroup_paths() {
        assert!(
            cgroup_dir("/no/such/group")
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
        assert!(
            cgroup_dir("a/../../etc")
                .unwrap_err()
                .to_string()
                .contains("'..'")
        );
    }
}
