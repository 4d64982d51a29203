//! The plugin against a runtime that speaks NRI as containerd does, over
//! a socket pair: the bytes of its registration, then registration,
//! configuration, synchronization and events through the real ttrpc
//! stack, and the homes it then gives through a fake control socket.

use async_trait::async_trait;
use softpart_core::control::{HomeView, Request, Response};
use softpart_nri::mux;
use softpart_nri::plugin::{self, Shared};
use softpart_nri::proto::{api, api_ttrpc};
use softpart_nri::wanted::{Allowed, Node};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use ttrpc::r#async::TtrpcContext;

/// A protobuf field: key, then a length-delimited value.
fn field(num: u8, bytes: &[u8]) -> Vec<u8> {
    let mut v = vec![(num << 3) | 2, bytes.len() as u8];
    v.extend_from_slice(bytes);
    v
}

/// The first frame the plugin writes is its registration, on the runtime
/// connection (2): a ttrpc request (10-byte header: length, stream 1,
/// type 1) for nri.pkg.api.v1alpha1.Runtime/RegisterPlugin carrying the
/// plugin's name and index, with its 2 s timeout.
#[tokio::test]
async fn the_registration_is_the_bytes_containerd_expects() {
    let (ours, mut theirs) = tokio::net::UnixStream::pair().unwrap();
    let shared = Shared::new(Node::new(Allowed::All));
    tokio::spawn(async move { plugin::serve(ours, shared, "softpart", "90").await });
    let mut h = [0u8; mux::HEADER_LEN];
    theirs.read_exact(&mut h).await.unwrap();
    let (conn, len) = mux::header(&h).unwrap();
    assert_eq!(conn, mux::RUNTIME_CONN);
    let mut payload = vec![0u8; len];
    theirs.read_exact(&mut payload).await.unwrap();

    let mut reg = field(1, b"softpart");
    reg.extend(field(2, b"90"));
    let mut req = field(1, b"nri.pkg.api.v1alpha1.Runtime");
    req.extend(field(2, b"RegisterPlugin"));
    req.extend(field(3, &reg));
    // timeout_nano = 2,000,000,000 as a varint.
    req.extend([0x20, 0x80, 0xa8, 0xd6, 0xb9, 0x07]);
    let mut want = (req.len() as u32).to_be_bytes().to_vec();
    want.extend(1u32.to_be_bytes());
    want.extend([1, 0]);
    want.extend(&req);
    assert_eq!(payload, want);
}

struct FakeRuntime {
    registered: mpsc::UnboundedSender<(String, String)>,
}

#[async_trait]
impl api_ttrpc::Runtime for FakeRuntime {
    async fn register_plugin(
        &self,
        _ctx: &TtrpcContext,
        req: api::RegisterPluginRequest,
    ) -> ttrpc::Result<api::Empty> {
        let _ = self.registered.send((req.plugin_name, req.plugin_idx));
        Ok(api::Empty::default())
    }
}

fn pod(id: &str, ns: &str, name: &str, uid: &str, annotations: &[(&str, &str)]) -> api::PodSandbox {
    let mut linux = api::LinuxPodSandbox::new();
    linux.cgroup_parent = format!("kubepods-burstable-pod{uid}.slice");
    api::PodSandbox {
        id: id.into(),
        name: name.into(),
        namespace: ns.into(),
        uid: uid.into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<HashMap<_, _>>(),
        linux: Some(linux).into(),
        ..Default::default()
    }
}

fn container(
    id: &str,
    pod: &str,
    uid: &str,
    name: &str,
    state: api::ContainerState,
) -> api::Container {
    let mut linux = api::LinuxContainer::new();
    linux.cgroups_path = format!("kubepods-burstable-pod{uid}.slice:cri-containerd:{id}");
    api::Container {
        id: id.into(),
        pod_sandbox_id: pod.into(),
        name: name.into(),
        state: state.into(),
        linux: Some(linux).into(),
        ..Default::default()
    }
}

fn pod_cg(uid: &str) -> String {
    format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice")
}

/// A control socket that lists what it was given and records requests.
fn fake_softpart(
    dir: &std::path::Path,
    initial: Vec<HomeView>,
) -> (std::path::PathBuf, Arc<Mutex<Vec<Request>>>) {
    let path = dir.join("control.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        let mut homes: Vec<HomeView> = initial;
        for s in listener.incoming() {
            let mut s = s.unwrap();
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).unwrap();
            let req: Request = serde_json::from_str(&line).unwrap();
            let resp = match &req {
                Request::List => Response::Homes {
                    homes: homes.clone(),
                },
                Request::Prefer {
                    target: softpart_core::control::Target::Cgroup(cg),
                    origin,
                    ..
                } => {
                    homes.retain(|h| &h.target != cg);
                    homes.push(HomeView {
                        kind: "cgroup".into(),
                        target: cg.clone(),
                        cpus: "4-7".into(),
                        softness: None,
                        source: origin.clone().unwrap_or_default(),
                    });
                    Response::Ok {
                        message: "ok".into(),
                    }
                }
                Request::Clear {
                    target: softpart_core::control::Target::Cgroup(cg),
                } => {
                    homes.retain(|h| &h.target != cg);
                    Response::Ok {
                        message: "ok".into(),
                    }
                }
                _ => Response::Error {
                    message: "not here".into(),
                },
            };
            if !matches!(req, Request::List) {
                seen2.lock().unwrap().push(req);
            }
            writeln!(s, "{}", serde_json::to_string(&resp).unwrap()).unwrap();
        }
    });
    (path, seen)
}

