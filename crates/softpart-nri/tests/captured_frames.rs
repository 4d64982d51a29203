//! The plugin against frames captured from a real containerd (1.7.24,
//! tests/frames/): it sends the registration containerd received, byte
//! for byte, and, given containerd's Configure and Synchronize requests
//! as they came, answers with the bytes containerd accepted.

use softpart_nri::mux;
use softpart_nri::plugin::{self, Shared};
use softpart_nri::wanted::{Allowed, Node};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn frames() -> Vec<(bool, Vec<u8>)> {
    include_str!("frames/containerd-1.7.24.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (dir, hex) = l.split_once(' ').unwrap();
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (dir == "plugin->containerd", bytes)
        })
        .collect()
}

async fn read_frame(s: &mut tokio::net::UnixStream) -> Vec<u8> {
    let mut h = [0u8; mux::HEADER_LEN];
    s.read_exact(&mut h).await.unwrap();
    let (_, len) = mux::header(&h).unwrap();
    let mut out = h.to_vec();
    out.resize(mux::HEADER_LEN + len, 0);
    s.read_exact(&mut out[mux::HEADER_LEN..]).await.unwrap();
    out
}

#[tokio::test]
async fn the_plugin_speaks_what_containerd_1_7_sent_and_accepted() {
    let (ours, mut theirs) = tokio::net::UnixStream::pair().unwrap();
    let shared = Shared::new(Node::new(Allowed::All));
    tokio::spawn(async move { plugin::serve(ours, shared, "softpart", "90").await });
    let frames = frames();
    assert_eq!(frames.len(), 6);
    for (i, (from_plugin, bytes)) in frames.iter().enumerate() {
        if *from_plugin {
            let got = read_frame(&mut theirs).await;
            assert_eq!(
                &got, bytes,
                "frame {i}: the plugin's differs from the captured one"
            );
        } else {
            theirs.write_all(bytes).await.unwrap();
        }
    }
}
