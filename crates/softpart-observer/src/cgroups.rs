//! Names for cgroup ids: on cgroup v2 a cgroup's id is the inode number of
//! its directory, so walking the hierarchy maps ids to paths.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

pub const CGROUP2_ROOT: &str = "/sys/fs/cgroup";

/// Every cgroup under `root`, by id, as a path relative to it ("/" is the
/// root cgroup). Unreadable directories are skipped.
pub fn paths_by_id(root: &Path) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(meta) = std::fs::metadata(&dir) else {
            continue;
        };
        let rel = dir.strip_prefix(root).unwrap_or(&dir);
        out.insert(meta.ino(), format!("/{}", rel.display()));
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
    }
    out
}

/// The id of the cgroup at `path` (its inode number).
pub fn id_of(path: &Path) -> std::io::Result<u64> {
    Ok(std::fs::metadata(path)?.ino())
}
