//! Tells systemd (a `Type=notify` unit) where the scheduler is: ready once
//! attached with the config's homes given, reloading while a SIGHUP's
//! config is read, stopping at the end. Without `NOTIFY_SOCKET` (not run
//! by systemd) each call does nothing.

use log::debug;
use sd_notify::NotifyState;

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        debug!("sd_notify: {e}");
    }
}

/// Attached, and the config's homes given (or a reload done):
/// `systemctl start` or the reload returns; `status` is what
/// `systemctl status` shows.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A new line for `systemctl status`.
pub fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

/// A reload begins; `ready` ends it.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

pub fn stopping() {
    send(&[NotifyState::Stopping]);
}
