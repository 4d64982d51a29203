//! Writes the man pages and shell completions `make install` installs,
//! from the same definitions the binaries and docs/config.md are made of,
//! so that a page says what `--help` and the document say:
//! scx_softpart(8), softpart(1) and one page per subcommand
//! (softpart-prefer(1), ...), softpart.toml(5); softpart's completions for
//! bash and zsh (clap_complete).

// Only the definitions are used here, not the binaries' code around them.
#[allow(dead_code)]
mod cli;
mod md_roff;
#[allow(dead_code)]
#[path = "../../scx_softpart/src/cli.rs"]
mod scx_cli;

use anyhow::{Context, Result};
use clap::CommandFactory;
use softpart_core::control::exit;
use std::path::{Path, PathBuf};

/// docs/config.md, the one source of softpart.toml(5).
const CONFIG_MD: &str = include_str!("../../../docs/config.md");

const FILES: &str = r#".SH FILES
.TP
\fI/etc/softpart/softpart.toml\fR
the service's config file (softpart.toml(5)); read at start and at \fBsystemctl reload softpart\fR
.TP
\fI/etc/default/softpart\fR
the service's environment file: \fBSOFTPART_ARGS\fR holds more scx_softpart options, e.g. \fBSOFTPART_ARGS="\-\-metrics 127.0.0.1:17321"\fR
.TP
\fI/run/softpart/control.sock\fR
the control socket the softpart CLI talks to
.TP
\fI/run/softpart/state.json\fR
homes given with softpart prefer and exec, kept across a restart until the machine reboots
.TP
\fI/run/softpart/pending/\fR
requests \fBsoftpart exec\fR left while no scheduler ran, applied when it starts (made at boot by tmpfiles.d)
"#;

const ENVIRONMENT: &str = r#".SH ENVIRONMENT
.TP
\fBSOFTPART_SOCKET\fR
the control socket, as \fB\-\-socket\fR
"#;

fn see_also(pages: &[&str]) -> String {
    let refs: Vec<String> = pages.iter().map(|p| format!("\\fB{p}\\fR")).collect();
    format!(".SH \"SEE ALSO\"\n{}\n", refs.join(", "))
}

fn softpart_exit_status() -> String {
    let mut s = String::from(".SH \"EXIT STATUS\"\n");
    for (code, what) in exit::ALL {
        s.push_str(&format!(".TP\n{code}\n{}\n", what.replace('-', "\\-")));
    }
    s
}

const SCX_EXIT_STATUS: &str = r#".SH "EXIT STATUS"
.TP
0
stopped by SIGINT or SIGTERM, or the kernel unloaded the scheduler (the reason is logged)
.TP
1
a failure at start or while running (the log says which)
.TP
78
the config file or the options are not usable: nothing was attached; the unit does not restart on it (RestartPreventExitStatus=78)
"#;

fn write_page(dir: &Path, section: &str, name: &str, body: &[u8]) -> Result<()> {
    let sub = dir.join(format!("man{section}"));
    std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
    let file = sub.join(format!("{name}.{section}"));
    std::fs::write(&file, body).with_context(|| format!("writing {}", file.display()))
}

/// A command's page from clap, with more sections after it.
fn command_page(dir: &Path, cmd: clap::Command, section: &str, extra: &[&str]) -> Result<()> {
    let name = cmd.get_name().to_string();
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .section(section)
        .render(&mut page)?;
    for e in extra {
        page.extend_from_slice(e.as_bytes());
    }
    write_page(dir, section, &name, &page)
}

fn config_page() -> String {
    format!(
        ".TH SOFTPART.TOML 5 \"\" \"softpart {}\"\n.SH NAME\nsoftpart.toml \\- scx_softpart's config file: homes and balanced groups for cgroups\n{}{FILES}{}",
        env!("CARGO_PKG_VERSION"),
        md_roff::render(CONFIG_MD),
        see_also(&["scx_softpart(8)", "softpart(1)", "systemd.unit(5)"]),
    )
}

fn main() -> Result<()> {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let usage = "usage: softpart-mangen MANDIR [BASH_COMPLETION_DIR ZSH_FUNCTION_DIR]";
    let man = args.next().context(usage)?;
    let scx = scx_cli::Opts::command().name("scx_softpart");
    let see = see_also(&["softpart(1)", "softpart.toml(5)", "systemctl(1)"]);
    command_page(&man, scx, "8", &[SCX_EXIT_STATUS, FILES, &see])?;

    let cli = cli::Cli::command();
    let mut subpages = Vec::new();
    for sub in cli.get_subcommands() {
        // clap names are 'static; this process writes a few pages and ends.
        let name: &'static str = format!("softpart-{}", sub.get_name()).leak();
        let invoked: &'static str = format!("softpart {}", sub.get_name()).leak();
        subpages.push(format!("{name}(1)"));
        let see = see_also(&["softpart(1)", "scx_softpart(8)"]);
        let status = softpart_exit_status();
        command_page(
            &man,
            sub.clone().name(name).bin_name(invoked),
            "1",
            &[&status, ENVIRONMENT, &see],
        )?;
    }
    let mut all: Vec<&str> = subpages.iter().map(String::as_str).collect();
    all.extend(["scx_softpart(8)", "softpart.toml(5)"]);
    command_page(
        &man,
        cli.clone(),
        "1",
        &[&softpart_exit_status(), ENVIRONMENT, FILES, &see_also(&all)],
    )?;
    write_page(&man, "5", "softpart.toml", config_page().as_bytes())?;

    if let (Some(bash), Some(zsh)) = (args.next(), args.next()) {
        for (dir, shell, file) in [
            (bash, clap_complete::Shell::Bash, "softpart"),
            (zsh, clap_complete::Shell::Zsh, "_softpart"),
        ] {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let path = dir.join(file);
            let mut f = std::fs::File::create(&path)
                .with_context(|| format!("writing {}", path.display()))?;
            clap_complete::generate(shell, &mut cli::Cli::command(), "softpart", &mut f);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_page_is_the_config_document() {
        let page = config_page();
        // Every field the document's table lists is in the page.
        for field in ["cgroup", "softness", "period_ms", "partitions"] {
            assert!(page.contains(field), "{field} missing");
        }
        assert!(page.starts_with(".TH SOFTPART.TOML 5"));
        assert!(page.contains(".SH FILES"));
    }

    #[test]
    fn every_subcommand_gets_a_page_and_the_pages_are_written() {
        let dir = std::env::temp_dir().join(format!("softpart-mangen-{}", std::process::id()));
        let cli = cli::Cli::command();
        let subs: Vec<String> = cli
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        assert!(subs.contains(&"prefer".to_string()) && subs.contains(&"reload".to_string()));
        for sub in cli.get_subcommands() {
            let name: &'static str = format!("softpart-{}", sub.get_name()).leak();
            command_page(&dir, sub.clone().name(name).bin_name(name), "1", &[]).unwrap();
            let page = std::fs::read_to_string(dir.join(format!("man1/{name}.1"))).unwrap();
            assert!(
                page.contains(".SH OPTIONS") || sub.get_arguments().next().is_none(),
                "{name}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