async fn eventually(what: &str, mut ok: impl FnMut() -> bool) {
    for _ in 0..100 {
        if ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("not within 2 s: {what}");
}

/// containerd's side of a socket pair the plugin serves: it serves
/// Runtime on connection 2 and calls Plugin on 1; returns the Plugin
/// client once the plugin registered.
async fn fake_runtime(
    theirs: tokio::net::UnixStream,
) -> (api_ttrpc::PluginClient, ttrpc::r#async::Server) {
    let split = mux::split(theirs);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let rt = Arc::new(FakeRuntime { registered: tx }) as Arc<dyn api_ttrpc::Runtime + Send + Sync>;
    let listener = ttrpc::r#async::transport::Listener::new(futures::StreamExt::chain(
        futures::stream::once(std::future::ready(Ok(split.runtime))),
        futures::stream::pending(),
    ));
    let mut server = ttrpc::r#async::Server::new()
        .register_service(api_ttrpc::create_runtime(rt))
        .add_listener(listener);
    server.start().await.unwrap();
    let client = api_ttrpc::PluginClient::new(ttrpc::r#async::Client::new(
        ttrpc::r#async::transport::Socket::new(split.plugin),
    ));
    tokio::time::timeout(Duration::from_secs(2), rx.recv())
        .await
        .unwrap()
        .unwrap();
    (client, server)
}

fn ctx() -> ttrpc::context::Context {
    ttrpc::context::with_timeout(2_000_000_000)
}

