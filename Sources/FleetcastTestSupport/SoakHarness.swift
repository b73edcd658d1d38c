import Foundation

/// The fleet under a seeded random schedule of faults, judged by an oracle of its own: what
/// `fleetcast-bench soak` runs (see its documentation there and in docs/benchmarks.md). Real
/// parts: mosquitto with persistence, the PostgreSQL given, built agents behind TCP proxies, two
/// `fleet-watch record` in one share group, a watcher and a `mosquitto_sub` witness. Used from
/// one task.
public final class SoakHarness {
    enum Fault: String, CaseIterable {
        case linkCut = "link cut"
        case brokerRestart = "broker restart"
        case agentKill = "agent SIGKILL"
        case agentStop = "agent SIGTERM"
        case recorderKill = "recorder SIGKILL"
    }

    struct Agent {
        let vehicle: String
        let state: String
        let environment: [String: String]
        var proxy: TCPProxy
        var process: TestProcess
    }

    let postgres: TestPostgres
    let database: String
    let broker: TestBroker
    let agentBinary: String
    let directory: String
    var agents: [Agent] = []
    var recorders: [TestProcess?] = [nil, nil]
    var watcher: TestProcess?
    /// `mosquitto_sub` with a persistent session at QoS 1 on `…/fix` and `…/backlog` (not the
    /// batched agents' binary `…/batch`): what reached the broker, by a client
    /// that is not ours (to tell a loss between agent and broker from one between broker and
    /// recorders).
    var witness: TestProcess?
    var generator: SplitMix64
    var faults: [Fault: Int] = [:]
    var stuck: [String] = []
    var checks = 0
    let started = ContinuousClock.now

    /// Where the report's lines go.
    let say: (String) -> Void

    private init(
        postgres: TestPostgres, database: String, broker: TestBroker, agentBinary: String, directory: String, seed: UInt64,
        say: @escaping (String) -> Void
    ) {
        self.say = say
        (self.postgres, self.database, self.broker, self.agentBinary) = (postgres, database, broker, agentBinary)
        self.directory = directory
        self.generator = SplitMix64(seed: seed)
    }

    /// Starts everything for `count` agents of `agentBinary` (every fix, the default policy,
    /// batched, in turn), with faults chosen by `seed`; returns once every agent is online.
    /// `say` takes each line of the report (the bench prints them).
    public static func start(
        postgres: TestPostgres, agents count: Int, agentBinary: String, seed: UInt64, say: @escaping (String) -> Void
    ) async throws -> SoakHarness {
        let database = try await postgres.createDatabase()
        let broker = try await TestBroker.start(tls: false) { port, directory in
            """
            user root
            persistence true
            persistence_location \(directory)/
            log_dest stderr
            log_type error
            log_type warning
            log_type notice
            log_type information
            listener \(port) 127.0.0.1
            allow_anonymous true
            max_queued_messages 100000

            """
        }
        let soak = SoakHarness(
            postgres: postgres, database: database, broker: broker, agentBinary: agentBinary,
            directory: try makeTemporaryDirectory(prefix: "soak"), seed: seed, say: say)
        for index in 0..<2 { soak.recorders[index] = try soak.startRecorder(index) }
        soak.witness = try TestProcess(
            "/usr/bin/mosquitto_sub",
            [
                "-h", "127.0.0.1", "-p", "\(broker.port)", "-i", "soak-witness", "-c", "-q", "1", "-t", "fleet/+/fix", "-t",
                "fleet/+/backlog", "-v",
            ],
            directory: soak.directory, name: "witness")
        soak.watcher = try TestProcess(
            builtProduct("fleet-watch"), ["--broker", broker.url, "--json"], directory: soak.directory, name: "watcher")
        for index in 0..<count {
            let vehicle = "soak-\(index)"
            let environment: [String: String] =
                switch index % 3 {
                case 0: ["FLEETCAST_REPORT_EVERY_FIX": "1"]
                case 1: [:]
                default: ["FLEETCAST_REPORT_EVERY_FIX": "1", "FLEETCAST_UPLINK_BATCH": "1"]
                }
            let state = "\(soak.directory)/\(vehicle)"
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
            let proxy = try await TCPProxy(to: broker.port)
            let process = try soak.startAgent(vehicle: vehicle, state: state, port: proxy.port, environment: environment)
            soak.agents.append(Agent(vehicle: vehicle, state: state, environment: environment, proxy: proxy, process: process))
        }
        try await soak.expectStatuses(online: Set(soak.agents.map(\.vehicle)), after: "start")
        return soak
    }

