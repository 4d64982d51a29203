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
use softpart_core::metrics_http::Scrape;
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

/// Serves `GET /metrics` on `addr`.
pub fn serve(addr: &str, shared: Arc<Shared>) -> Result<()> {
    softpart_core::metrics_http::serve(addr, move || match render(&shared) {
        Ok(t) => Scrape::Text(t),
        Err(e) => Scrape::Failed(format!("{e:#}")),
    })?;
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
