//! The control socket's requests (`softpart prefer`, `--clear`, `show`,
//! `stat`): each checked whole before anything changes.

use crate::Scheduler;
use crate::control::{self, Peer};
use crate::join;
use anyhow::{Result, bail};
use libbpf_rs::MapCore;
use softpart_core::control::{Request, Response, Target, TaskView};
use softpart_core::cpulist;
use softpart_core::softness::Softness;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

impl Scheduler<'_> {
    pub(crate) fn handle(&mut self, req: Request, peer: &Peer) -> Response {
        match self.try_handle(req, peer) {
            Ok(r) => r,
            Err(e) => Response::Error {
                message: format!("{e:#}"),
            },
        }
    }

    fn try_handle(&mut self, req: Request, peer: &Peer) -> Result<Response> {
        match req {
            Request::Prefer {
                target,
                home,
                softness,
                origin,
            } => {
                let cpus = self.machine.resolve(&home)?;
                let softness = match softness {
                    None => None,
                    Some(s) => Some(s.parse::<Softness>().map_err(anyhow::Error::msg)?),
                };
                match target {
                    Target::Pids(pids) => {
                        if pids.is_empty() {
                            bail!("no pid given");
                        }
                        if origin.is_some() {
                            bail!("an origin is given with a cgroup's home only");
                        }
                        // Check every pid before changing anything.
                        let mut tids = Vec::new();
                        for &pid in &pids {
                            tids.extend(control::check_task(peer, pid, Some(&cpus))?);
                        }
                        let label = format!("pid {}", join(&pids));
                        let before = self
                            .homes
                            .find(&label)
                            .and_then(|id| self.homes.get(id).cloned());
                        let id = self.define_home(label.clone(), &cpus, softness)?;
                        if let Err(e) = self.set_task_homes(&tids, id) {
                            self.restore_home(&label, before);
                            return Err(e);
                        }
                        self.bump_gen();
                        Ok(Response::Ok {
                            message: format!(
                                "{} thread(s) of pid {} now prefer CPUs {}",
                                tids.len(),
                                join(&pids),
                                cpulist::format(&cpus)
                            ),
                        })
                    }
                    Target::Cgroup(path) => {
                        let (cgid, dir) = control::check_cgroup(peer, &path, Some(&cpus))?;
                        self.set_cgroup_home(cgid, control::cgroup_label(&dir), &cpus, softness)?;
                        // An explicit home takes the cgroup out of balancing.
                        self.balancer.groups.remove(&cgid);
                        if let Some(o) = origin {
                            self.origins.insert(cgid, o);
                        }
                        Ok(Response::Ok {
                            message: format!(
                                "cgroup {} now prefers CPUs {}",
                                dir.display(),
                                cpulist::format(&cpus)
                            ),
                        })
                    }
                }
            }
            Request::Clear { target } => match target {
                Target::Pids(pids) => {
                    let mut tids = Vec::new();
                    for &pid in &pids {
                        tids.extend(control::check_task(peer, pid, None)?);
                    }
                    for tid in &tids {
                        let _ = self.skel.maps.task_homes.delete(&tid.to_ne_bytes());
                    }
                    self.bump_gen();
                    Ok(Response::Ok {
                        message: format!("pid {}: own home cleared", join(&pids)),
                    })
                }
                Target::Cgroup(path) => {
                    let (cgid, dir) = control::check_cgroup(peer, &path, None)?;
                    self.clear_cgroup_home(cgid);
                    // The operator said "no home": its memory gives it
                    // none again while the cgroup lives.
                    self.memory_homes.decline(cgid);
                    Ok(Response::Ok {
                        message: format!("cgroup {}: home cleared", dir.display()),
                    })
                }
            },
            Request::Balance { cgroup, origin } => {
                let (cgid, dir) = control::check_cgroup(peer, &cgroup, None)?;
                let label = control::cgroup_label(&dir);
                if self.balancer.groups.contains_key(&cgid) {
                    if let Some(o) = origin {
                        self.origins.insert(cgid, o);
                    }
                    return Ok(Response::Ok {
                        message: format!("cgroup {}: balanced already", dir.display()),
                    });
                }
                self.clear_cgroup_home(cgid);
                let why = origin.clone().unwrap_or_else(|| "softpart".to_string());
                if !self.start_balancing(&label, cgid, None, &why) {
                    bail!(
                        "cgroup {}: the balancer cannot take it (see the log)",
                        dir.display()
                    );
                }
                if let Some(o) = origin {
                    self.origins.insert(cgid, o);
                }
                Ok(Response::Ok {
                    message: format!("cgroup {}: the balancer places it", dir.display()),
                })
            }
            Request::Show { pid } => Ok(Response::Task(self.show(pid)?)),
            Request::Stat => Ok(Response::Stat(Box::new(self.stat_request()))),
            Request::List => Ok(Response::Homes {
                homes: self.home_views(),
            }),
            Request::Reload => {
                if !peer.privileged() {
                    bail!("reload: only root (or CAP_SYS_NICE) may reload the config");
                }
                match self.reload() {
                    Ok(message) => Ok(Response::Ok { message }),
                    Err(message) => Ok(Response::Error { message }),
                }
            }
        }
    }

    fn show(&self, pid: u32) -> Result<TaskView> {
        let allowed = control::allowed_cpus(pid)?;
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            .to_string();
        let mut found = Self::lookup_u32(&self.skel.maps.task_homes, &pid.to_ne_bytes())
            .map(|id| (id, "its own (set for it, or inherited at fork)".to_string()));
        if found.is_none()
            && let Some(cg) = control::task_cgroup(pid)
        {
            let mut path = PathBuf::from(cg);
            loop {
                let dir =
                    Path::new(control::CGROUP_ROOT).join(path.strip_prefix("/").unwrap_or(&path));
                if let Ok(meta) = std::fs::metadata(&dir)
                    && let Some(id) =
                        Self::lookup_u32(&self.skel.maps.cgroup_homes, &meta.ino().to_ne_bytes())
                {
                    found = Some((id, format!("cgroup {}", path.display())));
                    break;
                }
                if !path.pop() {
                    break;
                }
            }
        }
        let (preferred, source) =
            match found.and_then(|(id, src)| self.homes.get(id).map(|h| (h.cpus.clone(), src))) {
                Some((cpus, src)) => {
                    let src = if cpus.is_disjoint(&allowed) {
                        format!("{src}; ignored: none of these CPUs is allowed")
                    } else {
                        src
                    };
                    (cpulist::format(&cpus), src)
                }
                None => (
                    String::new(),
                    "none: it stays near the partition it last ran in".to_string(),
                ),
            };
        Ok(TaskView {
            pid,
            comm,
            allowed: cpulist::format(&allowed),
            preferred,
            source,
        })
    }
}
