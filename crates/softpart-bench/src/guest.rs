//! Host side of a guest run: builds the initramfs (our binaries, the
//! workloads, their libraries, the kernel config, the plan), boots QEMU with
//! the scenario's topology under TCG, and collects the results channel and
//! the console log. Any kernel BUG/WARNING/sched_ext error in the log is a
//! problem the caller must surface.

use crate::plan::{Message, Plan};
use anyhow::{Context, Result, bail};
use softpart_core::topo::GuestTopo;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Workload programs every guest carries (Debian packages, see
/// scripts/versions.sh).
pub const WORKLOADS: &[&str] = &[
    "busybox",
    "hackbench",
    "stress-ng",
    "sysbench",
    "redis-server",
    "redis-benchmark",
    "chrt",
    "numactl",
];

pub struct Kernel {
    pub vmlinuz: PathBuf,
    pub config: PathBuf,
    pub release: String,
}

pub fn repo_root() -> PathBuf {
    std::env::var_os("SOFTPART_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The cached guest kernel, fetched by scripts/guest-kernel.sh if missing:
/// scripts/versions.sh's, or the trixie-backports package `pkg` names.
pub fn kernel(pkg: Option<&str>) -> Result<Kernel> {
    let script = repo_root().join("scripts/guest-kernel.sh");
    let mut cmd = Command::new("bash");
    if let Some(pkg) = pkg {
        cmd.env("GUEST_KERNEL_PKG", pkg);
    }
    let out = cmd
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed ({})", script.display(), out.status);
    }
    let dir = PathBuf::from(String::from_utf8(out.stdout)?.trim());
    Ok(Kernel {
        vmlinuz: dir.join("vmlinuz"),
        config: dir.join("config"),
        release: fs::read_to_string(dir.join("release"))?.trim().to_string(),
    })
}

pub fn unique_stamp() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn which(name: &str) -> Result<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return if p.is_file() {
            Ok(p)
        } else {
            bail!("{name}: no such file")
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in
        std::env::split_paths(&path).chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
    {
        let p = dir.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!("{name} not found on PATH (run scripts/setup.sh)")
}

/// Shared libraries a dynamic ELF needs, as ldd resolves them on the host.
fn libraries(bin: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(bin).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut libs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let path = match line.split_once("=>") {
            Some((_, rhs)) => rhs.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

fn copy_into(root: &Path, src: &Path, dest: &Path) -> Result<()> {
    let target = root.join(dest.strip_prefix("/").unwrap_or(dest));
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::copy(src, &target)
        .with_context(|| format!("copying {} into the initramfs", src.display()))?;
    Ok(())
}

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /run /acct /usr/bin /sbin /usr/sbin
/bin/busybox --install -s /bin
export PATH=/softpart/bin:/bin:/usr/bin:/sbin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t bpf bpf /sys/fs/bpf
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
# The watchdog reads the runnable tasks per CPU from sched/debug.
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t cgroup -o cpuacct cpuacct /acct
ulimit -l unlimited
# A task stuck in the kernel is reported with its stack after 30 s, not
# 120; the console prints the stack (KERN_INFO) once booting is done.
echo 30 > /proc/sys/kernel/hung_task_timeout_secs
echo 7 > /proc/sys/kernel/printk
# Loopback, for workloads that talk over TCP (redis-benchmark to redis-server).
ip link set lo up
echo "softpart-guest: $(uname -r), CPUs $(cat /sys/devices/system/cpu/online)"
/softpart/bin/softpart-bench agent /softpart/plan.json
echo "softpart-guest: agent exited with $?"
poweroff -f
"#;

pub struct Guest {
    pub topo: GuestTopo,
    pub kernel: Kernel,
    /// Extra kernel parameters (a scenario's `guest_args`, checked there).
    pub extra_args: Vec<String>,
    /// Extra programs to carry (external schedulers), by name or path.
    pub extra_bins: Vec<String>,
    pub workdir: PathBuf,
    pub timeout: Duration,
    /// Longest the guest may go without sending a result line before it
    /// is taken as hung and stopped (a deadlocked guest would otherwise
    /// hold the whole timeout).
    pub silence_limit: Duration,
}

/// Longest a guest may go with no heartbeat, no result and no console
/// line before it is stopped as frozen (no ordinary task gets a CPU, or
/// the kernel or the emulator is stuck): the agent's heartbeat thread
/// writes every 2 s, and even 200 threads on 8 vCPUs let it run within 3 s.
/// A frozen guest is a failure, never booted again.
pub const FREEZE_LIMIT: Duration = Duration::from_secs(120);

pub struct GuestOutput {
    pub messages: Vec<Message>,
    pub console_path: PathBuf,
    /// Kernel log lines that mean something went wrong.
    pub problems: Vec<String>,
    pub elapsed: Duration,
}

impl Guest {
    fn build_initramfs(&self, plan: &Plan) -> Result<PathBuf> {
        let root = self.workdir.join("initramfs");
        if root.exists() {
            fs::remove_dir_all(&root)?;
        }
        fs::create_dir_all(root.join("softpart/bin"))?;
        let exe = std::env::current_exe()?;
        let bindir = exe.parent().context("no parent dir for the bench binary")?;
        let mut elfs: Vec<(PathBuf, PathBuf)> =
            vec![(exe.clone(), "/softpart/bin/softpart-bench".into())];
        for ours in [
            "scx_softpart",
            "softpart-observe",
            "softpart",
            "scx_abort_fixture",
        ] {
            let p = bindir.join(ours);
            if !p.is_file() {
                bail!(
                    "{} is missing: build the workspace first (cargo build --release)",
                    p.display()
                );
            }
            elfs.push((p, format!("/softpart/bin/{ours}").into()));
        }
        for w in WORKLOADS {
            let p = which(w)?;
            let dest = if *w == "busybox" {
                PathBuf::from("/bin/busybox")
            } else {
                p.clone()
            };
            elfs.push((p, dest));
        }
        for extra in &self.extra_bins {
            let p = which(extra)?;
            let name = p.file_name().context("bad program name")?.to_owned();
            elfs.push((p, Path::new("/softpart/bin").join(name)));
        }
        let mut libs = BTreeSet::new();
        for (src, dest) in &elfs {
            copy_into(&root, src, dest)?;
            libs.extend(libraries(src)?);
        }
        for lib in &libs {
            copy_into(&root, &fs::canonicalize(lib)?, lib)?;
        }
        copy_into(
            &root,
            &self.kernel.config,
            &PathBuf::from(format!("/boot/config-{}", self.kernel.release)),
        )?;
        fs::write(root.join("init"), INIT)?;
        fs::write(root.join("softpart/plan.json"), serde_json::to_vec(plan)?)?;
        let mut perms = fs::metadata(root.join("init"))?.permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        fs::set_permissions(root.join("init"), perms)?;

        let image = self.workdir.join("initramfs.cpio.gz");
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "cd '{}' && find . | cpio -o -H newc --quiet | gzip -1 > '{}'",
                root.display(),
                image.display()
            ))
            .status()?;
        if !status.success() {
            bail!("building the initramfs failed ({status})");
        }
        Ok(image)
    }

    pub fn run(&self, plan: &Plan) -> Result<GuestOutput> {
        fs::create_dir_all(&self.workdir)?;
        let initrd = self.build_initramfs(plan)?;
        let console = self.workdir.join("console.log");
        let results = self.workdir.join("results.jsonl");
        let heartbeat = self.workdir.join("heartbeat.log");
        let monitor = std::env::temp_dir().join(format!("softpart-qemu-{}.sock", unique_stamp()));
        for f in [&console, &results, &heartbeat, &monitor] {
            let _ = fs::remove_file(f);
        }
        // nokaslr: a frozen guest's instruction pointers can then be named
        // from any guest of the same kernel (crate::freeze).
        let mut cmdline =
            String::from("console=ttyS0 panic=-1 rdinit=/init loglevel=6 mitigations=off nokaslr");
        for a in &self.extra_args {
            cmdline.push(' ');
            cmdline.push_str(a);
        }
        let mut cmd = Command::new("qemu-system-x86_64");
        cmd.args(["-accel", "tcg,thread=multi", "-cpu", "max", "-nodefaults"])
            .args(["-display", "none", "-no-reboot"])
            .arg("-kernel")
            .arg(&self.kernel.vmlinuz)
            .arg("-initrd")
            .arg(&initrd)
            .arg("-append")
            .arg(&cmdline)
            .arg("-serial")
            .arg(format!("file:{}", console.display()))
            .arg("-serial")
            .arg(format!("file:{}", results.display()))
            .arg("-serial")
            .arg(format!("file:{}", heartbeat.display()))
            .arg("-monitor")
            .arg(format!("unix:{},server=on,wait=off", monitor.display()))
            .args(self.topo.qemu_args(512))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .context("starting qemu-system-x86_64 (run scripts/setup.sh)")?;
        let mut timed_out = false;
        let mut went_silent = None;
        let mut froze = None;
        let mut heard = (0u64, Instant::now());
        // Anything at all from the guest: results, heartbeat, console.
        let mut alive = ((0u64, 0u64, 0u64), Instant::now());
        loop {
            if let Some(st) = child.try_wait()? {
                if !st.success() {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        use std::io::Read;
                        let _ = e.read_to_string(&mut err);
                    }
                    bail!("qemu exited with {st}: {err}");
                }
                break;
            }
            let len = fs::metadata(&results).map(|m| m.len()).unwrap_or(0);
            if len != heard.0 {
                heard = (len, Instant::now());
            }
            let size = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
            let sizes = (len, size(&heartbeat), size(&console));
            if sizes != alive.0 {
                alive = (sizes, Instant::now());
            }
            // Only once the heartbeat has started: before, the kernel boots
            // and the agent loads.
            if sizes.1 > 0 && alive.1.elapsed() > FREEZE_LIMIT {
                froze = Some(format!(
                    "the guest froze: no heartbeat, result or console line for {:.0} s, \
                     stopped after {:.0} s; it was running: {}; its vCPUs:{}",
                    alive.1.elapsed().as_secs_f64(),
                    started.elapsed().as_secs_f64(),
                    last_agent_line(&fs::read_to_string(&console).unwrap_or_default())
                        .unwrap_or("(no agent line)"),
                    crate::freeze::describe(&vcpu_samples(&monitor)),
                ));
                let _ = child.kill();
                let _ = child.wait();
                timed_out = true;
                break;
            }
            let silent = heard.1.elapsed();
            if started.elapsed() > self.timeout || silent > self.silence_limit {
                let _ = child.kill();
                let _ = child.wait();
                timed_out = true;
                if silent > self.silence_limit {
                    went_silent = Some(silent);
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let elapsed = started.elapsed();
        let log = fs::read_to_string(&console).unwrap_or_default();
        let _ = fs::remove_file(&monitor);
        let mut problems = scan_kernel_log(&log);
        if let Some(f) = froze {
            problems.push(f);
        } else if let Some(silent) = went_silent {
            problems.push(format!(
                "guest sent nothing for {:.0} s (limit {:.0} s) and was stopped after {:.0} s; \
                 it was running: {}",
                silent.as_secs_f64(),
                self.silence_limit.as_secs_f64(),
                elapsed.as_secs_f64(),
                last_agent_line(&log).unwrap_or("(no agent line)")
            ));
        } else if timed_out {
            problems.push(format!(
                "guest timed out after {:.0}s",
                elapsed.as_secs_f64()
            ));
        }
        let mut messages = Vec::new();
        for line in fs::read_to_string(&results).unwrap_or_default().lines() {
            let line = line.trim_matches(|c: char| c == '\r' || c.is_whitespace());
            if line.is_empty() {
                continue;
            }
            match serde_json::from_str::<Message>(line) {
                Ok(m) => messages.push(m),
                Err(e) => problems.push(format!("unreadable result line ({e}): {:.200}", line)),
            }
        }
        if !messages.iter().any(|m| matches!(m, Message::Done)) {
            problems.push("the guest agent did not finish (no Done message)".into());
        }
        Ok(GuestOutput {
            messages,
            console_path: console,
            problems,
            elapsed,
        })
    }
}

/// Three samples, a second apart, of where every vCPU is: one place each
/// time is stuck, several is a loop.
fn vcpu_samples(monitor: &Path) -> Vec<Vec<crate::freeze::VcpuState>> {
    let mut samples = Vec::new();
    for i in 0..3 {
        if i > 0 {
            std::thread::sleep(Duration::from_secs(1));
        }
        match monitor_command(monitor, "info registers -a") {
            Some(text) => samples.push(crate::freeze::parse_registers(&text)),
            None => break,
        }
    }
    samples
}

/// One human-monitor command over QEMU's monitor socket; None if QEMU does
/// not answer within a few seconds (the emulator itself is stuck).
fn monitor_command(socket: &Path, command: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
    let until_prompt = |s: &mut std::os::unix::net::UnixStream| -> Option<String> {
        let mut text = Vec::new();
        let mut buf = [0u8; 8192];
        while !text.ends_with(b"(qemu) ") {
            let n = s.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            text.extend_from_slice(&buf[..n]);
        }
        Some(String::from_utf8_lossy(&text).into_owned())
    };
    until_prompt(&mut s)?;
    s.write_all(format!("{command}\n").as_bytes()).ok()?;
    until_prompt(&mut s)
}

/// A guest death that is QEMU's, not the kernel's or the scheduler's: an
/// `int3` oops at a kernel address. The kernel patches its static keys
/// (sched_ext flips several at every attach and detach) by writing an
/// int3, syncing every CPU, writing the new bytes, then removing the int3;
/// under multi-threaded TCG a vCPU now and then still runs a stale
/// translation holding the int3 after the patch is done, and the kernel,
/// finding no patch in progress, oopses. Seen with QEMU 10.0 during CPU
/// hotplug (one detach and attach per step). QEMU 7.2 did it on the third
/// attach of any boot (docs/design.md). Returns the oops line.
pub fn emulator_fault(log: &str) -> Option<String> {
    log.lines()
        .take_while(|l| !l.contains("reboot: Power down"))
        .find(|l| l.contains("Oops: int3:"))
        .map(|l| l.trim().to_string())
}

/// Kernel log lines that mean the run cannot be trusted. Lines after the
/// guest's `poweroff -f` ("reboot: Power down") are ignored: the kernel's
/// own shutdown path can warn about IPIs to CPUs it already stopped.
pub fn scan_kernel_log(log: &str) -> Vec<String> {
    let bad = [
        "BUG:",
        "WARNING:",
        "Oops",
        "Kernel panic",
        "general protection fault",
        "runnable task stall",
        "watchdog failed",
    ];
    let lines: Vec<&str> = log
        .lines()
        .take_while(|l| !l.contains("reboot: Power down"))
        .collect();
    let mut problems = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.contains("blocked for more than") {
            // The hung-task report: the line alone names only the task, so
            // its stack (the lock or wait it is stuck in) goes with it.
            problems.push(with_trace(l, &lines[i + 1..]));
        } else if is_abort_fixture(l) {
            // The test fixture that aborts itself on purpose (guest test
            // after-abort): its error exit is the test's premise.
            continue;
        } else if bad.iter().any(|b| l.contains(b))
            || (l.contains("sched_ext:")
                && (l.contains("error") || l.contains("disabled ("))
                && !l.contains("unregistered from user space")
                // The kernel detaching it for a CPU hotplug (the control
                // plane attaches again): "from the kernel", "from the main
                // kernel" (6.17); errors say "error".
                && !l.contains("unregistered from the "))
        {
            problems.push(l.trim().to_string());
        }
    }
    problems
}

/// The kernel's report of the abort fixture's own error exit: the line
/// that names it as disabled, and its message.
fn is_abort_fixture(line: &str) -> bool {
    // Its name as the kernel prints it carries the build's version.
    line.contains("\"abort_fixture") || line.contains("sched_ext: abort_fixture")
}

/// The agent's last "what I am running" line on the console.
fn last_agent_line(log: &str) -> Option<&str> {
    log.lines()
        .rev()
        .find(|l| l.starts_with("agent: "))
        .map(str::trim)
}

/// A report line followed by the call-trace lines after it (functions
/// only, as `name+0xoff/0xlen`), up to the trace's end.
fn with_trace(report: &str, after: &[&str]) -> String {
    let mut out = report.trim().to_string();
    let frames = after
        .iter()
        .take(60)
        .take_while(|l| !l.contains("</TASK>") && !l.contains("blocked for more than"))
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.contains("+0x") && w.contains('/'))
        })
        .take(24);
    for f in frames {
        out.push_str("\n    ");
        out.push_str(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_log_scan() {
        let log = "[ 1.0] sched_ext: BPF scheduler \"softpart\" enabled\n\
                   [ 2.0] sched_ext: BPF scheduler \"softpart\" disabled (unregistered from user space)\n\
                   [ 2.5] sched_ext: BPF scheduler \"softpart\" disabled (unregistered from the main kernel)\n\
                   [ 3.0] ok line\n";
        assert!(scan_kernel_log(log).is_empty());
        let log = "[ 5.0] sched_ext: BPF scheduler \"softpart\" disabled (runtime error)\n\
                   [ 5.1] sched_ext: softpart: runnable task stall (kworker/0:1[10] failed to run for 30.1s)\n\
                   [ 6.0] WARNING: CPU: 1 PID: 0 at kernel/sched/ext.c:123\n";
        assert_eq!(scan_kernel_log(log).len(), 3);
        // The abort fixture's own error exit is expected; a warning after
        // it is not.
        let log = "[ 7.0] sched_ext: BPF scheduler \"abort_fixture_0.1.0_x86_64\" disabled (scx_bpf_error)\n\
                   [ 7.0] sched_ext: abort_fixture_0.1.0_x86_64: abort.bpf.c:38: abort fixture: aborting 300 ms after its first wakeup, as told\n\
                   [ 8.0] WARNING: CPU: 6 PID: 523 at kernel/sched/ext.c:1174 scx_dsq_insert_commit+0xee/0x120\n";
        assert_eq!(scan_kernel_log(log).len(), 1);
        let log = "[ 9.0] ok\n[ 85.2] reboot: Power down\n\
                   [ 85.3] WARNING: CPU: 7 PID: 2 at arch/x86/kernel/apic/ipi.c:71\n";
        assert!(scan_kernel_log(log).is_empty());
    }

    #[test]
    fn a_hung_task_comes_with_its_stack() {
        let log = "[ 365.89] INFO: task sh:812 blocked for more than 120 seconds.\n\
                   [ 365.89]       Not tainted 6.17.13+deb13-amd64 #1\n\
                   [ 365.89] \"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.\n\
                   [ 365.89] task:sh state:D stack:0 pid:812\n\
                   [ 365.89] Call Trace:\n\
                   [ 365.89]  <TASK>\n\
                   [ 365.89]  __schedule+0x468/0x1310\n\
                   [ 365.89]  ? percpu_rwsem_wait+0x10a/0x130\n\
                   [ 365.89]  _cpu_down+0x2a/0x80\n\
                   [ 365.89]  </TASK>\n\
                   [ 365.90] ok line\n";
        let p = scan_kernel_log(log);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("[ 365.89] INFO: task sh:812 blocked"));
        assert!(p[0].contains("\n    percpu_rwsem_wait+0x10a/0x130\n    _cpu_down+0x2a/0x80"));
        assert!(!p[0].contains("ok line"));
    }

    #[test]
    fn only_a_stale_int3_is_the_emulators() {
        let log = "[ 133.94] Oops: int3: 0000 [#1] SMP NOPTI\n[ 133.95] RIP: 0010:sched_tick+0xd8/0x260\n";
        assert_eq!(
            emulator_fault(log).as_deref(),
            Some("[ 133.94] Oops: int3: 0000 [#1] SMP NOPTI")
        );
        for other in [
            "[ 5.0] Oops: general protection fault, probably for non-canonical address\n",
            "[ 5.0] BUG: kernel NULL pointer dereference, address: 0000000000000008\n",
            "[ 5.0] sched_ext: softpart: runnable task stall\n",
            "[ 9.0] reboot: Power down\n[ 9.1] Oops: int3: 0000 [#1] SMP NOPTI\n",
        ] {
            assert_eq!(emulator_fault(other), None, "{other}");
        }
    }
}
