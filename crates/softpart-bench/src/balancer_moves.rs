//! Did the group balancer move a group while the window was measured?
//! The balancer promises no move in steady load after the initial settlement.
//! `softpart stat` gives each group's move count since its cgroup appeared
//! and the age of its last move; read after the window, that age alone
//! cannot say whether the move fell in the window or while the groups
//! settled during the warm-up, because the probes before it take seconds.
//! The agent knows when the window began, so it reads the view itself
//! (scenario key `balancer_moves`) and reports the moves against that time.

use softpart_core::control::StatView;
use std::fmt::Write as _;
use std::process::Command;

/// `softpart stat --json`, or None where no scx_softpart runs.
pub fn stat() -> Option<StatView> {
    let out = Command::new("softpart")
        .args(["stat", "--json"])
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// (moves so far over all groups, the latest move's age in s).
pub fn moves_and_latest(v: &StatView) -> (u64, Option<f64>) {
    let moves = v.groups.iter().map(|g| g.moves).sum();
    let latest = v
        .groups
        .iter()
        .filter_map(|g| g.last_move_s_ago)
        .reduce(f64::min);
    (moves, latest)
}

/// `figure` lines for a view read `since_window_start_s` after the window
/// began: every move since the cgroups were made (`moves`), the groups
/// whose last move came after the window began (`groups_moved_in_window`;
/// a group moved twice in it counts once, which is enough to tell none
/// from some), and when the latest move came, in s from the window's start
/// (negative: before it, i.e. while the groups settled). A view read later
/// than the window ended only widens what counts as "in the window", so a
/// move is never missed. Nothing for a view with no balanced group.
pub fn figures(v: &StatView, since_window_start_s: f64) -> String {
    let mut text = String::new();
    if v.groups.is_empty() {
        return text;
    }
    let (moves, latest) = moves_and_latest(v);
    let in_window = v
        .groups
        .iter()
        .filter(|g| g.last_move_s_ago.is_some_and(|a| a <= since_window_start_s))
        .count();
    let _ = writeln!(text, "figure moves {moves}");
    let _ = writeln!(text, "figure groups_moved_in_window {in_window}");
    if let Some(age) = latest {
        let _ = writeln!(
            text,
            "figure last_move_from_window_start_s {:.1}",
            since_window_start_s - age
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use softpart_core::control::GroupView;

    fn group(label: &str, moves: u64, last_move_s_ago: Option<f64>) -> GroupView {
        GroupView {
            label: label.into(),
            part: Some(0),
            load: 1.0,
            part_load: vec![1.0],
            exclusivity: Some(1.0),
            moves,
            last_move_s_ago,
            away_s: 0.0,
            away_with_room_s: 0.0,
        }
    }

    fn view(groups: Vec<GroupView>) -> StatView {
        StatView {
            period_ms: 1000,
            parts: Vec::new(),
            groups,
            held: Default::default(),
            tenants: Vec::new(),
            homes: Vec::new(),
            homes_window_s: 0.0,
            limits: Vec::new(),
            cost: Default::default(),
            memory: Default::default(),
        }
    }

    fn figure(text: &str, name: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("figure {name} ")))
            .map(|v| v.parse().unwrap())
    }

    #[test]
    fn a_move_while_settling_is_not_in_the_window() {
        // Read 12 s after the window began; one group moved 15 s ago,
        // i.e. 3 s before the window.
        let v = view(vec![group("g0", 1, Some(15.0)), group("g1", 0, None)]);
        let t = figures(&v, 12.0);
        assert_eq!(figure(&t, "moves"), Some(1.0));
        assert_eq!(figure(&t, "groups_moved_in_window"), Some(0.0));
        assert_eq!(figure(&t, "last_move_from_window_start_s"), Some(-3.0));
    }

    #[test]
    fn moves_in_the_window_are_counted_per_group() {
        let v = view(vec![
            group("g0", 2, Some(4.0)),
            group("g1", 1, Some(20.0)),
            group("g2", 1, Some(12.0)),
        ]);
        let t = figures(&v, 12.0);
        assert_eq!(figure(&t, "moves"), Some(4.0));
        // g0 (4 s ago) and g2 (just as the window began).
        assert_eq!(figure(&t, "groups_moved_in_window"), Some(2.0));
        assert_eq!(figure(&t, "last_move_from_window_start_s"), Some(8.0));
    }

    #[test]
    fn no_move_prints_no_time_and_no_group_prints_nothing() {
        let t = figures(&view(vec![group("g0", 0, None)]), 10.0);
        assert_eq!(figure(&t, "moves"), Some(0.0));
        assert_eq!(figure(&t, "groups_moved_in_window"), Some(0.0));
        assert_eq!(figure(&t, "last_move_from_window_start_s"), None);
        assert!(figures(&view(vec![]), 10.0).is_empty());
    }
}
