//! A small CRI client: what the kubelet asks containerd for when it runs,
//! stops and removes a pod, so that a guest test drives containerd (and
//! its NRI plugins) as a Kubernetes node does, with no kubelet. gRPC
//! unary calls over HTTP/2 on containerd's unix socket; the messages are
//! generated from the vendored CRI proto (build.rs).

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use clap::{Args, Subcommand};
use protobuf::Message;
use std::collections::HashMap;
use std::path::PathBuf;

#[allow(
    clippy::all,
    clippy::pedantic,
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    unused_imports,
    unused_mut,
    unused_results
)]
mod api {
    include!(concat!(env!("OUT_DIR"), "/cri/api.rs"));
}

#[derive(Debug, Args)]
pub struct CriOpts {
    /// containerd's socket
    #[arg(long, default_value = "/run/containerd/containerd.sock")]
    socket: PathBuf,
    #[command(subcommand)]
    cmd: CriCmd,
}

#[derive(Debug, Subcommand)]
enum CriCmd {
    /// Run a pod (RunPodSandbox, as the kubelet with the systemd cgroup
    /// driver: its cgroup parent is kubepods[-QOS]-pod<UID>.slice, host
    /// network), then create and start one container in it per --container
    /// running the command; prints "pod ID" and "container NAME ID" lines.
    Up(UpOpts),
    /// Stop a container (StopContainer, no grace period).
    Stop { container: String },
    /// Stop and remove a pod with its containers (StopPodSandbox,
    /// RemovePodSandbox).
    Down { pod: String },
}

#[derive(Debug, Args)]
struct UpOpts {
    #[arg(long)]
    name: String,
    #[arg(long, default_value = "default")]
    namespace: String,
    /// The pod's UID (dashes allowed; the slice name takes underscores)
    #[arg(long)]
    uid: String,
    /// guaranteed, burstable or besteffort
    #[arg(long, default_value = "burstable")]
    qos: String,
    /// A pod annotation, KEY=VALUE (repeat for several)
    #[arg(long = "annotation", value_parser = key_value)]
    annotations: Vec<(String, String)>,
    /// A container's name (repeat for several; each runs the command)
    #[arg(long = "container", default_value = "main")]
    containers: Vec<String>,
    #[arg(long, default_value = "docker.io/library/busybox:latest")]
    image: String,
    /// The containers' command
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{s:?}: KEY=VALUE"))
}

/// The pod's cgroup parent as the kubelet names it with the systemd
/// driver: Guaranteed pods sit directly under kubepods.slice.
pub fn cgroup_parent(qos: &str, uid: &str) -> Result<String> {
    let uid = uid.replace('-', "_");
    Ok(match qos {
        "guaranteed" => format!("kubepods-pod{uid}.slice"),
        "burstable" | "besteffort" => format!("kubepods-{qos}-pod{uid}.slice"),
        q => bail!("--qos {q:?}: guaranteed, burstable or besteffort"),
    })
}

/// The 5-byte gRPC prefix (not compressed, length big-endian) and the
/// message.
pub fn grpc_frame(msg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + msg.len());
    out.push(0);
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(msg);
    out
}

/// The message of a unary response body.
pub fn grpc_unframe(body: &[u8]) -> Result<&[u8]> {
    if body.len() < 5 {
        bail!("a gRPC response of {} bytes, no message", body.len());
    }
    if body[0] != 0 {
        bail!("a compressed gRPC response (not asked for)");
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    body.get(5..5 + len)
        .with_context(|| format!("a gRPC message of {len} bytes cut at {}", body.len() - 5))
}

struct Client {
    send: h2::client::SendRequest<Bytes>,
}

impl Client {
    async fn connect(socket: &PathBuf) -> Result<Client> {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .with_context(|| format!("connecting to {}", socket.display()))?;
        let (send, conn) = h2::client::handshake(stream)
            .await
            .context("HTTP/2 handshake with containerd")?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Client { send })
    }

    async fn call<Req: Message, Resp: Message>(&self, method: &str, req: &Req) -> Result<Resp> {
        let body = grpc_frame(&req.write_to_bytes()?);
        let request = http::Request::builder()
            .method("POST")
            .uri(format!(
                "http://localhost/runtime.v1.RuntimeService/{method}"
            ))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())?;
        let mut send = self.send.clone().ready().await?;
        let (response, mut stream) = send.send_request(request, false)?;
        stream.send_data(Bytes::from(body), true)?;
        let (parts, mut body) = response.await?.into_parts();
        let mut data = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            let _ = body.flow_control().release_capacity(chunk.len());
            data.extend_from_slice(&chunk);
        }
        let trailers = body.trailers().await?;
        // A failed call may come as headers only ("trailers-only").
        let status = trailers.as_ref().unwrap_or(&parts.headers);
        let code = status
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if code != "0" {
            let msg = status
                .get("grpc-message")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            bail!("{method}: gRPC status {code:?}: {msg}");
        }
        Ok(Resp::parse_from_bytes(grpc_unframe(&data)?)?)
    }
}

