//! The plugin as containerd sees it: it registers, subscribes to the pod
//! and container events it needs, and answers each at once with no change
//! to the container. What the events say goes into the node's model
//! (wanted.rs); a worker makes scx_softpart's homes match it, apart from
//! the requests, so that neither a slow nor a stopped scheduler can delay
//! or fail a container's creation.

use crate::mux;
use crate::proto::api::{self, Event};
use crate::proto::api_ttrpc;
use crate::softpart::{self, CallError};
use crate::wanted::{self, Action, Node};
use async_trait::async_trait;
use futures::StreamExt as _;
use log::{info, warn};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use ttrpc::r#async::TtrpcContext;

/// How often the worker compares scx_softpart's homes with the wanted
/// ones when nothing happened: what brings homes back after scx_softpart
/// restarted, or gives those that waited for it.
pub const RECHECK: Duration = Duration::from_secs(5);

/// The events the plugin takes: a pod's start and removal, a container's
/// start (its cgroup exists then), stop and removal.
pub fn events() -> i32 {
    [
        Event::RUN_POD_SANDBOX,
        Event::REMOVE_POD_SANDBOX,
        Event::START_CONTAINER,
        Event::STOP_CONTAINER,
        Event::REMOVE_CONTAINER,
    ]
    .iter()
    .fold(0, |m, e| m | (1 << (*e as i32 - 1)))
}

/// The field of a newer NRI's SynchronizeRequest (`more`) saying that
/// more pods and containers follow in another call, and of its response
/// saying that the plugin takes them so: not in NRI 0.6.1's proto, read
/// and written as unknown fields.
const SYNC_MORE: u32 = 3;
const SYNC_RESPONSE_MORE: u32 = 2;

/// What the NRI service and the worker share.
pub struct Shared {
    pub node: Mutex<Node>,
    pub changed: Notify,
    /// The model holds what containerd said in a whole Synchronize since
    /// the plugin (re)connected: until then the worker changes nothing
    /// (an empty model would clear every home the plugin gave).
    pub synced: std::sync::atomic::AtomicBool,
    /// A Synchronize split over several calls is under way.
    syncing: std::sync::atomic::AtomicBool,
    /// scx_softpart answered the worker's last pass.
    pub softpart_up: std::sync::atomic::AtomicBool,
    pub metrics: crate::metrics::Metrics,
}

impl Shared {
    pub fn new(node: Node) -> Arc<Shared> {
        Arc::new(Shared {
            node: Mutex::new(node),
            changed: Notify::new(),
            synced: Default::default(),
            syncing: Default::default(),
            softpart_up: Default::default(),
            metrics: Default::default(),
        })
    }

    fn pod_seen(&self, pod: &api::PodSandbox) {
        let parent = pod
            .linux
            .as_ref()
            .map(|l| l.cgroup_parent.clone())
            .unwrap_or_default();
        let ignored = self.node.lock().unwrap().add_pod(
            &pod.id,
            &pod.namespace,
            &pod.name,
            &parent,
            &pod.annotations,
        );
        for i in &ignored {
            // One line per annotation: the pod, the annotation, the reason.
            warn!(
                "pod {}: annotation {}={:?} ignored: {}",
                i.pod, i.key, i.value, i.reason
            );
            self.metrics.ignored(i.kind);
        }
    }

    fn container_seen(&self, c: &api::Container) {
        let path = c
            .linux
            .as_ref()
            .map(|l| l.cgroups_path.clone())
            .unwrap_or_default();
        self.node
            .lock()
            .unwrap()
            .add_container(&c.id, &c.pod_sandbox_id, &c.name, &path);
    }
}

/// The Plugin service containerd calls.
pub struct Service {
    pub shared: Arc<Shared>,
}

#[async_trait]
impl api_ttrpc::Plugin for Service {
    async fn configure(
        &self,
        _ctx: &TtrpcContext,
        req: api::ConfigureRequest,
    ) -> ttrpc::Result<api::ConfigureResponse> {
        info!("configured by {} {}", req.runtime_name, req.runtime_version);
        Ok(api::ConfigureResponse {
            events: events(),
            ..Default::default()
        })
    }

