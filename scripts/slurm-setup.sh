#!/bin/bash
# Sets up Debian's slurm-wlm on this one machine, with Weft's bandwidth in it, for the tests
# and for a site to copy: munge, slurmctld and slurmd (one node), the file system's bandwidth
# as a license (weftbw: each one stands for --unit bytes per second) and each node's as a
# generic resource (weftbw, in bytes per second), and the controller's prolog and epilog that
# reserve a job's licensed bandwidth in Weft and give it back (`weft qos slurm-prolog`,
# `slurm-epilog`). Everything lives under --dir (configuration, state, logs, munge's key and
# socket), so it runs beside a site's own Slurm without touching /etc.
#
#   scripts/slurm-setup.sh --dir DIR --weft /path/to/weft --mgs HOST:PORT \
#       [--licenses 200] [--node-bw 10G] [--unit 1M] [--cpus 8]
#   export SLURM_CONF=DIR/slurm.conf      # then sbatch -L weftbw:100 --gres=weftbw:100M ...
#   scripts/slurm-setup.sh --stop --dir DIR
#
# Jobs' Weft mounts take -o jobid_var=SLURM_JOB_ID so that their requests carry the job id
# the reservation holds for. Needs root (munged and slurmd run as root here).
set -euo pipefail

dir="" weft="" mgs="" licenses=200 node_bw=10G unit=1M cpus=8 stop=0
while [ $# -gt 0 ]; do
    case "$1" in
        --dir) dir=$2; shift 2 ;;
        --weft) weft=$2; shift 2 ;;
        --mgs) mgs=$2; shift 2 ;;
        --licenses) licenses=$2; shift 2 ;;
        --node-bw) node_bw=$2; shift 2 ;;
        --unit) unit=$2; shift 2 ;;
        --cpus) cpus=$2; shift 2 ;;
        --stop) stop=1; shift ;;
        *) echo "slurm-setup.sh: unknown option '$1' (--dir, --weft, --mgs, --licenses, --node-bw, --unit, --cpus, --stop)" >&2; exit 2 ;;
    esac
done
[ -n "$dir" ] || { echo "slurm-setup.sh: --dir DIR is required" >&2; exit 2; }
dir=$(realpath -m "$dir")

stop_all() {
    for d in slurmd slurmctld munged; do
        if [ -f "$dir/$d.pid" ]; then
            pid=$(cat "$dir/$d.pid")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
            rm -f "$dir/$d.pid"
        fi
    done
}
if [ "$stop" = 1 ]; then
    stop_all
    exit 0
fi
[ -n "$weft" ] && [ -n "$mgs" ] || { echo "slurm-setup.sh: --weft PATH and --mgs HOST:PORT are required" >&2; exit 2; }
for b in munged slurmctld slurmd scontrol sbatch; do
    command -v "$b" >/dev/null || { echo "slurm-setup.sh: $b not found: apt-get install slurm-wlm munge" >&2; exit 1; }
done
weft=$(realpath "$weft")
host=$(hostname -s)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
chmod 700 "$dir/munge"
[ -f "$dir/munge/munge.key" ] || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munge.seed"

for script in prolog epilog; do
    cat > "$dir/$script.sh" <<EOF
#!/bin/sh
# Slurm's controller runs this around every job: Weft's reservation of the job's bandwidth.
export SLURM_CONF="$dir/slurm.conf"
exec "$weft" qos slurm-$script --mgs "$mgs" $([ $script = prolog ] && echo "--unit $unit") >> "$dir/$script.log" 2>&1
EOF
    chmod 755 "$dir/$script.sh"
done

cat > "$dir/slurm.conf" <<EOF
ClusterName=weft
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
# A job held for licenses starts within seconds of their release (the backfill pass
# starts it; its default interval is 30 s).
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdParameters=config_overrides
Licenses=weftbw:$licenses
GresTypes=weftbw
PrologSlurmctld=$dir/prolog.sh
EpilogSlurmctld=$dir/epilog.sh
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 Gres=weftbw:$node_bw State=UNKNOWN
PartitionName=weft Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
echo "NodeName=$host Name=weftbw Count=$node_bw" > "$dir/gres.conf"
export SLURM_CONF="$dir/slurm.conf"
slurmctld -i
slurmd -N "$host"
for _ in $(seq 100); do
    if scontrol show node "$host" 2>/dev/null | grep -q "State=IDLE"; then
        echo "slurm-setup.sh: slurmctld and slurmd up (SLURM_CONF=$dir/slurm.conf), $licenses weftbw licenses of $unit/s"
        exit 0
    fi
    sleep 0.2
done
echo "slurm-setup.sh: the node did not come up; the logs:" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
stop_all
exit 1