fn sandbox_config(o: &UpOpts) -> Result<api::PodSandboxConfig> {
    let mut ns = api::NamespaceOption::new();
    ns.network = api::NamespaceMode::NODE.into();
    let mut sec = api::LinuxSandboxSecurityContext::new();
    sec.namespace_options = Some(ns).into();
    let mut linux = api::LinuxPodSandboxConfig::new();
    linux.cgroup_parent = cgroup_parent(&o.qos, &o.uid)?;
    linux.security_context = Some(sec).into();
    let mut meta = api::PodSandboxMetadata::new();
    meta.name = o.name.clone();
    meta.namespace = o.namespace.clone();
    meta.uid = o.uid.clone();
    let mut c = api::PodSandboxConfig::new();
    c.metadata = Some(meta).into();
    // Host network shares the host's UTS namespace too: no hostname of
    // its own (runc refuses one), as the kubelet sends for such pods.
    c.log_directory = format!("/var/log/pods/{}_{}_{}", o.namespace, o.name, o.uid);
    c.annotations = o.annotations.iter().cloned().collect::<HashMap<_, _>>();
    c.linux = Some(linux).into();
    Ok(c)
}

pub fn main(opts: CriOpts) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let client = Client::connect(&opts.socket).await?;
        match opts.cmd {
            CriCmd::Up(o) => {
                let config = sandbox_config(&o)?;
                let mut req = api::RunPodSandboxRequest::new();
                req.config = Some(config.clone()).into();
                let pod: api::RunPodSandboxResponse = client.call("RunPodSandbox", &req).await?;
                println!("pod {}", pod.pod_sandbox_id);
                for name in &o.containers {
                    let mut meta = api::ContainerMetadata::new();
                    meta.name = name.clone();
                    let mut image = api::ImageSpec::new();
                    image.image = o.image.clone();
                    let mut c = api::ContainerConfig::new();
                    c.metadata = Some(meta).into();
                    c.image = Some(image).into();
                    c.command = o.command.clone();
                    c.log_path = format!("{name}/0.log");
                    let mut req = api::CreateContainerRequest::new();
                    req.pod_sandbox_id = pod.pod_sandbox_id.clone();
                    req.config = Some(c).into();
                    req.sandbox_config = Some(config.clone()).into();
                    let made: api::CreateContainerResponse =
                        client.call("CreateContainer", &req).await?;
                    let mut start = api::StartContainerRequest::new();
                    start.container_id = made.container_id.clone();
                    let _: api::StartContainerResponse =
                        client.call("StartContainer", &start).await?;
                    println!("container {name} {}", made.container_id);
                }
            }
            CriCmd::Stop { container } => {
                let mut req = api::StopContainerRequest::new();
                req.container_id = container;
                let _: api::StopContainerResponse = client.call("StopContainer", &req).await?;
            }
            CriCmd::Down { pod } => {
                let mut stop = api::StopPodSandboxRequest::new();
                stop.pod_sandbox_id = pod.clone();
                let _: api::StopPodSandboxResponse = client.call("StopPodSandbox", &stop).await?;
                let mut rm = api::RemovePodSandboxRequest::new();
                rm.pod_sandbox_id = pod;
                let _: api::RemovePodSandboxResponse = client.call("RemovePodSandbox", &rm).await?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup_parent_is_the_kubelets() {
        assert_eq!(
            cgroup_parent("burstable", "1a-2b").unwrap(),
            "kubepods-burstable-pod1a_2b.slice"
        );
        assert_eq!(
            cgroup_parent("guaranteed", "x").unwrap(),
            "kubepods-podx.slice"
        );
        assert!(cgroup_parent("gold", "x").is_err());
    }

    #[test]
    fn a_grpc_message_is_framed_and_read_back() {
        let f = grpc_frame(b"abc");
        assert_eq!(f, [0, 0, 0, 0, 3, b'a', b'b', b'c']);
        assert_eq!(grpc_unframe(&f).unwrap(), b"abc");
        assert!(grpc_unframe(&f[..6]).is_err());
        assert!(grpc_unframe(&[1, 0, 0, 0, 0]).is_err());
    }
}
