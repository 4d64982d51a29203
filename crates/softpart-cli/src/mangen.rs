//! Writes the man pages scx_softpart(8) and softpart(1) under a directory
//! (`make install` gives it `$(PREFIX)/share/man`), from the same
//! command-line definitions the two binaries parse, so that a page says
//! what `--help` says.

// Only the definitions are used here, not the binaries' code around them.
#[allow(dead_code)]
mod cli;
#[allow(dead_code)]
#[path = "../../scx_softpart/src/cli.rs"]
mod scx_cli;

use anyhow::{Context, Result};
use clap::CommandFactory;
use std::path::{Path, PathBuf};

fn write(dir: &Path, cmd: clap::Command, section: &str) -> Result<()> {
    let name = cmd.get_name().to_string();
    let sub = dir.join(format!("man{section}"));
    std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .section(section)
        .render(&mut page)?;
    let file = sub.join(format!("{name}.{section}"));
    std::fs::write(&file, page).with_context(|| format!("writing {}", file.display()))?;
    Ok(())
}

fn main() -> Result<()> {
    let dir: PathBuf = std::env::args_os().nth(1).map(PathBuf::from).context(
        "usage: softpart-mangen DIR (writes DIR/man8/scx_softpart.8, DIR/man1/softpart.1)",
    )?;
    write(&dir, scx_cli::Opts::command().name("scx_softpart"), "8")?;
    write(&dir, cli::Cli::command(), "1")?;
    Ok(())
}