    func startAgent(vehicle: String, state: String, port: Int, environment: [String: String]) throws -> TestProcess {
        try TestProcess(
            agentBinary,
            [
                "run", "--source", "sim:?rate=10", "--vehicle", vehicle, "--broker", "mqtt://127.0.0.1:\(port)", "--state-dir", state,
            ], directory: directory, name: "\(vehicle)-\(UUID().uuidString.prefix(6))", environment: environment)
    }

    func startRecorder(_ index: Int) throws -> TestProcess {
        try TestProcess(
            builtProduct("fleet-watch"),
            [
                "record", "--broker", broker.url, "--share-group", "soak", "--client-id", "soak-recorder-\(index)", "--postgres",
                "postgres://\(postgres.user)@127.0.0.1:\(postgres.port)/\(database)?sslmode=disable", "--log-level", "notice",
            ], directory: directory, name: "recorder-\(index)-\(UUID().uuidString.prefix(6))",
            environment: ["PGPASSWORD": postgres.password ?? ""])
    }

    /// Kills every process it started (the broker and PostgreSQL stop with their owners).
    public func killAll() {
        for agent in agents { agent.process.send(SIGKILL) }
        for recorder in recorders { recorder?.send(SIGKILL) }
        watcher?.send(SIGKILL)
        witness?.send(SIGKILL)
    }

    private func seconds(_ range: ClosedRange<Double>) -> Duration {
        .milliseconds(Int64(Double.random(in: range, using: &generator) * 1000))
    }

