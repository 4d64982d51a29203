//! softpart's NRI plugin: what it reads from pods and containers, and how
//! it talks to containerd and to scx_softpart.

pub mod annotations;
pub mod cgroup_path;
pub mod config;
pub mod metrics;
pub mod mux;
pub mod plugin;
pub mod proto;
pub mod softpart;
pub mod wanted;
