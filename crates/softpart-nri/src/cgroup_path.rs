//! Where a pod's and a container's cgroups are, from what NRI says of
//! them. With containerd's `SystemdCgroup = true` NRI gives systemd unit
//! names: a pod's `cgroup_parent` is a slice
//! (`kubepods-burstable-pod<uid>.slice`; a Guaranteed pod's
//! `kubepods-pod<uid>.slice`) and a container's `cgroups_path` is
//! `SLICE:PREFIX:ID`, the scope `PREFIX-ID.scope` in that slice. With the
//! cgroupfs driver both are paths from the cgroup2 root.

/// A systemd slice's path from the cgroup2 root: each `-` in its name
/// opens a slice inside the one before (`a-b.slice` is
/// `/a.slice/a-b.slice`); `-.slice` is the root.
pub fn slice_path(slice: &str) -> Option<String> {
    let name = slice.strip_suffix(".slice")?;
    if name == "-" {
        return Some("/".to_string());
    }
    if name.is_empty() || name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return None;
    }
    let mut path = String::new();
    let mut end = 0;
    for (i, c) in name.char_indices() {
        if c == '-' {
            path.push_str(&format!("/{}.slice", &name[..i]));
        }
        end = i + c.len_utf8();
    }
    path.push_str(&format!("/{}.slice", &name[..end]));
    Some(path)
}

/// A path from the cgroup2 root (absolute: `/kubepods/...`), or a slice.
fn parent_path(parent: &str) -> Option<String> {
    if parent.is_empty() {
        return None;
    }
    if parent.starts_with('/') {
        return Some(parent.trim_end_matches('/').to_string()).filter(|p| !p.is_empty());
    }
    if parent.ends_with(".slice") && !parent.contains('/') {
        return slice_path(parent);
    }
    None
}

/// The pod's cgroup from its sandbox's `cgroup_parent`.
pub fn pod_cgroup(cgroup_parent: &str) -> Option<String> {
    parent_path(cgroup_parent)
}

/// The container's cgroup from its `cgroups_path`.
pub fn container_cgroup(cgroups_path: &str) -> Option<String> {
    let parts: Vec<&str> = cgroups_path.split(':').collect();
    match parts[..] {
        [slice, prefix, id] if !id.is_empty() => {
            let dir = parent_path(slice)?;
            let unit = if prefix.is_empty() {
                format!("{id}.scope")
            } else {
                format!("{prefix}-{id}.scope")
            };
            Some(if dir == "/" {
                format!("/{unit}")
            } else {
                format!("{dir}/{unit}")
            })
        }
        [path] if path.starts_with('/') => parent_path(path),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_nests_at_each_dash() {
        assert_eq!(
            slice_path("kubepods-burstable-pod1a2b_3c.slice").as_deref(),
            Some("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b_3c.slice")
        );
        assert_eq!(
            slice_path("kubepods-pod1a.slice").as_deref(),
            Some("/kubepods.slice/kubepods-pod1a.slice")
        );
        assert_eq!(slice_path("-.slice").as_deref(), Some("/"));
        assert_eq!(slice_path("system.slice").as_deref(), Some("/system.slice"));
        for bad in ["kubepods", "a--b.slice", "-a.slice", "a-.slice", ".slice"] {
            assert_eq!(slice_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_systemd_container_is_a_scope_in_its_pods_slice() {
        assert_eq!(
            container_cgroup("kubepods-besteffort-podab.slice:cri-containerd:0123abc").as_deref(),
            Some(
                "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podab.slice/cri-containerd-0123abc.scope"
            )
        );
        assert_eq!(
            pod_cgroup("kubepods-besteffort-podab.slice").as_deref(),
            Some("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podab.slice")
        );
    }

    #[test]
    fn a_cgroupfs_path_is_taken_as_it_is() {
        assert_eq!(
            container_cgroup("/kubepods/burstable/podab/0123abc").as_deref(),
            Some("/kubepods/burstable/podab/0123abc")
        );
        assert_eq!(
            pod_cgroup("/kubepods/podab/").as_deref(),
            Some("/kubepods/podab")
        );
        for bad in ["", "relative/path", "a:b", "x.slice:cri-containerd:"] {
            assert_eq!(container_cgroup(bad), None, "{bad}");
        }
    }
}
