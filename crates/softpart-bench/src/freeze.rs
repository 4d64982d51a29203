//! What a frozen guest's vCPUs were doing. A guest whose kernel stops
//! scheduling altogether (every vCPU spinning with interrupts off, or the
//! emulator itself stuck) may print nothing: no hung-task report, no stall
//! warning. Before stopping it, the runner asks QEMU's monitor for every
//! vCPU's registers: user addresses mean the guest still runs programs,
//! one kernel address over every sample means a vCPU is stuck there.
//! Debian ships no System.map, so the addresses are printed as they are;
//! the guest boots with `nokaslr`, so any guest of the same kernel names
//! them (`grep -i ADDR-PREFIX /proc/kallsyms`).

use std::fmt::Write as _;

/// One vCPU as `info registers -a` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VcpuState {
    pub cpu: u32,
    pub rip: u64,
    /// Halted (`HLT=1`): idle, waiting for an interrupt.
    pub halted: bool,
}

/// Parses the monitor's `info registers -a` text: a `CPU#N` line, then
/// that vCPU's registers, `RIP=... HLT=h` among them.
pub fn parse_registers(text: &str) -> Vec<VcpuState> {
    let mut out = Vec::new();
    let mut cpu = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(n) = line.strip_prefix("CPU#") {
            cpu = n.split_whitespace().next().and_then(|n| n.parse().ok());
            continue;
        }
        let Some(rest) = line.strip_prefix("RIP=") else {
            continue;
        };
        let Some(c) = cpu.take() else { continue };
        let Some(rip) = rest
            .split_whitespace()
            .next()
            .and_then(|h| u64::from_str_radix(h, 16).ok())
        else {
            continue;
        };
        let halted = rest.split_whitespace().any(|w| w == "HLT=1");
        out.push(VcpuState {
            cpu: c,
            rip,
            halted,
        });
    }
    out
}

/// One line per vCPU over the samples: where it was each time, and whether
/// it was halted.
pub fn describe(samples: &[Vec<VcpuState>]) -> String {
    let Some(first) = samples.first() else {
        return "no answer from QEMU's monitor".into();
    };
    let mut out = String::new();
    for v in first {
        let _ = write!(out, "\n    vCPU {}:", v.cpu);
        for s in samples {
            if let Some(v) = s.iter().find(|x| x.cpu == v.cpu) {
                let halted = if v.halted { " (halted)" } else { "" };
                let _ = write!(out, " {:#x}{halted}", v.rip);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGS: &str = "info registers -a\r\n\r\nCPU#0\r\n\
        RAX=0000000000000000 RBX=ffffffff82a0ce00 RCX=0000000000000000 RDX=0000000000000001\r\n\
        RIP=ffffffff81e3c1ab RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1\r\n\
        ES =0000 0000000000000000 ffffffff 00c00000\r\n\r\nCPU#1\r\n\
        RIP=ffffffff8110a010 RFL=00000082 [--S----] CPL=0 II=0 A20=1 SMM=0 HLT=0\r\n(qemu) ";

    #[test]
    fn every_vcpu_is_read_with_its_place_and_halt_state() {
        assert_eq!(
            parse_registers(REGS),
            vec![
                VcpuState {
                    cpu: 0,
                    rip: 0xffffffff81e3c1ab,
                    halted: true
                },
                VcpuState {
                    cpu: 1,
                    rip: 0xffffffff8110a010,
                    halted: false
                },
            ]
        );
        assert!(parse_registers("(qemu) ").is_empty());
    }

    #[test]
    fn each_vcpu_gets_a_line_with_every_sample() {
        let samples = [parse_registers(REGS), parse_registers(REGS)];
        let text = describe(&samples);
        assert!(
            text.contains("vCPU 0: 0xffffffff81e3c1ab (halted) 0xffffffff81e3c1ab (halted)"),
            "{text}"
        );
        assert!(
            text.contains("vCPU 1: 0xffffffff8110a010 0xffffffff8110a010"),
            "{text}"
        );
        assert!(describe(&[]).contains("no answer"));
    }
}
