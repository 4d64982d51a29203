//! softpart-nri: homes for Kubernetes pods and containers from their
//! annotations, read through containerd's Node Resource Interface and
//! given through scx_softpart's control socket.

use anyhow::{Context, Result};
use clap::Parser;
use log::{LevelFilter, info, warn};
use softpart_nri::config::{self, Config};
use softpart_nri::plugin::{self, Shared};
use softpart_nri::wanted::Node;
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::time::Duration;

/// Gives a pod's cgroup the home its annotation asks for
/// (home.softpart.io/pod: "node=1", or llc=N, cpus=LIST, with an optional
/// softness=A:P; home.softpart.io/container.NAME for one container), or
/// hands it to the balancer (balance.softpart.io/pod: "true"), for pods in
/// the namespaces its config allows. It never changes or fails a
/// container: a home that cannot be given is logged, and the pod runs
/// without it.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Opts {
    /// The config file: allowed namespaces, the plugin's index. A missing
    /// file at the default path allows no namespace.
    #[arg(long, default_value = config::DEFAULT_PATH)]
    config: PathBuf,
    /// containerd's NRI socket (when containerd starts the plugin itself it
    /// passes a connected socket instead, in NRI_PLUGIN_SOCKET)
    #[arg(long, default_value = "/var/run/nri/nri.sock")]
    nri_socket: PathBuf,
    /// scx_softpart's control socket
    #[arg(long, env = "SOFTPART_SOCKET", default_value = softpart_core::control::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Serve the plugin's counters as OpenMetrics at http://ADDR/metrics
    /// (annotations ignored by why, homes refused, homes wanted, whether
    /// containerd and scx_softpart answer), e.g. 127.0.0.1:17322
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Log only what went wrong, not each registration and each home
    /// given and cleared
    #[arg(short, long)]
    quiet: bool,
}

/// How long the plugin waits before connecting again after containerd
/// closed the connection (it restarted) or could not be reached.
const RECONNECT: Duration = Duration::from_secs(1);

fn main() -> Result<()> {
    let opts = Opts::parse();
    softpart_core::logger::init(if opts.quiet {
        LevelFilter::Warn
    } else {
        LevelFilter::Info
    })?;
    let given = std::env::args_os()
        .any(|a| a == "--config" || a.to_string_lossy().starts_with("--config="));
    let cfg = Config::load(&opts.config, given)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(run(opts, cfg))
}

async fn run(opts: Opts, cfg: Config) -> Result<()> {
    let shared = Shared::new(Node::new(cfg.allowed.clone()));
    if let Some(addr) = &opts.metrics {
        softpart_nri::metrics::serve(addr, shared.clone())?;
    }
    tokio::spawn(plugin::worker(shared.clone(), opts.socket.clone()));
    // Started by containerd: one connection, handed over; the plugin ends
    // with it (containerd starts it again).
    if let Ok(fd) = std::env::var("NRI_PLUGIN_SOCKET") {
        let fd: i32 = fd
            .parse()
            .context("NRI_PLUGIN_SOCKET: not a file descriptor")?;
        // SAFETY: containerd passes this descriptor, a connected unix
        // socket, for the plugin's own use.
        let std = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
        std.set_nonblocking(true)?;
        let sock = tokio::net::UnixStream::from_std(std)?;
        let name = std::env::var("NRI_PLUGIN_NAME").unwrap_or_else(|_| "softpart".into());
        let idx = std::env::var("NRI_PLUGIN_IDX").unwrap_or(cfg.index.clone());
        return plugin::serve(sock, shared, &name, &idx).await;
    }
    let mut said = false;
    loop {
        match tokio::net::UnixStream::connect(&opts.nri_socket).await {
            Ok(sock) => {
                said = false;
                match plugin::serve(sock, shared.clone(), "softpart", &cfg.index).await {
                    Ok(()) => info!("containerd closed the connection; connecting again"),
                    Err(e) => warn!("{e:#}; connecting again"),
                }
            }
            Err(e) => {
                if !said {
                    warn!(
                        "cannot reach containerd's NRI socket {}: {e} (is NRI enabled?); trying every {} s",
                        opts.nri_socket.display(),
                        RECONNECT.as_secs()
                    );
                    said = true;
                }
            }
        }
        tokio::time::sleep(RECONNECT).await;
    }
}
