//! softpart's pure logic, testable without a kernel: CPU lists, partitions,
//! guest topology specs, the run-delay histogram layout and small statistics.

pub mod balance;
pub mod build_info;
pub mod config;
pub mod config_report;
pub mod control;
pub mod cpulist;
pub mod events;
pub mod hist;
pub mod home_contract;
pub mod layout;
pub mod limits;
pub mod logger;
pub mod memory_follow;
pub mod memory_home;
pub mod memstat;
pub mod metrics_http;
pub mod numa_maps;
pub mod overfull;
pub mod partition;
pub mod pending;
pub mod placement;
pub mod shares;
pub mod softness;
pub mod stats;
pub mod topo;
