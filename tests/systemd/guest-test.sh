#!/bin/bash
# Runs inside the systemd guest (scripts/systemd-test.sh boots it: Debian
# trixie, systemd as PID 1, PostgreSQL and containerd from Debian's
# packages, softpart and softpart-nri from `make install`; 2 NUMA nodes of
# 2 CPUs, node 0 = CPUs 0-1). Does
# what an operator does, in order, and reports each check as a TAP line on
# the second serial port; evidence lines start with '#'.
exec >/dev/ttyS1 2>&1
set -u
export PATH=/usr/local/sbin:/usr/local/bin:$PATH

PG_UNIT=postgresql@17-main.service
PG_CG=/system.slice/system-postgresql.slice/$PG_UNIT
METRICS=http://127.0.0.1:17321/metrics
CHECKS=41
echo "1..$CHECKS"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; }
check() { # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then ok "$what"; else not_ok "$what"; fi
}
show() { sed 's/^/#   /' "$@"; }
# Waits up to $1 tenths of a second for the command after it to succeed.
wait_for() {
  local left=$1; shift
  until "$@"; do
    [ "$left" -le 0 ] && return 1
    sleep 0.1; left=$((left - 1))
  done
}
sched_state() { cat /sys/kernel/sched_ext/state; }
listed() { softpart list > /tmp/list 2>&1 && grep -Eq "$1" /tmp/list; }

# Where PostgreSQL's processes ran while pgbench drove them for $1 s, by
# softpart-observe (the project's scheduler-independent observer): sets
# node0 and node1 (CPU seconds), keeps pgbench's report in /tmp/pgbench.out.
observe_pgbench() {
  softpart-observe --json --prefix /system.slice/system-postgresql.slice -- \
    sh -c "sudo -u postgres pgbench -c 2 -j 1 -T $1 bench > /tmp/pgbench.out 2>&1" > /tmp/observed.json
  grep -E "^(tps|number of transactions)" /tmp/pgbench.out | show
  read -r node0 node1 < <(jq -r --arg g "$PG_CG" '.groups[$g].node_cpu_s | map(tostring) | join(" ")' /tmp/observed.json)
  echo "# softpart-observe: PostgreSQL's CPU seconds on node 0 and node 1: ${node0:-?} ${node1:-?}"
}
# Starts `softpart exec --node 1 -- sleep infinity` while no scheduler
# answers; sets exec_pid, keeps its words in $1.
exec_while_down() {
  softpart exec --node 1 -- sleep infinity > "$1" 2>&1 &
  exec_pid=$!
  sleep 1
  show "$1"
}
share() { awk -v a="${1:-x}" -v b="${2:-x}" 'BEGIN { if (a ~ /^[0-9.e+-]+$/ && b ~ /^[0-9.e+-]+$/ && a + b > 0) printf "%.3f", a / (a + b); else print "?" }'; }

wait_for 1800 systemctl is-active -q "$PG_UNIT"
check "PostgreSQL's cluster unit $PG_UNIT is active" systemctl is-active -q "$PG_UNIT"
check "make install put the man pages and completions in place" \
  test -s /usr/local/share/man/man8/scx_softpart.8 -a -s /usr/local/share/man/man1/softpart.1 \
    -a -s /usr/local/share/man/man1/softpart-prefer.1 -a -s /usr/local/share/man/man5/softpart.toml.5 \
    -a -s /usr/local/share/bash-completion/completions/softpart -a -s /usr/local/share/zsh/site-functions/_softpart

# softpart exec before softpart has ever run (as a unit ordered before it
# would): the boot made /run/softpart/pending (tmpfiles.d), so the request
# waits there and the home applies when the service first starts.
ls -ld /run/softpart/pending | show
exec_while_down /tmp/early.out
early=$exec_pid
check "softpart exec before the first start left its home to apply later" \
  bash -c "kill -0 $early && grep -q 'the home applies when it starts' /tmp/early.out"

# 0. The baseline, in this boot: the default scheduler, no homes.
sudo -u postgres createdb bench && sudo -u postgres pgbench -q -i -s 1 bench > /tmp/pgbench-init.out 2>&1
observe_pgbench 12
baseline=$(share "$node0" "$node1")
echo "# baseline (sched_ext $(sched_state)): PostgreSQL's share of CPU time on node 0: $baseline, on node 1: $(share "$node1" "$node0")"

# 1. README's quick start, verbatim (the host cut it from README.md).
show /root/quickstart.sh
bash -e /root/quickstart.sh > /tmp/quickstart.out 2>&1
rc=$?
show /tmp/quickstart.out
# When the service did not come up, its own words say why.
if ! systemctl is-active -q softpart; then
  journalctl -u softpart --no-pager -n 40 | show
