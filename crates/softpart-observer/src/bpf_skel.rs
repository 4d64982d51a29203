include!(concat!(env!("OUT_DIR"), "/observer_skel.rs"));
