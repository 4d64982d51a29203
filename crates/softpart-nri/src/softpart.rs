//! scx_softpart's control socket, as the plugin uses it: list the homes,
//! give one, clear one. One JSON request per connection, a JSON answer,
//! every call bounded by a timeout so that a stuck scheduler never holds
//! the plugin.

use crate::wanted::{Action, Want};
use softpart_core::control::{HomeView, Request, Response, Target};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(2);

/// Why a call gave nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// Nobody answers on the socket (not running, or attaching again):
    /// try again later.
    Down(String),
    /// The scheduler answered no, with its reason.
    Refused(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Down(m) | CallError::Refused(m) => f.write_str(m),
        }
    }
}

pub fn call(socket: &Path, req: &Request) -> Result<Response, CallError> {
    let down = |e: std::io::Error| CallError::Down(format!("{}: {e}", socket.display()));
    let mut s = UnixStream::connect(socket).map_err(down)?;
    s.set_read_timeout(Some(TIMEOUT)).map_err(down)?;
    s.set_write_timeout(Some(TIMEOUT)).map_err(down)?;
    let text = serde_json::to_string(req).expect("a request serializes");
    writeln!(s, "{text}").map_err(down)?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).map_err(down)?;
    if line.is_empty() {
        return Err(CallError::Down(format!(
            "{}: closed without an answer",
            socket.display()
        )));
    }
    match serde_json::from_str::<Response>(&line) {
        Ok(Response::Error { message }) => Err(CallError::Refused(message)),
        Ok(Response::Unavailable { message }) => Err(CallError::Down(message)),
        Ok(r) => Ok(r),
        Err(e) => Err(CallError::Refused(format!(
            "unreadable answer {line:?}: {e}"
        ))),
    }
}

/// Every home in effect.
pub fn list(socket: &Path) -> Result<Vec<HomeView>, CallError> {
    match call(socket, &Request::List)? {
        Response::Homes { homes } => Ok(homes),
        r => Err(CallError::Refused(format!("not a list of homes: {r:?}"))),
    }
}

/// The request that carries out an action.
pub fn request(action: &Action) -> Request {
    match action {
        Action::Clear { cgroup } => Request::Clear {
            target: Target::Cgroup(cgroup.clone()),
        },
        Action::Give { cgroup, wanted } => match &wanted.want {
            Want::Home(h) => Request::Prefer {
                target: Target::Cgroup(cgroup.clone()),
                home: h.spec.clone(),
                softness: h.softness.clone(),
                origin: Some(wanted.origin.clone()),
            },
            Want::Balance => Request::Balance {
                cgroup: cgroup.clone(),
                origin: Some(wanted.origin.clone()),
            },
        },
    }
}
