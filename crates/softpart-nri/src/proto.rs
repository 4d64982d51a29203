//! The NRI API (`nri.pkg.api.v1alpha1` of containerd/nri 0.6.1, the
//! version containerd 1.7 speaks), generated at build time from
//! proto/nri-0.6.1/api.proto.

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
pub mod api {
    include!(concat!(env!("OUT_DIR"), "/api.rs"));
}

#[allow(
    clippy::all,
    clippy::pedantic,
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    unused_imports,
    unused_mut
)]
pub mod api_ttrpc {
    include!(concat!(env!("OUT_DIR"), "/api_ttrpc.rs"));
}
