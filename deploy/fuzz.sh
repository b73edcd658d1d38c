#!/usr/bin/env bash
# Fuzzes the decoders of untrusted input with libFuzzer: NMEA bytes (framer and decoder), gpsd
# JSON lines, received contract payloads (fix, heading, status, backlog batch), compact batches
# and fleet-watch's topic + payload decoding. Each harness also checks invariants (same events whatever the
# chunking, payload round trips); a crash or a failed check is a finding.
#
#   bash deploy/fuzz.sh [SECONDS] [TARGET...]    SECONDS per target (default 60); all targets by default
#
# The harnesses (fuzz/*.swift) are built with swiftc -sanitize=fuzzer,address straight over the
# pure modules' sources (FleetcastCore, GNSS, NMEA, FleetProtocol, and the pure files of
# GNSSSources and FleetWatch), into .build-fuzz/; `swift build` never sees them. Corpora grow in .fuzz/corpus/
# (git-ignored) from seeds made out of ../shared/testdata (or the test fixtures) and fuzz/seeds/.
# Exits non-zero when any target found a crash; the reproducer's path is printed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
all_targets=(nmea gpsd fleet-payload compact-batch fleet-message)
targets=("${@:-${all_targets[@]}}")
for t in "${targets[@]}"; do
  case " ${all_targets[*]} " in *" $t "*) ;; *) echo "unknown target $t (targets: ${all_targets[*]})" >&2; exit 2 ;; esac
done
build=.build-fuzz
work=.fuzz
flags=(-sanitize=fuzzer,address -O -assert-config Debug -g -parse-as-library -package-name fleetcast)  # package: JSONWriter is package-visible
swiftc=${SWIFTC:-swiftc}

quiet() {  # the linker's noise about ASan's local symbols hides real errors
  "$@" 2> >(grep -v "Cannot export local symbol '__asan" >&2)
}

# A pure module, as one object file and its .swiftmodule.
module() {
  local name=$1; shift
  quiet "$swiftc" "${flags[@]}" -wmo -c -module-name "$name" -I "$build" \
    -emit-module -emit-module-path "$build/$name.swiftmodule" "$@" -o "$build/$name.o"
}

# A harness executable: its sources plus the shared checks, linked with libFuzzer.
harness() {
  local name=$1; shift
  quiet "$swiftc" "${flags[@]}" -module-name "Fuzz_${name//-/_}" -I "$build" \
    fuzz/FuzzCheck.swift "$@" "$build/JSONEscaping.o" "$build/GNSS.o" "$build/FleetProtocol.o" -o "$build/fuzz-$name"
}

