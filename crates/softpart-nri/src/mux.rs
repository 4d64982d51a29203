//! NRI's socket multiplexer: one unix socket to containerd carries two
//! ttrpc connections, the plugin's service (containerd calls it) and the
//! runtime's (the plugin calls it). Each frame is an 8-byte header, the
//! connection's id and the payload's length (both big-endian u32), then
//! the payload: a piece of that connection's byte stream.

use std::io;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The connection on which containerd calls the plugin.
pub const PLUGIN_CONN: u32 = 1;
/// The connection on which the plugin calls containerd.
pub const RUNTIME_CONN: u32 = 2;
/// A frame's header: connection id, payload length.
pub const HEADER_LEN: usize = 8;
/// The largest payload the multiplexer accepts, as containerd's.
pub const MAX_PAYLOAD: usize = 1 << 24;
/// How much of a connection's stream goes into one frame; what is
/// buffered between the socket and a connection.
const CHUNK: usize = 64 << 10;

/// One frame as it goes on the socket.
pub fn frame(conn: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&conn.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A frame's connection id and payload length, refused when the payload
/// is larger than `MAX_PAYLOAD` (the stream is then out of step).
pub fn header(h: &[u8; HEADER_LEN]) -> io::Result<(u32, usize)> {
    let conn = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    let len = u32::from_be_bytes([h[4], h[5], h[6], h[7]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("NRI frame of {len} bytes on connection {conn}: more than {MAX_PAYLOAD}"),
        ));
    }
    Ok((conn, len))
}

/// The two connections of a socket, and the task that carries them: it
/// ends with the socket (an error, or containerd closing it), and the
/// connections then read end-of-file.
pub struct Split {
    pub plugin: DuplexStream,
    pub runtime: DuplexStream,
    pub task: JoinHandle<io::Result<()>>,
}

/// Splits the socket into its two connections.
pub fn split<S>(socket: S) -> Split
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut sock_r, mut sock_w) = tokio::io::split(socket);
    let (plugin, plugin_far) = tokio::io::duplex(CHUNK);
    let (runtime, runtime_far) = tokio::io::duplex(CHUNK);
    let (plugin_r, mut plugin_w) = tokio::io::split(plugin_far);
    let (runtime_r, mut runtime_w) = tokio::io::split(runtime_far);
    let (tx, mut rx) = mpsc::channel::<(u32, Vec<u8>)>(16);
    let task = tokio::spawn(async move {
        let outgoing = async {
            while let Some((conn, payload)) = rx.recv().await {
                sock_w.write_all(&frame(conn, &payload)).await?;
            }
            sock_w.flush().await
        };
        let incoming = async {
            let mut h = [0u8; HEADER_LEN];
            loop {
                match sock_r.read_exact(&mut h).await {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
                let (conn, len) = header(&h)?;
                let mut payload = vec![0u8; len];
                sock_r.read_exact(&mut payload).await?;
                // A connection this side never opens: its frames are
                // dropped, as containerd drops frames of unknown ids.
                let w = match conn {
                    PLUGIN_CONN => &mut plugin_w,
                    RUNTIME_CONN => &mut runtime_w,
                    _ => continue,
                };
                w.write_all(&payload).await?;
            }
            Ok::<(), io::Error>(())
        };
        let res = tokio::select! {
            r = incoming => r,
            r = outgoing => r,
            r = pump(PLUGIN_CONN, plugin_r, tx.clone()) => r,
            r = pump(RUNTIME_CONN, runtime_r, tx.clone()) => r,
        };
        // The socket is done: the connections read end-of-file.
        let _ = plugin_w.shutdown().await;
        let _ = runtime_w.shutdown().await;
        res
    });
    Split {
        plugin,
        runtime,
        task,
    }
}

/// Carries what one connection writes to the socket, a frame per read.
async fn pump<R: AsyncRead + Unpin>(
    conn: u32,
    mut r: R,
    tx: mpsc::Sender<(u32, Vec<u8>)>,
) -> io::Result<()> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            // This side closed the connection; the socket stays for the
            // other one.
            return std::future::pending().await;
        }
        if tx.send((conn, buf[..n].to_vec())).await.is_err() {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_its_connection_its_length_then_its_bytes_big_endian() {
        assert_eq!(
            frame(RUNTIME_CONN, b"abc"),
            [0, 0, 0, 2, 0, 0, 0, 3, b'a', b'b', b'c']
        );
        assert_eq!(header(&[0, 0, 0, 1, 0, 0, 1, 0]).unwrap(), (1, 256));
    }

    #[test]
    fn a_payload_over_the_limit_is_refused() {
        let over = ((MAX_PAYLOAD + 1) as u32).to_be_bytes();
        let h = [0, 0, 0, 1, over[0], over[1], over[2], over[3]];
        let e = header(&h).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("on connection 1"), "{e}");
    }

    #[tokio::test]
    async fn each_connection_gets_its_own_frames_and_writes_its_own() {
        let (near, mut far) = tokio::io::duplex(1 << 16);
        let mut s = split(near);
        // containerd's side: a frame for each connection, one for an id
        // nobody opened, in one write.
        let mut bytes = frame(RUNTIME_CONN, b"to runtime");
        bytes.extend(frame(7, b"dropped"));
        bytes.extend(frame(PLUGIN_CONN, b"to plugin"));
        far.write_all(&bytes).await.unwrap();
        let mut got = [0u8; 9];
        s.plugin.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"to plugin");
        let mut got = [0u8; 10];
        s.runtime.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"to runtime");
        // The plugin's side writes on its connection.
        s.plugin.write_all(b"answer").await.unwrap();
        let mut got = [0u8; HEADER_LEN + 6];
        far.read_exact(&mut got).await.unwrap();
        assert_eq!(got.to_vec(), frame(PLUGIN_CONN, b"answer"));
        // containerd closes: both connections read end-of-file.
        drop(far);
        let mut rest = Vec::new();
        s.runtime.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        s.task.await.unwrap().unwrap();
    }
}
