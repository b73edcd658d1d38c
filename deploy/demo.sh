#!/usr/bin/env bash
# The README's demo: installs what it needs (Debian), builds, starts a mosquitto broker on a free
# loopback port, runs fleetcast-agent on the built-in simulated receiver (`sim:`), and shows the
# vehicle live in fleet-watch. Ctrl-C stops everything it started.
#
# Environment (all optional): DEMO_VEHICLES (default 1), DEMO_SECONDS (stop by itself after N s),
# DEMO_SKIP_INSTALL=1 (packages already there).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if [ "${DEMO_SKIP_INSTALL:-0}" != 1 ]; then
  need=()
  for p in mosquitto mosquitto-clients libmosquitto-dev pkg-config libyaml-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing ${need[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi

echo "==> building"
swift build --product fleetcast-agent >"${TMPDIR:-/tmp}/fleetcast-demo-build.log" 2>&1 || { cat "${TMPDIR:-/tmp}/fleetcast-demo-build.log"; exit 1; }
swift build --product fleet-watch >>"${TMPDIR:-/tmp}/fleetcast-demo-build.log" 2>&1 || { cat "${TMPDIR:-/tmp}/fleetcast-demo-build.log"; exit 1; }
bin=$(swift build --show-bin-path)

work=$(mktemp -d /tmp/fleetcast-demo.XXXXXX)
pids=()
cleanup() {
  trap - EXIT INT TERM
  # Agents first, newest first, while the broker is still up: each publishes "offline",
  # flushes and disconnects. Then the broker.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free loopback port: a random one in the ephemeral range that nothing answers on.
for _ in $(seq 50); do
  port=$(shuf -i 20000-60999 -n 1)
  (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
done
{
  echo "listener $port 127.0.0.1"
  echo "allow_anonymous true"
  echo "persistence false"
  [ "$(id -u)" -eq 0 ] && echo "user root"
} > "$work/mosquitto.conf"
echo "==> mosquitto on 127.0.0.1:$port (log: $work/mosquitto.log)"
/usr/sbin/mosquitto -c "$work/mosquitto.conf" >"$work/mosquitto.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

for i in $(seq "${DEMO_VEHICLES:-1}"); do
  echo "==> fleetcast-agent run --source sim: --vehicle demo-$i (log: $work/agent-$i.log)"
  # Each simulated vehicle drives its own loop, a little further north-east than the last.
  lat=$(awk -v i="$i" 'BEGIN { printf "%.4f", 52.3702 + (i - 1) * 0.01 }')
  lon=$(awk -v i="$i" 'BEGIN { printf "%.4f", 4.8952 + (i - 1) * 0.015 }')
  # Every fix (FLEETCAST_REPORT_EVERY_FIX): the demo moves every second. A vehicle on a
  # metered link keeps the default policy (a fix every 10 s at most, more on turns).
  FLEETCAST_REPORT_EVERY_FIX=1 "$bin/fleetcast-agent" run --source "sim:?rate=1&lat=$lat&lon=$lon" --vehicle "demo-$i" \
    --broker "mqtt://127.0.0.1:$port" --state-dir "$work/state-$i" >"$work/agent-$i.log" 2>&1 &
  pids+=($!)
done

echo "==> fleet-watch --broker mqtt://127.0.0.1:$port   (Ctrl-C stops everything)"
echo "    any MQTT client sees the same: mosquitto_sub -h 127.0.0.1 -p $port -t 'fleet/#' -v"
if [ -n "${DEMO_SECONDS:-}" ]; then
  timeout --foreground -s INT "$DEMO_SECONDS" "$bin/fleet-watch" --broker "mqtt://127.0.0.1:$port" || true
else
  "$bin/fleet-watch" --broker "mqtt://127.0.0.1:$port" || true
fi