echo "==> building fuzz harnesses into $build"
started=$SECONDS
mkdir -p "$build"
# FleetProtocol's JSON string escaper, a module of its own.
module JSONEscaping Sources/JSONEscaping/*.swift &
module GNSS Sources/GNSS/*.swift
wait $!
module FleetProtocol Sources/FleetProtocol/*.swift &
module NMEA Sources/NMEA/*.swift
wait $!
for t in "${targets[@]}"; do
  case $t in
    nmea) harness nmea fuzz/NMEAFuzzer.swift "$build/NMEA.o" ;;
    gpsd) harness gpsd fuzz/GPSDFuzzer.swift Sources/GNSSSources/GPSDMessageDecoder.swift Sources/GNSSSources/JSONValue.swift ;;
    fleet-payload) harness fleet-payload fuzz/FleetPayloadFuzzer.swift ;;
    compact-batch) harness compact-batch fuzz/CompactBatchFuzzer.swift ;;
    fleet-message) harness fleet-message fuzz/FleetMessageFuzzer.swift Sources/FleetCore/FleetMessageDecoder.swift Sources/FleetCore/FleetEvent.swift Sources/FleetCore/FleetPlausibility.swift ;;
  esac &
  # two compilers at a time
  [ "$(jobs -rp | wc -l)" -lt 2 ] || wait -n
done
for job in $(jobs -p); do wait "$job"; done
echo "    built in $((SECONDS - started)) s"

# Seed corpora, remade each run: recordings cut into small pieces (libFuzzer mutates small
# inputs far faster), contract payloads from fuzz/seeds/.
testdata=../shared/testdata/gpsd
[ -d "$testdata" ] || testdata=Tests/NMEATests/Fixtures/gpsd
rm -rf "$work/seeds"
mkdir -p "$work/seeds"/{nmea,gpsd,fleet-payload,compact-batch,fleet-message}
for log in "$testdata"/*.log; do
  split -l 10 -d -a 4 "$log" "$work/seeds/nmea/$(basename "$log")."
done
for chk in "$testdata"/*.chk; do
  grep '^{' "$chk" | split -l 4 -d -a 4 - "$work/seeds/gpsd/$(basename "$chk")." || true
done
cp fuzz/seeds/*.json "$work/seeds/fleet-payload/"
for seed in fuzz/seeds/*.json; do
  kind=$(basename "$seed" .json); kind=${kind%%-*}
  { printf 'fleet/van-7/%s\n' "$kind"; cat "$seed"; } > "$work/seeds/fleet-message/$(basename "$seed")"
done
cp fuzz/seeds/*.bin "$work/seeds/compact-batch/"
for seed in fuzz/seeds/*.bin; do
  { printf 'fleet/van-7/batch\n'; cat "$seed"; } > "$work/seeds/fleet-message/$(basename "$seed")"
done
printf 'fleet/van-7/fix\n' > "$work/seeds/fleet-message/empty-payload"
printf 'acme/fleet/bus.12/heading\n{"v":1,"heading":12.5,"source":"HDT"}' > "$work/seeds/fleet-message/prefix"

# max_len: a seed piece of a recording is ≤ ~1 KiB (SKY lines: ~3 KiB); a backlog batch may be 32 KiB.
declare -A max_len=([nmea]=4096 [gpsd]=4096 [fleet-payload]=40000 [compact-batch]=40000 [fleet-message]=40000)
# One fuzzer a core at a time (each is one process on one core), every target for SECONDS.
fuzz_one() {
  local t=$1 status=0
  local corpus="$work/corpus/$t" crashes="$work/crashes/$t/"
  mkdir -p "$corpus" "$crashes"
  SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 "$build/fuzz-$t" \
    -max_total_time="$seconds" -max_len="${max_len[$t]}" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$crashes" "$corpus" "$work/seeds/$t" > "$work/$t.log" 2>&1 || status=$?
  echo "$status" > "$work/$t.status"
}
cores=$(nproc 2>/dev/null || echo 1)
for t in "${targets[@]}"; do
  echo "==> fuzzing $t for $seconds s (corpus $work/corpus/$t, log $work/$t.log)"
  fuzz_one "$t" &
  [ "$(jobs -rp | wc -l)" -lt "$cores" ] || wait -n
done
wait

failed=0
summary=()
for t in "${targets[@]}"; do
  log="$work/$t.log"
  status=$(cat "$work/$t.status")
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' | tail -1 || true)
  cov=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]* ft: [0-9]*' | tail -1 || true)
  if [ "$status" -eq 0 ]; then
    result="ok"
  else
    failed=1
    artifact=$(grep -o "Test unit written to .*" "$log" | sed 's/Test unit written to //' | tail -1 || true)
    result="FAILED (exit $status) reproducer: ${artifact:-see $log}"
    grep -E "Fatal error|Precondition failed|ERROR: AddressSanitizer|ERROR: libFuzzer|SUMMARY" "$log" | head -5 || true
  fi
  summary+=("$(printf '%-14s %8s execs  %-18s %s' "$t" "${execs:-?}" "${cov:-}" "$result")")
done

echo "==> fuzz summary ($seconds s per target)"
printf '    %s\n' "${summary[@]}"
exit "$failed"
