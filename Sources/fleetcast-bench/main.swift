// fleetcast-bench: prints speed figures. Usage: fleetcast-bench [decode|hub|all|mqtt|subscribe|watch|e2e|cpu|latency|outbox|drain|footprint|record|serve|wire|nats|operations|soak] [options]
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
let which = arguments.first ?? "all"
if which == "decode" || which == "all" { await runDecodeBenchmark(arguments: Array(arguments.dropFirst())) }
if which == "hub" || which == "all" { await runHubBenchmark(arguments: Array(arguments.dropFirst())) }
if which == "subscribe" { await runSubscribeBenchmark(arguments: Array(arguments.dropFirst())) }  // one subscribe call with 1,000 filters
if which == "mqtt" { await runMQTTBenchmark(arguments: Array(arguments.dropFirst())) }  // starts its own mosquitto
if which == "watch" || which == "all" { await runFleetWatchBenchmark(arguments: Array(arguments.dropFirst())) }
if which == "e2e" { await runEndToEndBenchmark(arguments: Array(arguments.dropFirst())) }  // starts mosquitto, runs the agent binary
// cpu: CPU per fix of the agent, the Python bridge and the C floor on a drive with headings
if which == "cpu" { await runEndToEndBenchmark(arguments: Array(arguments.dropFirst()), cpuMode: true) }
if which == "outbox" { await runOutboxBenchmark(arguments: Array(arguments.dropFirst())) }  // SQLite outbox store
if which == "drain" { await runDrainBenchmark(arguments: Array(arguments.dropFirst())) }  // 12,000-event backlog to mosquitto
// footprint: the agent binary at 10 Hz: RSS, CPU, sizes
if which == "footprint" { await runFootprintBenchmark(arguments: Array(arguments.dropFirst())) }
if which == "latency" { await runLatencyBenchmark(arguments: Array(arguments.dropFirst())) }  // pty + mosquitto + agent binary
if which == "record" { await runRecordBenchmark(arguments: Array(arguments.dropFirst())) }  // PostgreSQL + mosquitto + fleet-watch record
// serve: mosquitto, fleet-watch serve and browsers that never read
if which == "serve" { await runServeBenchmark(arguments: Array(arguments.dropFirst())) }
// wire: bytes on the wire per fix over TLS (tcpdump on loopback), every fix, 1 per 30 s, parked
if which == "wire" { await runWireBenchmark(arguments: Array(arguments.dropFirst())) }
// nats: a 3-node NATS cluster (MQTT 3.1.1): messages/s through 1 and 3 nodes, fail-over time
if which == "nats" { await runNATSBenchmark(arguments: Array(arguments.dropFirst())) }
// operations: trips and zones per second of fixes (in memory)
if which == "operations" { await runOperationsBenchmark(arguments: Array(arguments.dropFirst())) }
// soak: agents, recorders and a watcher under seeded faults, judged by an oracle of its own (exit 1 when it fails)
if which == "soak", await !runSoakBenchmark(arguments: Array(arguments.dropFirst())) { exit(1) }
