import FleetcastTestSupport
import Foundation

/// `fleetcast-bench soak --minutes N --seed S [--agents K] [--agent PATH]`: the fleet under a
/// seeded random schedule of faults, judged by an oracle of its own.
///
/// Real parts, started here: mosquitto (persistence on), PostgreSQL, `K` built agents on `sim:`
/// at 10 Hz (every fix, the default policy, a batched uplink, in turn), each through its own
/// TCP proxy, two `fleet-watch record` in one share group, and a `fleet-watch --json` watcher.
/// One fault at a time, chosen with the seed, then its recovery: a link cut (the proxy killed
/// for 1 to 6 s), a broker restart, an agent killed with SIGKILL or stopped with SIGTERM and
/// started again, a recorder killed with SIGKILL and started again.
///
/// The oracle reuses none of the code under test: after each fault it reads the retained
/// status of every agent with `mosquitto_sub` and holds it against the agent's true state
/// (online while it runs with its link up, offline while its link is cut), and a status that
/// has not come true 10 s later is *stuck*; at the end (links restored, every agent stopped
/// cleanly, the recorders idle) its own SQL over the stored rows finds, per vehicle and
/// numbering run, the numbers missing between the first and the last (a hole is a lost
/// message), what each agent numbered after the last stored one (its outbox's `nextSeq`,
/// read with `sqlite3`), what is left in the outboxes, and compares each agent's last status's
/// `dropped` with that truth. It prints the faults by kind, the rows, what was lost and what
/// was stuck, and exits 1 unless nothing was lost or stuck.
///
/// `--agent PATH` runs another agent binary (an older build, to show that the oracle fails it).
func runSoakBenchmark(arguments: [String]) async -> Bool {
    let minutes = Double(stringOption(arguments, "--minutes", "2")) ?? 2
    let seed = UInt64(stringOption(arguments, "--seed", "1")) ?? 1
    let agents = max(1, intOption(arguments, "--agents", 3))
    let agentBinary = stringOption(arguments, "--agent", builtProduct("fleetcast-agent"))
    print("soak: \(minutes) min, seed \(seed), \(agents) agents (\(agentBinary)), 2 recorders in one share group, a watcher")
    do {
        return try await withPostgres { postgres in
            let soak = try await SoakHarness.start(postgres: postgres, agents: agents, agentBinary: agentBinary, seed: seed) { print($0) }
            defer { soak.killAll() }
            try await soak.run(until: .now + .seconds(minutes * 60))
            return try await soak.judge()
        }
    } catch {
        print("soak: failed: \(error)")
        return false
    }
}