    /// Faults, one at a time, until `deadline`.
    public func run(until deadline: ContinuousClock.Instant) async throws {
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: seconds(1...4))
            let fault = Fault.allCases.randomElement(using: &generator)!
            let index = Int.random(in: 0..<agents.count, using: &generator)
            faults[fault, default: 0] += 1
            let all = Set(agents.map(\.vehicle))
            let elapsed = Int((ContinuousClock.now - started).components.seconds)
            say(
                "  \(elapsed)s: \(fault.rawValue)\(fault == .brokerRestart ? "" : fault == .recorderKill ? " \(index % 2)" : " \(agents[index].vehicle)")"
            )
            switch fault {
            case .linkCut:
                let vehicle = agents[index].vehicle
                await agents[index].proxy.kill()
                try await expectStatuses(online: all.subtracting([vehicle]), offline: [vehicle], after: "\(fault.rawValue) of \(vehicle)")
                try await Task.sleep(for: seconds(0...5))
                agents[index].proxy = try await TCPProxy(port: agents[index].proxy.port, to: broker.port)
            case .brokerRestart:
                try await broker.restart()
            case .agentKill, .agentStop:
                let agent = agents[index]
                agent.process.send(fault == .agentKill ? SIGKILL : SIGTERM)
                _ = await agent.process.waitForExit()
                try await expectStatuses(
                    online: all.subtracting([agent.vehicle]), offline: [agent.vehicle], after: "\(fault.rawValue) of \(agent.vehicle)")
                agents[index].process = try startAgent(
                    vehicle: agent.vehicle, state: agent.state, port: agent.proxy.port, environment: agent.environment)
            case .recorderKill:
                let which = index % 2
                recorders[which]?.send(SIGKILL)
                _ = await recorders[which]?.waitForExit()
                try await Task.sleep(for: seconds(0...3))
                recorders[which] = try startRecorder(which)
            }
            try await expectStatuses(online: all, after: "recovery from \(fault.rawValue)")
        }
    }

    /// The retained status of each agent, read with `mosquitto_sub`: `vehicle` → `state`.
    func retainedStates() async throws -> [String: String] {
        let process = try TestProcess(
            "/usr/bin/mosquitto_sub",
            ["-h", "127.0.0.1", "-p", "\(broker.port)", "-t", "fleet/+/status", "--retained-only", "-W", "2", "-v"],
            directory: directory, name: "status-\(UUID().uuidString.prefix(8))")
        _ = try await process.waitForExit(timeout: .seconds(10))
        var states: [String: String] = [:]
        for line in process.standardOutput.split(separator: "\n") {
            guard let space = line.firstIndex(of: " ") else { continue }
            let vehicle = line[..<space].split(separator: "/").dropFirst().first.map(String.init) ?? ""
            let object = (try? JSONSerialization.jsonObject(with: Data(line[line.index(after: space)...].utf8))) as? [String: Any]
            states[vehicle] = object?["state"] as? String
        }
        return states
    }

    /// Waits up to 10 s for the retained statuses to say the truth; what does not is stuck.
    func expectStatuses(online: Set<String>, offline: Set<String> = [], after event: String) async throws {
        checks += 1
        let deadline = ContinuousClock.now + .seconds(10)
        var states: [String: String] = [:]
        repeat {
            states = try await retainedStates()
            if online.allSatisfy({ states[$0] == "online" }) && offline.allSatisfy({ states[$0] == "offline" }) { return }
            try await Task.sleep(for: .milliseconds(250))
        } while ContinuousClock.now < deadline
        let wrong =
            online.filter { states[$0] != "online" }.sorted().map { "\($0) \(states[$0] ?? "none") (running)" }
            + offline.filter { states[$0] != "offline" }.sorted().map { "\($0) \(states[$0] ?? "none") (away)" }
        stuck.append("after \(event): \(wrong.joined(separator: ", "))")
        say("  stuck after \(event): \(wrong.joined(separator: ", "))")
    }

    /// Stops every agent cleanly, judges what was stored, prints the report; `true` when nothing
    /// was lost or stuck.
    public func judge() async throws -> Bool {
        // Every agent stopped cleanly over a working link: it sends what it holds, then offline.
        for agent in agents {
            agent.process.send(SIGTERM)
            _ = await agent.process.waitForExit()
        }
        try await expectStatuses(online: [], offline: Set(agents.map(\.vehicle)), after: "the final stop")
        // The recorders write what the broker has for them; done when the rows stop moving.
        var last = -1
        var rows = 0
        while true {
            rows = Int(try await postgres.psql(Self.rowCount, database: database)) ?? 0
            if rows == last { break }
            last = rows
            try await Task.sleep(for: .seconds(3))
        }
        var lost = 0
        var report: [String] = []
        for agent in agents {
            let runs = try await postgres.psql(
                """
                SELECT run, min(seq), max(seq), count(*) FROM (SELECT run, seq FROM fleetcast_fixes WHERE vehicle = '\(agent.vehicle)'
                UNION ALL SELECT run, seq FROM fleetcast_headings WHERE vehicle = '\(agent.vehicle)') stored GROUP BY run ORDER BY run
                """, database: database)
            var holes = 0
            var lastRun: (run: Int, max: Int)?
            var missing: [String] = []
            for line in runs.split(separator: "\n") {
                let cells = line.split(separator: "|").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
                guard cells.count == 4 else { continue }
                let hole = cells[2] - cells[1] + 1 - cells[3]
                holes += hole
                lastRun = (cells[0], cells[2])
                guard hole > 0 else { continue }
                let numbers = try await postgres.psql(
                    """
                    SELECT string_agg(s::text, ',') FROM (SELECT s FROM generate_series(\(cells[1]), \(cells[2])) s
                    EXCEPT SELECT seq FROM fleetcast_fixes WHERE vehicle = '\(agent.vehicle)' AND run = \(cells[0])
                    EXCEPT SELECT seq FROM fleetcast_headings WHERE vehicle = '\(agent.vehicle)' AND run = \(cells[0])
                    ORDER BY 1 LIMIT 20) m
                    """, database: database)
                // Which of them the witness saw: those reached the broker.
                let seen = (witness?.standardOutput ?? "").split(separator: "\n").flatMap { line -> [Int] in
                    let parts = line.split(separator: " ", maxSplits: 1)
                    guard parts.count == 2, parts[0] == "fleet/\(agent.vehicle)/fix" || parts[0] == "fleet/\(agent.vehicle)/backlog",
                        let object = (try? JSONSerialization.jsonObject(with: Data(parts[1].utf8))) as? [String: Any]
                    else { return [] }
                    // A live fix, or a backlog batch's events.
                    let events = (object["events"] as? [[String: Any]]) ?? [object]
                    return events.compactMap { $0["run"] as? Int == cells[0] ? $0["seq"] as? Int : nil }
                }
                let witnessed = numbers.split(separator: ",").compactMap { Int($0) }.filter { Set(seen).contains($0) }
                missing.append("run \(cells[0]): \(numbers) (the witness saw \(witnessed))")
            }
            let outbox = "\(agent.state)/\(agent.vehicle).outbox"
            let nextSeq = Int(Self.sqlite(outbox, "SELECT value FROM meta WHERE key = 'nextSeq'")) ?? 0
            let outboxRun = Int(Self.sqlite(outbox, "SELECT value FROM meta WHERE key = 'run'")) ?? 0
            let left = Int(Self.sqlite(outbox, "SELECT count(*) FROM event")) ?? 0
            // The last run's numbers up to the clean stop's next one must all be stored.
            let tail = lastRun.map { $0.run == outboxRun ? max(0, nextSeq - 1 - $0.max) : nextSeq } ?? nextSeq
            let status = try await MosquittoCLI.retained(broker: broker, topic: "fleet/\(agent.vehicle)/status", timeoutSeconds: 2)
            let dropped = status.flatMap { line -> Int? in
                guard let space = line.firstIndex(of: " ") else { return nil }
                let object = (try? JSONSerialization.jsonObject(with: Data(line[line.index(after: space)...].utf8))) as? [String: Any]
                return object?["dropped"] as? Int
            }
            lost += holes + tail + left
            report.append(
                "  \(agent.vehicle): \(runs.split(separator: "\n").count) runs, \(holes) missing inside them \(missing), \(tail) missing at the end, \(left) left in the outbox; its status says dropped \(dropped.map(String.init) ?? "-")"
            )
        }
        let duplicates = Int(try await postgres.psql(Self.duplicateCount, database: database)) ?? 0
        say(
            "soak: faults \(Fault.allCases.map { "\($0.rawValue) \(faults[$0] ?? 0)" }.joined(separator: ", ")) (\(faults.values.reduce(0, +)) in all)"
        )
        say(
            "soak: \(rows) fixes and headings stored, \(duplicates) stored twice, \(lost) lost, \(stuck.count) of \(checks) status checks stuck"
        )
        for line in report { say(line) }
        let watcherAlive = watcher?.isRunning == true
        if !watcherAlive { say("soak: the watcher exited: \(watcher?.standardError.suffix(500) ?? "")") }
        let passed = lost == 0 && stuck.isEmpty && duplicates == 0 && watcherAlive
        say("soak: \(passed ? "PASSED" : "FAILED")")
        return passed
    }

    static let rowCount = "SELECT (SELECT count(*) FROM fleetcast_fixes) + (SELECT count(*) FROM fleetcast_headings)"
    static let duplicateCount = """
        SELECT count(*) FROM fleetcast_fixes f JOIN fleetcast_headings h USING (vehicle, run, seq)
        """

    static func sqlite(_ path: String, _ sql: String) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [path, sql]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return "" }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
