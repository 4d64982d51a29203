//! The daemons' `--metrics ADDR` endpoint (scx_softpart, softpart-nri):
//! `GET /metrics` answered from a thread of its own with what `render`
//! gives, as OpenMetrics text; anything else is a 404.

use std::io;

/// What a scrape gets: the text, an error (500), or no answer from the
/// daemon in time (503, with the reason).
pub enum Scrape {
    Text(String),
    Failed(String),
    Unavailable(String),
}

/// Binds `addr` (an error names it) and serves from a thread named
/// "metrics" until the process ends.
pub fn serve<F>(addr: &str, render: F) -> io::Result<()>
where
    F: Fn() -> Scrape + Send + 'static,
{
    let server = tiny_http::Server::http(addr)
        .map_err(|e| io::Error::other(format!("--metrics {addr}: {e}")))?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for req in server.incoming_requests() {
                let resp = if req.url() != "/metrics" {
                    tiny_http::Response::from_string("not found: try /metrics\n")
                        .with_status_code(404)
                } else {
                    match render() {
                        Scrape::Text(t) => tiny_http::Response::from_string(t).with_header(
                            "Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8"
                                .parse::<tiny_http::Header>()
                                .expect("a valid header"),
                        ),
                        Scrape::Failed(e) => {
                            tiny_http::Response::from_string(format!("{e}\n")).with_status_code(500)
                        }
                        Scrape::Unavailable(why) => {
                            tiny_http::Response::from_string(format!("{why}\n")).with_status_code(503)
                        }
                    }
                };
                if let Err(e) = req.respond(resp) {
                    log::warn!("metrics: answering a scrape: {e}");
                }
            }
        })?;
    Ok(())
}