fi
check "README's quick start runs as written (exit $rc)" [ "$rc" = 0 ]
check "softpart.service is active and sched_ext is $(sched_state)" \
  bash -c 'systemctl is-active -q softpart && grep -qx enabled /sys/kernel/sched_ext/state'
check "softpart list shows PostgreSQL's unit homed on node 0 (CPUs 0-1) by the config rule" \
  grep -Eq "^cgroup +$PG_CG +CPUs 0-1 +\(config rule " /tmp/quickstart.out
softpart check-config /etc/softpart/softpart.toml --live > /tmp/check.out 2>&1
check_rc=$?
show /tmp/check.out
check "softpart check-config --live passes the quick start's file and lists PostgreSQL's unit under its rule (exit $check_rc)" \
  bash -c "[ $check_rc = 0 ] && grep -Eq '^ +live: .*$PG_CG' /tmp/check.out"
softpart list > /tmp/list 2>&1
check "the thread softpart exec started before the first start is homed on node 1 (CPUs 2-3)" \
  grep -Eq "^threads .*[ ,]$early[ ,].*CPUs 2-3 " /tmp/list
kill "$early"
systemctl status softpart --no-pager 2>&1 | sed -n 's/^ *Status: //p' | show
check "systemctl status says how many homes are in effect" \
  bash -c 'systemctl show -P StatusText softpart | grep -Eq "attached; [0-9]+ home\(s\) in effect"'
systemd-analyze security softpart --no-pager 2>&1 | tail -1 | show
exposure=$(systemd-analyze security softpart --no-pager 2>/dev/null | sed -n 's/.*exposure level for softpart.service: \([0-9.]*\).*/\1/p')
check "systemd-analyze security rates the hardened unit below 5.0 (${exposure:-?})" \
  awk -v e="${exposure:-x}" 'BEGIN { exit !(e ~ /^[0-9.]+$/ && e < 5.0) }'

# 2. A reload: a new rule applies; a broken file is refused, the running
# config stays.
cp /etc/softpart/softpart.toml /tmp/quickstart.toml
sed -i 's/^node = 0$/node = 1/' /etc/softpart/softpart.toml
systemctl reload softpart
wait_for 100 listed "^cgroup +$PG_CG +CPUs 2-3 "
show /tmp/list
check "after an edit and systemctl reload, PostgreSQL's home is node 1 (CPUs 2-3)" \
  grep -Eq "^cgroup +$PG_CG +CPUs 2-3 " /tmp/list
sed -i 's/^node = 1$/node = 7/' /etc/softpart/softpart.toml
systemctl reload softpart > /tmp/reload.out 2>&1
reload_rc=$?
show /tmp/reload.out
check "systemctl reload of a broken file fails (exit $reload_rc)" [ "$reload_rc" != 0 ]
journalctl -u softpart -p warning --no-pager | grep "reload refused" | show
softpart list > /tmp/list 2>&1
check "the refusal is a warning in the journal naming the field, and the running home stays" \
  bash -c "journalctl -u softpart -p warning --no-pager | grep -q 'reload refused.*node' && grep -Eq '^cgroup +$PG_CG +CPUs 2-3 ' /tmp/list && systemctl is-active -q softpart"
cp /tmp/quickstart.toml /etc/softpart/softpart.toml
systemctl reload softpart
wait_for 100 listed "^cgroup +$PG_CG +CPUs 0-1 "

# A config error at start: exit 78, which the unit does not restart on.
echo 'node = ' > /etc/softpart/softpart.toml
systemctl restart softpart > /dev/null 2>&1
sleep 5
result=$(systemctl show -P Result softpart); status=$(systemctl show -P ExecMainStatus softpart)
restarts=$(systemctl show -P NRestarts softpart)
echo "# with a broken file at start: result $result, exit status $status, restarts $restarts"
check "a broken file at start exits 78 and is not restarted in a loop" \
  bash -c "[ '$status' = 78 ] && [ '$restarts' = 0 ] && ! systemctl is-active -q softpart"
cp /tmp/quickstart.toml /etc/softpart/softpart.toml
systemctl reset-failed softpart
systemctl start softpart