    async fn synchronize(
        &self,
        _ctx: &TtrpcContext,
        req: api::SynchronizeRequest,
    ) -> ttrpc::Result<api::SynchronizeResponse> {
        use protobuf::UnknownValueRef;
        use std::sync::atomic::Ordering::Relaxed;
        let more = matches!(
            req.special_fields.unknown_fields().get(SYNC_MORE),
            Some(UnknownValueRef::Varint(v)) if v != 0
        );
        // The first call of a Synchronize starts the model again; the
        // calls that follow a `more` add to it.
        if !self.shared.syncing.swap(more, Relaxed) {
            let mut node = self.shared.node.lock().unwrap();
            node.pods.clear();
            node.containers.clear();
        }
        for p in &req.pods {
            self.shared.pod_seen(p);
        }
        for c in &req.containers {
            if matches!(
                c.state.enum_value(),
                Ok(api::ContainerState::CONTAINER_CREATED | api::ContainerState::CONTAINER_RUNNING)
            ) {
                self.shared.container_seen(c);
            }
        }
        let mut resp = api::SynchronizeResponse::default();
        if more {
            resp.special_fields
                .mut_unknown_fields()
                .add_varint(SYNC_RESPONSE_MORE, 1);
            return Ok(resp);
        }
        let (pods, containers) = {
            let node = self.shared.node.lock().unwrap();
            (node.pods.len(), node.containers.len())
        };
        info!("synchronized: {pods} pod(s), {containers} container(s) created or running");
        self.shared.synced.store(true, Relaxed);
        self.shared.changed.notify_one();
        Ok(resp)
    }

    async fn shutdown(&self, _ctx: &TtrpcContext, _: api::Empty) -> ttrpc::Result<api::Empty> {
        info!("containerd is shutting down");
        Ok(api::Empty::default())
    }

    async fn create_container(
        &self,
        _ctx: &TtrpcContext,
        _: api::CreateContainerRequest,
    ) -> ttrpc::Result<api::CreateContainerResponse> {
        Ok(api::CreateContainerResponse::default())
    }

    async fn update_container(
        &self,
        _ctx: &TtrpcContext,
        _: api::UpdateContainerRequest,
    ) -> ttrpc::Result<api::UpdateContainerResponse> {
        Ok(api::UpdateContainerResponse::default())
    }

    async fn stop_container(
        &self,
        _ctx: &TtrpcContext,
        req: api::StopContainerRequest,
    ) -> ttrpc::Result<api::StopContainerResponse> {
        if let Some(c) = req.container.as_ref() {
            self.shared.node.lock().unwrap().remove_container(&c.id);
            self.shared.changed.notify_one();
        }
        Ok(api::StopContainerResponse::default())
    }

    async fn state_change(
        &self,
        _ctx: &TtrpcContext,
        ev: api::StateChangeEvent,
    ) -> ttrpc::Result<api::Empty> {
        match ev.event.enum_value() {
            Ok(Event::RUN_POD_SANDBOX) => {
                if let Some(p) = ev.pod.as_ref() {
                    self.shared.pod_seen(p);
                }
            }
            Ok(Event::REMOVE_POD_SANDBOX) => {
                if let Some(p) = ev.pod.as_ref() {
                    self.shared.node.lock().unwrap().remove_pod(&p.id);
                }
            }
            Ok(Event::START_CONTAINER) => {
                if let (Some(p), Some(c)) = (ev.pod.as_ref(), ev.container.as_ref()) {
                    // A pod seen before the plugin connected, and not yet
                    // listed by Synchronize, is known from its container.
                    let known = self.shared.node.lock().unwrap().pods.contains_key(&p.id);
                    if !known {
                        self.shared.pod_seen(p);
                    }
                    self.shared.container_seen(c);
                }
            }
            Ok(Event::STOP_CONTAINER | Event::REMOVE_CONTAINER) => {
                if let Some(c) = ev.container.as_ref() {
                    self.shared.node.lock().unwrap().remove_container(&c.id);
                }
            }
            _ => return Ok(api::Empty::default()),
        }
        self.shared.changed.notify_one();
        Ok(api::Empty::default())
    }
}

