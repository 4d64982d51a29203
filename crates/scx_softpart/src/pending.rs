//! Applies the requests `softpart exec` left while no scheduler ran (see
//! softpart_core::pending): each as if it came over the control socket
//! from the owner of its file, and only if its process is the one that
//! wrote it (same id, same start time). Each file is removed once read.

use crate::Scheduler;
use crate::control::Peer;
use log::{info, warn};
use softpart_core::control::{Request, Response, Target};
use softpart_core::pending::{self, Pending};
use std::os::unix::fs::MetadataExt;

impl Scheduler<'_> {
    /// Returns how many requests were applied.
    pub(crate) fn apply_pending(&mut self) -> usize {
        let dir = pending::dir(&self.opts.control_socket);
        // Made here (root's alone) for `softpart exec` to write into while
        // no scheduler runs.
        if let Err(e) = std::fs::create_dir_all(&dir) {
            warn!("{}: {e}", dir.display());
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return 0;
        };
        let mut applied = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            let read = std::fs::read_to_string(&path)
                .map_err(anyhow::Error::from)
                .and_then(|t| Ok(serde_json::from_str::<Pending>(&t)?));
            let owner = entry.metadata().map(|m| m.uid());
            let _ = std::fs::remove_file(&path);
            let (p, uid) = match (read, owner) {
                (Ok(p), Ok(uid)) => (p, uid),
                (Err(e), _) => {
                    warn!("pending request {}: {e:#}", path.display());
                    continue;
                }
                (_, Err(e)) => {
                    warn!("pending request {}: {e}", path.display());
                    continue;
                }
            };
            if pending::task_start_time(p.pid) != Some(p.start_time) {
                info!("pending request for pid {}: the process is gone", p.pid);
                continue;
            }
            // What `softpart exec` leaves: a home for its own process, and
            // nothing else (a file naming other targets is not one of its).
            let own = matches!(&p.request,
                Request::Prefer { target: Target::Pids(pids), .. } if pids.as_slice() == [p.pid]);
            if !own {
                warn!(
                    "pending request for pid {}: only a home for that process is kept",
                    p.pid
                );
                continue;
            }
            let peer = Peer {
                pid: 0,
                uid,
                cap_sys_nice: uid == 0,
            };
            match self.handle(p.request, &peer) {
                Response::Error { message } => {
                    warn!("pending request for pid {}: {message}", p.pid)
                }
                _ => {
                    info!("pending request for pid {} applied", p.pid);
                    applied += 1;
                }
            }
        }
        applied
    }
}