# 3. A home given at run time outlives a restart; metrics on for what
# follows.
systemd-run --quiet --unit=napper sleep infinity
wait_for 100 bash -c '[ "$(systemctl show -P MainPID napper)" != 0 ]'
napper=$(systemctl show -P MainPID napper)
softpart prefer --pid "$napper" --cpus 1 | show
echo 'SOFTPART_ARGS="--metrics 127.0.0.1:17321"' > /etc/default/softpart
systemctl restart softpart
softpart list > /tmp/list 2>&1
show /tmp/list
check "after systemctl restart, the thread homed with softpart prefer still has CPUs 1" \
  grep -Eq "^threads .*[ ,]$napper[ ,].*CPUs 1 " /tmp/list
check "after the restart, PostgreSQL's rule applies again" \
  grep -Eq "^cgroup +$PG_CG +CPUs 0-1 " /tmp/list

# 4. PostgreSQL under pgbench, homed: where its processes ran, and two
# scrapes.
(sleep 4; curl -sf "$METRICS" > /tmp/m1) &
observe_pgbench 24
curl -sf "$METRICS" > /tmp/m2
homed=$(share "$node0" "$node1")
check "under pgbench, PostgreSQL's processes took at least 90% of their CPU time on node 0 ($homed; without homes in this boot $baseline)" \
  awk -v a="${node0:-x}" -v b="${node1:-x}" 'BEGIN { exit !(a ~ /^[0-9.e+-]+$/ && b ~ /^[0-9.e+-]+$/ && a + b >= 2 && a >= 0.9 * (a + b)) }'
sel="group=\"$PG_CG\""
grep -F "softpart_group_run_seconds_total{$sel," /tmp/m1 /tmp/m2 | show
grep -F "softpart_group_locality_ratio{$sel}" /tmp/m2 | show
value() { grep -F "$1" "$2" | awk '{print $2}'; }
h1=$(value "softpart_group_run_seconds_total{$sel,where=\"home\"}" /tmp/m1)
h2=$(value "softpart_group_run_seconds_total{$sel,where=\"home\"}" /tmp/m2)
loc=$(value "softpart_group_locality_ratio{$sel}" /tmp/m2)
check "PostgreSQL's CPU time at home rose between the scrapes ($h1 s, then $h2 s)" \
  awk -v a="${h1:-x}" -v b="${h2:-x}" 'BEGIN { exit !(a ~ /^[0-9.e+-]+$/ && b ~ /^[0-9.e+-]+$/ && b > a) }'
check "PostgreSQL's locality in the metrics is at least 90% ($loc)" \
  awk -v l="${loc:-x}" 'BEGIN { exit !(l ~ /^[0-9.e+-]+$/ && l >= 0.9) }'
sed -i 's/^node = 0$/node = 7/' /etc/softpart/softpart.toml
systemctl reload softpart > /dev/null 2>&1
curl -sf "$METRICS" > /tmp/m3
cp /tmp/quickstart.toml /etc/softpart/softpart.toml
systemctl reload softpart
curl -sf "$METRICS" > /tmp/m4
grep -h "^softpart_config_\|^softpart_attached\|^softpart_build_info" /tmp/m3 /tmp/m4 | show
check "the metrics say the broken reload failed and the next one succeeded" \
  bash -c 'grep -qx "softpart_config_last_reload_successful 0" /tmp/m3 && grep -qx "softpart_config_last_reload_successful 1" /tmp/m4 && grep -q "^softpart_config_reloads_total{result=\"refused\"} [1-9]" /tmp/m4 && grep -qx "softpart_attached 1" /tmp/m4'
scx_softpart --help-stats | sed -n 's/^  \(softpart_[a-z_]*\) .*/\1/p' | sed 's/_total$//' | sort > /tmp/described
sed -n 's/^# HELP \(softpart_[a-z_]*\) .*/\1/p' /tmp/m2 | sort > /tmp/served
echo "# metric families served: $(wc -l < /tmp/served), described by --help-stats: $(wc -l < /tmp/described)"
check "the families served are the ones --help-stats describes" \
  bash -c '[ -s /tmp/served ] && diff /tmp/described /tmp/served'

# 5. softpart exec while the scheduler is down: the command runs, with a
# warning, and the home applies when the service comes up.
systemctl stop softpart
echo "# after systemctl stop: sched_ext $(sched_state)"
check "after systemctl stop, sched_ext is disabled" grep -qx disabled /sys/kernel/sched_ext/state
check "PostgreSQL still answers" \
  bash -c "sudo -u postgres psql -tAc 'select 1' bench | grep -qx 1"
exec_while_down /tmp/exec.out
late=$exec_pid
check "softpart exec ran its command with a warning while the scheduler was down" \
  bash -c "kill -0 $late && grep -qi warn /tmp/exec.out"
