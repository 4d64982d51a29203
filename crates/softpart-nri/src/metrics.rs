//! `--metrics ADDR`: the plugin's counters as OpenMetrics at
//! `http://ADDR/metrics`, named as scx_softpart's are (`softpart_nri_`):
//! annotations that gave nothing by why, homes scx_softpart refused, the
//! homes the plugin wants now, and whether containerd and scx_softpart
//! answer.

use crate::plugin::Shared;
use anyhow::{Context, Result};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

/// What the plugin counts as it goes; the gauges are read at each scrape.
#[derive(Default)]
pub struct Metrics {
    /// By `kind`: malformed, namespace, cgroup.
    pub ignored: Family<Vec<(&'static str, &'static str)>, Counter>,
    pub refused: Counter,
    wanted: Gauge,
    synced: Gauge,
    softpart_up: Gauge,
}

impl Metrics {
    pub fn ignored(&self, kind: &'static str) {
        self.ignored.get_or_create(&vec![("reason", kind)]).inc();
    }
}

fn registry(m: &Metrics) -> Registry {
    let mut r = Registry::with_prefix("softpart_nri");
    r.register(
        "annotations_ignored",
        "softpart annotations that gave no home, by why: malformed, namespace (not allowed), cgroup (a cgroup parent that cannot be read)",
        m.ignored.clone(),
    );
    r.register(
        "homes_refused",
        "Homes scx_softpart refused (outside the pod's cpuset, CPUs it does not have), each cgroup and reason once",
        m.refused.clone(),
    );
    r.register(
        "homes_wanted",
        "Homes the running pods' and containers' annotations ask for",
        m.wanted.clone(),
    );
    r.register(
        "containerd_synchronized",
        "1 while connected to containerd and synchronized with it",
        m.synced.clone(),
    );
    r.register(
        "softpart_answers",
        "1 when scx_softpart answered the worker's last pass",
        m.softpart_up.clone(),
    );
    r
}

/// The text of one scrape.
pub fn render(shared: &Shared) -> Result<String> {
    let m = &shared.metrics;
    m.wanted
        .set(shared.node.lock().unwrap().wanted().len() as i64);
    m.synced.set(i64::from(shared.synced.load(Relaxed)));
    m.softpart_up
        .set(i64::from(shared.softpart_up.load(Relaxed)));
    let mut text = String::new();
    encode(&mut text, &registry(m)).context("encoding the metrics")?;
    Ok(text)
}

/// Serves `GET /metrics` on `addr` from a thread of its own.
pub fn serve(addr: &str, shared: Arc<Shared>) -> Result<()> {
    let server =
        tiny_http::Server::http(addr).map_err(|e| anyhow::anyhow!("--metrics {addr}: {e}"))?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for req in server.incoming_requests() {
                let resp = if req.url() != "/metrics" {
                    tiny_http::Response::from_string("not found: try /metrics\n")
                        .with_status_code(404)
                } else {
                    match render(&shared) {
                        Ok(t) => tiny_http::Response::from_string(t).with_header(
                            "Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8"
                                .parse::<tiny_http::Header>()
                                .expect("a valid header"),
                        ),
                        Err(e) => tiny_http::Response::from_string(format!("{e:#}\n"))
                            .with_status_code(500),
                    }
                };
                let _ = req.respond(resp);
            }
        })
        .context("starting the metrics thread")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wanted::{Allowed, Node};

    #[test]
    fn a_scrape_counts_what_was_ignored_by_why() {
        let shared = Shared::new(Node::new(Allowed::Only(["db".to_string()].into())));
        shared.metrics.ignored("namespace");
        shared.metrics.ignored("namespace");
        shared.metrics.ignored("malformed");
        let t = render(&shared).unwrap();
        assert!(
            t.contains("softpart_nri_annotations_ignored_total{reason=\"namespace\"} 2"),
            "{t}"
        );
        assert!(
            t.contains("softpart_nri_annotations_ignored_total{reason=\"malformed\"} 1"),
            "{t}"
        );
        assert!(t.contains("softpart_nri_containerd_synchronized 0"), "{t}");
        assert!(t.contains("softpart_nri_homes_wanted 0"), "{t}");
        assert!(t.ends_with("# EOF\n"), "{t}");
    }
}
