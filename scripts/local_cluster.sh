#!/usr/bin/env bash
# A Spark standalone cluster on this machine, for trying `spatec replay --master`:
# a master and N workers (default 2, one core each) on 127.0.0.1, started with the
# daemon script of the pip package's SPARK_HOME (sbin/spark-daemon.sh: what Spark's
# start-master.sh and start-worker.sh run; the pip package ships only it).
#
#   bash scripts/local_cluster.sh start [DIR] [WORKERS]   # prints spark://127.0.0.1:PORT
#   bash scripts/local_cluster.sh stop  [DIR]
#
# DIR (default .cache/cluster) holds the pid files, logs, the workers' work and local
# directories (each its own: no folder shared by the workers) and
# the master's URL (DIR/master). Stop ends exactly the daemons that start started.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:?start or stop}
dir=$(realpath -m "${2:-.cache/cluster}")
workers=${3:-2}
PY="$PWD/.venv/bin/python"
home=$("$PY" -c "import os, pyspark; print(os.path.dirname(pyspark.__file__))")
export SPARK_HOME="$home" SPARK_PID_DIR="$dir/pids" SPARK_LOG_DIR="$dir/logs" SPARK_IDENT_STRING=spatec
export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$PY"
unset SPARK_NO_DAEMONIZE
daemon="$home/sbin/spark-daemon.sh"
free_port() { "$PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }
case "$cmd" in
  start)
    mkdir -p "$dir/pids" "$dir/logs"
    port=$(free_port)
    bash "$daemon" start org.apache.spark.deploy.master.Master 1 \
      --host 127.0.0.1 --port "$port" --webui-port "$(free_port)" >/dev/null
    url="spark://127.0.0.1:$port"
    for i in $(seq 1 "$workers"); do
      # each worker's executors spill and shuffle into a local directory of their own
      mkdir -p "$dir/local$i"
      SPARK_LOCAL_DIRS="$dir/local$i" bash "$daemon" start org.apache.spark.deploy.worker.Worker "$i" "$url" --host 127.0.0.1 \
        --cores 1 --memory "${SPATEC_WORKER_MEMORY:-3g}" --webui-port "$(free_port)" \
        --work-dir "$dir/work$i" >/dev/null
    done
    # wait for every worker to register with the master
    for _ in $(seq 1 240); do
      n=$(cat "$dir"/logs/*Master*.out 2>/dev/null | grep -c "Registering worker" || true)
      [ "$n" -ge "$workers" ] && break
      sleep 0.5
    done
    if [ "${n:-0}" -lt "$workers" ]; then
      echo "local_cluster: $n of $workers workers registered within 120 s (logs in $dir/logs)" >&2
      exit 1
    fi
    echo "$url" > "$dir/master"
    echo "$url"
    ;;
  stop)
    for pid in "$dir"/pids/*Worker*.pid "$dir"/pids/*Master*.pid; do
      [ -f "$pid" ] || continue
      name=$(basename "$pid" .pid)
      inst=${name##*-}
      class=org.apache.spark.deploy.worker.Worker
      case "$name" in *Master*) class=org.apache.spark.deploy.master.Master ;; esac
      bash "$daemon" stop "$class" "$inst" >/dev/null || true
    done
    rm -f "$dir/master"
    ;;
  *) echo "usage: $0 start|stop [DIR] [WORKERS]" >&2; exit 2 ;;
esac