systemctl start softpart
softpart list > /tmp/list 2>&1
show /tmp/list
check "once the service is up again, the thread softpart exec started is homed on node 1 (CPUs 2-3)" \
  grep -Eq "^threads .*[ ,]$late[ ,].*CPUs 2-3 " /tmp/list
kill "$late"

# 6. A Kubernetes node: containerd with NRI and the systemd cgroup driver,
# softpart-nri as installed, pods run, stopped and removed by a CRI client
# as the kubelet does (softpart-bench cri). Node 1 is CPUs 2-3.
# What this guest needs of containerd beyond Debian's config (a node's
# own setup): the systemd cgroup driver, as the kubelet's; the native
# snapshotter and no pivot_root, as it boots from an initramfs with no
# modules. Then docs/recipes.md's Kubernetes recipe, verbatim.
cat >> /etc/containerd/config.toml <<'END'
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "native"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
  NoPivotRoot = true
END
show /root/k8s-recipe.sh
bash -e /root/k8s-recipe.sh > /tmp/k8s-recipe.out 2>&1
recipe_rc=$?
show /tmp/k8s-recipe.out
check "docs/recipes.md's Kubernetes recipe runs as written (exit $recipe_rc)" [ "$recipe_rc" = 0 ]
wait_for 600 test -S /var/run/nri/nri.sock
for img in pause:registry.k8s.io/pause busybox:docker.io/library/busybox; do
  tar -C "/opt/images/${img%%:*}" -cf "/tmp/${img%%:*}.tar" .
  ctr -n k8s.io images import --snapshotter native --base-name "${img#*:}" "/tmp/${img%%:*}.tar" | show
done
nri_log() { journalctl -q -o cat -u softpart-nri > /tmp/nri.log; grep -Fq -- "$1" /tmp/nri.log; }
check "softpart-nri registered with containerd" \
  wait_for 300 nri_log "registered with containerd as 90-softpart"
spin() { softpart-bench cri up "$@" -- sh -c 'while :; do :; done' > "/tmp/pod.$2" 2>&1; }
idle() { softpart-bench cri up "$@" -- busybox sleep 3600 > "/tmp/pod.$2" 2>&1; }
pod_of() { sed -n 's/^pod //p' "/tmp/pod.$1"; }
slice() { echo "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${1//-/_}.slice"; }
# An annotated pod, CPU-bound, in an allowed namespace; one without.
spin --name pg-0 --namespace db --uid a-1 --annotation home.softpart.io/pod=node=1
show /tmp/pod.pg-0
idle --name plain --namespace db --uid a-2
check "an annotated pod's cgroup is homed on node 1 by softpart-nri, its pod named" \
  wait_for 150 listed "^cgroup +$(slice a-1) +CPUs 2-3 .*\(kubernetes db/pg-0 node=1\)"
show /tmp/list
softpart-observe --json --prefix "$(slice a-1)" -- sleep 4 > /tmp/observed.json
read -r k0 k1 < <(jq -r '[.groups[] | .node_cpu_s] | transpose | map(add | tostring) | join(" ")' /tmp/observed.json)
check "its threads ran at least 90% on node 1 ($(share "$k1" "$k0"))" \
  awk -v a="${k0:-x}" -v b="${k1:-x}" 'BEGIN { exit !(a ~ /^[0-9.e+-]+$/ && b ~ /^[0-9.e+-]+$/ && a + b >= 1 && b >= 0.9 * (a + b)) }'
check "the pod without an annotation runs and has no home" \
  bash -c "grep -q '^container main ' /tmp/pod.plain && ! grep -q '$(slice a-2)' /tmp/list"
softpart-bench cri down "$(pod_of pg-0)"
# A balanced pod; a pod whose container has its own home.
spin --name batch --namespace db --uid a-3 --annotation balance.softpart.io/pod=true
idle --name pg-1 --namespace db --uid a-4 --annotation home.softpart.io/container.main=cpus=3
check "a balance pod is placed by the balancer" \
  wait_for 300 listed "^cgroup +$(slice a-3) .*\(balancer, kubernetes db/batch\)"
check "a container's own home is given to its scope" \
  wait_for 150 listed "^cgroup +$(slice a-4)/cri-containerd-.*\.scope +CPUs 3 .*\(kubernetes db/pg-1/main cpus=3\)"
softpart-bench cri down "$(pod_of batch)"
softpart-bench cri stop "$(sed -n 's/^container main //p' /tmp/pod.pg-1)"
check "stopping the container and removing the pods cleared their homes" \
  wait_for 150 bash -c "softpart list > /tmp/list; ! grep -Eq 'kubernetes db/(pg-0|batch|pg-1)' /tmp/list"