/// Until containerd's Synchronize the plugin's model is empty: the homes
/// it gave before its restart stay untouched, and once synchronized the
/// running pod's home is neither cleared nor given again. A newer NRI's
/// Synchronize split in two calls (`more`, unknown to NRI 0.6.1's proto)
/// is taken whole: the first call is answered `more`, and the pod of the
/// first call keeps its home after the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_changes_before_synchronize_and_a_split_synchronize_is_taken_whole() {
    let dir = std::env::temp_dir().join(format!("softpart-nri-sync-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let given = HomeView {
        kind: "cgroup".into(),
        target: pod_cg("u1"),
        cpus: "4-7".into(),
        softness: None,
        source: "kubernetes db/pg-0 node=1".into(),
    };
    let (control, seen) = fake_softpart(&dir, vec![given]);
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    let shared = Shared::new(Node::new(Allowed::All));
    tokio::spawn(plugin::worker(shared.clone(), control));
    let plugin_shared = shared.clone();
    tokio::spawn(async move { plugin::serve(ours, plugin_shared, "softpart", "90").await });
    let (client, _server) = fake_runtime(theirs).await;
    client
        .configure(ctx(), &api::ConfigureRequest::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );

    let mut first = api::SynchronizeRequest {
        pods: vec![pod(
            "p1",
            "db",
            "pg-0",
            "u1",
            &[("home.softpart.io/pod", "node=1")],
        )],
        ..Default::default()
    };
    first.special_fields.mut_unknown_fields().add_varint(3, 1);
    let resp = client.synchronize(ctx(), &first).await.unwrap();
    assert!(matches!(
        resp.special_fields.unknown_fields().get(2),
        Some(protobuf::UnknownValueRef::Varint(1))
    ));
    assert!(!shared.synced.load(std::sync::atomic::Ordering::Relaxed));
    let second = api::SynchronizeRequest {
        containers: vec![container(
            "c1",
            "p1",
            "u1",
            "pg",
            api::ContainerState::CONTAINER_RUNNING,
        )],
        ..Default::default()
    };
    let resp = client.synchronize(ctx(), &second).await.unwrap();
    assert!(resp.special_fields.unknown_fields().get(2).is_none());
    eventually("synchronized", || {
        shared.synced.load(std::sync::atomic::Ordering::Relaxed)
    })
    .await;
    assert_eq!(shared.node.lock().unwrap().wanted().len(), 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Registration, Configure (the events subscribed), Synchronize (only
/// the allowed namespace's annotated pod and its running container count),
/// then a new pod's start and its container's stop and the pod's removal;
/// the worker gives and clears the homes through the control socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_registers_the_plugin_synchronizes_it_and_the_homes_follow_the_events() {
    let dir = std::env::temp_dir().join(format!("softpart-nri-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (control, seen) = fake_softpart(&dir, Vec::new());

    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    let shared = Shared::new(Node::new(Allowed::Only(["db".to_string()].into())));
    tokio::spawn(plugin::worker(shared.clone(), control));
    let plugin_shared = shared.clone();
    tokio::spawn(async move { plugin::serve(ours, plugin_shared, "softpart", "90").await });

    let (client, _server) = fake_runtime(theirs).await;

    let conf = client
        .configure(ctx(), &api::ConfigureRequest::default())
        .await
        .unwrap();
    let want_events = [1, 3, 6, 10, 11].iter().fold(0, |m, e| m | (1 << (e - 1)));
    assert_eq!(conf.events, want_events);

    let sync = api::SynchronizeRequest {
        pods: vec![
            pod(
                "p1",
                "db",
                "pg-0",
                "u1",
                &[("home.softpart.io/pod", "node=1")],
            ),
            pod(
                "p2",
                "web",
                "front",
                "u2",
                &[("home.softpart.io/pod", "node=0")],
            ),
        ],
        containers: vec![
            container(
                "c1",
                "p1",
                "u1",
                "pg",
                api::ContainerState::CONTAINER_RUNNING,
            ),
            container(
                "c2",
                "p2",
                "u2",
                "nginx",
                api::ContainerState::CONTAINER_RUNNING,
            ),
        ],
        ..Default::default()
    };
    client.synchronize(ctx(), &sync).await.unwrap();
    let scrape = softpart_nri::metrics::render(&shared).unwrap();
    assert!(
        scrape.contains("softpart_nri_annotations_ignored_total{reason=\"namespace\"} 1"),
        "{scrape}"
    );
    eventually("pg-0's home given", || {
        seen.lock().unwrap().iter().any(|r| {
            matches!(r, Request::Prefer { target: softpart_core::control::Target::Cgroup(cg), origin: Some(o), .. }
                if *cg == pod_cg("u1") && o == "kubernetes db/pg-0 node=1")
        })
    })
    .await;

    // A new pod whose container has a home of its own.
    let p3 = pod(
        "p3",
        "db",
        "pg-1",
        "u3",
        &[("home.softpart.io/container.pg", "cpus=2-3")],
    );
    let c3 = container(
        "c3",
        "p3",
        "u3",
        "pg",
        api::ContainerState::CONTAINER_RUNNING,
    );
    let ev = |event: api::Event, pod: &api::PodSandbox, c: Option<&api::Container>| {
        api::StateChangeEvent {
            event: event.into(),
            pod: Some(pod.clone()).into(),
            container: c.cloned().into(),
            ..Default::default()
        }
    };
    client
        .state_change(ctx(), &ev(api::Event::RUN_POD_SANDBOX, &p3, None))
        .await
        .unwrap();
    client
        .state_change(ctx(), &ev(api::Event::START_CONTAINER, &p3, Some(&c3)))
        .await
        .unwrap();
    let c3_cg = format!("{}/cri-containerd-c3.scope", pod_cg("u3"));
    let c3_cg2 = c3_cg.clone();
    eventually("pg-1's container homed", || {
        seen.lock().unwrap().iter().any(|r| {
            matches!(r, Request::Prefer { target: softpart_core::control::Target::Cgroup(cg), origin: Some(o), .. }
                if *cg == c3_cg2 && o == "kubernetes db/pg-1/pg cpus=2-3")
        })
    })
    .await;
    // It stops: its home is cleared.
    let stop = api::StopContainerRequest {
        pod: Some(p3.clone()).into(),
        container: Some(c3.clone()).into(),
        ..Default::default()
    };
    client.stop_container(ctx(), &stop).await.unwrap();
    eventually("pg-1's container home cleared", || {
        seen.lock().unwrap().iter().any(|r| {
            matches!(r, Request::Clear { target: softpart_core::control::Target::Cgroup(cg) } if *cg == c3_cg)
        })
    })
    .await;
    // pg-0's pod is removed: its home goes too.
    client
        .state_change(
            ctx(),
            &ev(api::Event::REMOVE_POD_SANDBOX, &sync.pods[0], None),
        )
        .await
        .unwrap();
    eventually("pg-0's home cleared", || {
        seen.lock().unwrap().iter().any(|r| {
            matches!(r, Request::Clear { target: softpart_core::control::Target::Cgroup(cg) } if *cg == pod_cg("u1"))
        })
    })
    .await;
    // Nothing was ever asked for the namespace not allowed.
    assert!(
        !seen
            .lock()
            .unwrap()
            .iter()
            .any(|r| format!("{r:?}").contains("u2"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}
