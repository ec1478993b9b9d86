#!/usr/bin/env bash
# Fetch the Java libraries of scripts/jars.lock from Maven Central with Maven into jars/
# (project-local), and check each against its pinned SHA-256 (a mismatch is deleted and
# fails the setup). Where Maven is missing or cannot reach the registry, it says why in
# jars/UNAVAILABLE and exits 0: the Sedona-on-Spark tests then skip with that reason.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p jars
rm -f jars/UNAVAILABLE
status=0
while read -r coord sum; do
  case "$coord" in ''|'#'*) continue ;; esac
  IFS=: read -r group artifact version <<<"$coord"
  jar="jars/$artifact-$version.jar"
  if [ -f "$jar" ] && [ "$(sha256sum "$jar" | cut -d' ' -f1)" = "$sum" ]; then
    continue
  fi
  rm -f "$jar"
  if ! command -v mvn >/dev/null 2>&1; then
    echo "Maven (mvn) is not installed: cannot fetch $coord" > jars/UNAVAILABLE
    echo "setup: $(cat jars/UNAVAILABLE)" >&2
    exit 0
  fi
  if ! log=$(mvn -B -q -Dstyle.color=never dependency:copy -Dartifact="$coord" -DoutputDirectory=jars 2>&1); then
    why=$(printf '%s\n' "$log" | sed 's/\x1b\[[0-9;]*m//g' | grep -m1 -E 'ERROR' | cut -c1-300)
    echo "Maven could not fetch $coord: ${why:-mvn failed}" > jars/UNAVAILABLE
    echo "setup: $(cat jars/UNAVAILABLE)" >&2
    exit 0
  fi
  got=$(sha256sum "$jar" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then
    rm -f "$jar"
    echo "setup: $coord has SHA-256 $got, scripts/jars.lock pins $sum: deleted" >&2
    status=1
  fi
done < scripts/jars.lock
exit $status