show /tmp/list
# The plugin down, then the scheduler down: pods start homeless, homes
# come when each is back.
systemctl stop softpart-nri
idle --name late --namespace db --uid a-5 --annotation home.softpart.io/pod=node=1
late_rc=$?
systemctl stop softpart
idle --name later --namespace db --uid a-6 --annotation home.softpart.io/pod=node=0
later_rc=$?
check "pods start while the plugin and the scheduler are down (exit $late_rc, $later_rc)" \
  [ "$late_rc" = 0 -a "$later_rc" = 0 ]
systemctl start softpart softpart-nri
check "once both are back, those pods have their homes" \
  wait_for 200 bash -c "softpart list > /tmp/list; grep -Eq '^cgroup +$(slice a-5) +CPUs 2-3 ' /tmp/list && grep -Eq '^cgroup +$(slice a-6) +CPUs 0-1 ' /tmp/list"
show /tmp/list
# A home taken away behind the plugin's back comes back at its restart.
softpart prefer --cgroup "$(slice a-5)" --clear | show
systemctl restart softpart-nri
check "after a restart the plugin gives exactly the running pods' homes back" \
  wait_for 200 bash -c "softpart list > /tmp/list; [ \$(grep -c 'kubernetes ' /tmp/list) = 2 ] && grep -Eq '^cgroup +$(slice a-5) +CPUs 2-3 ' /tmp/list"
# docs/recipes.md's block for the plugin's metrics, as written: it
# restarts the plugin, which then serves its counters.
show /root/nri-metrics.sh
bash -e /root/nri-metrics.sh > /tmp/nri-metrics.out 2>&1
metrics_rc=$?
show /tmp/nri-metrics.out
NRI_METRICS=http://127.0.0.1:17322/metrics
nri_ready() {
  curl -sf "$NRI_METRICS" > /tmp/nm && grep -qx 'softpart_nri_containerd_synchronized 1' /tmp/nm &&
    grep -qx 'softpart_nri_softpart_answers 1' /tmp/nm && grep -qx 'softpart_nri_homes_wanted 2' /tmp/nm
}
check "docs/recipes.md's metrics block runs as written (exit $metrics_rc); the plugin's scrape says it is synchronized with containerd, scx_softpart answers, the 2 running pods' homes are wanted" \
  eval '[ "$metrics_rc" = 0 ] && wait_for 600 nri_ready'
grep '^softpart_nri_' /tmp/nm | show
# A malformed annotation, and a namespace not allowed: the pods start.
idle --name bad --namespace db --uid a-7 --annotation home.softpart.io/pod=node=x
bad_rc=$?
idle --name front --namespace web --uid a-8 --annotation home.softpart.io/pod=node=1
front_rc=$?
sleep 1
journalctl -q -o cat -u softpart-nri > /tmp/nri.log
grep -F ' ignored' /tmp/nri.log | show
check "a malformed annotation and a namespace not allowed: the pods start (exit $bad_rc, $front_rc), one log line each names the pod and the value" \
  bash -c "[ $bad_rc = 0 -a $front_rc = 0 ] && grep -qF 'pod db/bad: annotation home.softpart.io/pod=\"node=x\" ignored' /tmp/nri.log && grep -qF 'pod web/front: annotation home.softpart.io/pod=\"node=1\" ignored: namespace' /tmp/nri.log"
curl -sf "$NRI_METRICS" > /tmp/nm
grep '^softpart_nri_annotations_ignored' /tmp/nm | show
counted() { awk -v k="softpart_nri_annotations_ignored_total{reason=\"$1\"}" '$1 == k && $2 >= 1 { found = 1 } END { exit !found }' /tmp/nm; }
check "the plugin's metrics count the two ignored by why (malformed, namespace)" \
  eval "counted malformed && counted namespace"
# containerd restarts: the plugin connects again, the homes stay right.
registered=$(journalctl -q -o cat -u softpart-nri | grep -c 'registered with containerd')
systemctl restart containerd
check "after containerd's restart the plugin registered again and the homes are there" \
  wait_for 600 bash -c "[ \$(journalctl -q -o cat -u softpart-nri | grep -c 'registered with containerd') -gt $registered ] && softpart list > /tmp/list && grep -Eq '^cgroup +$(slice a-6) +CPUs 0-1 ' /tmp/list"
for p in late later bad front plain pg-1; do softpart-bench cri down "$(pod_of $p)" > /dev/null 2>&1; done
check "all $CHECKS checks ran" [ "$n" = $((CHECKS - 1)) ]
echo "# done"
