#!/usr/bin/env bash
# System packages some features need, from Debian: Chromium (the page tests, driven by
# Playwright), Mosquitto (the MQTT broker of the notification service's tests), Maven
# (fetches Sedona's Spark jar, scripts/setup_jars.sh) and Graphviz (`spatec explain --format svg`).
# Installs only what is missing; needs root (or sudo) and apt-get. Without them it
# says what is missing and exits 0: the tests that need a missing component skip
# with that reason.
set -uo pipefail
want=()
command -v chromium >/dev/null 2>&1 || want+=(chromium)
command -v mvn >/dev/null 2>&1 || want+=(maven)
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || want+=(mosquitto)
command -v dot >/dev/null 2>&1 || want+=(graphviz)
[ ${#want[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: no apt-get here; install ${want[*]} by hand for the tests that need them" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=sudo; else
    echo "setup: not root; install ${want[*]} with apt-get for the tests that need them" >&2
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null \
  || echo "setup: apt-get could not install ${want[*]}" >&2
exit 0