/// Makes scx_softpart's homes match the wanted ones, when something
/// changed and every `RECHECK`. A refusal is logged once per cgroup and
/// reason; scx_softpart down is logged once until it answers again.
pub async fn worker(shared: Arc<Shared>, socket: PathBuf) {
    let mut said: BTreeMap<String, String> = BTreeMap::new();
    let mut down_said = false;
    loop {
        if !shared.synced.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = tokio::time::timeout(RECHECK, shared.changed.notified()).await;
            continue;
        }
        let wanted = shared.node.lock().unwrap().wanted();
        let sock = socket.clone();
        let done = tokio::task::spawn_blocking(move || apply(&sock, &wanted)).await;
        match done {
            Ok(Ok(refusals)) => {
                shared
                    .softpart_up
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                if down_said {
                    info!("scx_softpart answers again on {}", socket.display());
                    down_said = false;
                }
                said.retain(|cg, _| refusals.contains_key(cg));
                for (cg, why) in refusals {
                    if said.get(&cg) != Some(&why) {
                        warn!("cgroup {cg}: scx_softpart refused its home: {why}");
                        shared.metrics.refused.inc();
                        said.insert(cg, why);
                    }
                }
            }
            Ok(Err(e)) => {
                shared
                    .softpart_up
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                if !down_said {
                    warn!("scx_softpart does not answer ({e}): homes wait for it");
                    down_said = true;
                }
            }
            Err(e) => warn!("the worker's call panicked: {e}"),
        }
        let _ = tokio::time::timeout(RECHECK, shared.changed.notified()).await;
    }
}

/// One pass: list, compare, change. The refusals by cgroup; Err when
/// scx_softpart is down.
fn apply(
    socket: &std::path::Path,
    wanted: &BTreeMap<String, wanted::Wanted>,
) -> Result<BTreeMap<String, String>, CallError> {
    let listed = softpart::list(socket)?;
    let mut refusals = BTreeMap::new();
    for action in wanted::reconcile(wanted, &listed) {
        let cgroup = match &action {
            Action::Give { cgroup, .. } | Action::Clear { cgroup } => cgroup.clone(),
        };
        match softpart::call(socket, &softpart::request(&action)) {
            Ok(_) => match &action {
                Action::Give { wanted, .. } => {
                    info!("cgroup {cgroup}: home from {}", wanted.origin)
                }
                Action::Clear { .. } => {
                    info!("cgroup {cgroup}: home cleared, its pod or container is gone")
                }
            },
            Err(CallError::Refused(why)) => {
                // Named by what asked for it: the pod, the annotation's value.
                let why = match &action {
                    Action::Give { wanted, .. } => format!("{} ({})", why, wanted.origin),
                    Action::Clear { .. } => why,
                };
                refusals.insert(cgroup, why);
            }
            Err(e @ CallError::Down(_)) => return Err(e),
        }
    }
    Ok(refusals)
}

/// Registers with containerd on `socket` and serves it until containerd
/// closes the connection.
pub async fn serve(
    socket: tokio::net::UnixStream,
    shared: Arc<Shared>,
    name: &str,
    index: &str,
) -> anyhow::Result<()> {
    use anyhow::Context;
    // What the model holds is what an earlier connection said: nothing is
    // changed until this one's Synchronize.
    shared
        .synced
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let split = mux::split(socket);
    let service = Arc::new(Service { shared }) as Arc<dyn api_ttrpc::Plugin + Send + Sync>;
    let listener = ttrpc::r#async::transport::Listener::new(
        futures::stream::once(std::future::ready(Ok(split.plugin)))
            .chain(futures::stream::pending()),
    );
    let mut server = ttrpc::r#async::Server::new()
        .register_service(api_ttrpc::create_plugin(service))
        .add_listener(listener);
    server
        .start()
        .await
        .context("serving the plugin's connection")?;
    let client = api_ttrpc::RuntimeClient::new(ttrpc::r#async::Client::new(
        ttrpc::r#async::transport::Socket::new(split.runtime),
    ));
    let req = api::RegisterPluginRequest {
        plugin_name: name.to_string(),
        plugin_idx: index.to_string(),
        ..Default::default()
    };
    client
        .register_plugin(ttrpc::context::with_timeout(2_000_000_000), &req)
        .await
        .context("registering with containerd")?;
    info!("registered with containerd as {index}-{name}");
    let end = split.task.await;
    let _ = server.shutdown().await;
    match end {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e).context("the connection to containerd"),
        Err(e) => Err(anyhow::anyhow!("the connection's task: {e}")),
    }
}
