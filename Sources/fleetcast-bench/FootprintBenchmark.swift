import FleetcastTestSupport
import Foundation
import GNSS

/// `fleetcast-bench footprint [--seconds S] [--agent PATH] [--deb PATH]`
///
/// What the agent costs a vehicle: the real binary (the installed one with `--agent
/// /usr/bin/fleetcast-agent`) publishing at 10 Hz to a mosquitto on a free loopback port for
/// S seconds (default 60), twice: with `sim:?rate=10`, and with `serial:` on a pseudo-terminal
/// the bench feeds one 10 Hz epoch (RMC GGA GSA VTG HDT GST) every 100 ms. Prints per source the
/// resident memory at the end and its peak (`VmRSS`, `VmHWM` from `/proc/PID/status`, MiB),
/// split into the process's own memory (`RssAnon`: heap, stacks) and file pages it maps
/// (`RssFile`: the binary and shared libraries, clean pages the kernel can drop and share), the
/// CPU time over the measured window as a percentage of one core (`utime + stime` from
/// `/proc/PID/stat`, after a 5 s warm-up), and the sizes of the binary and, with `--deb`, of the
/// package. Also the proportional set size (`Pss` from `/proc/PID/smaps_rollup`: each shared
/// page divided by the number of processes mapping it, so libc and libcrypto count only in part
/// where other programs use them too). Goals: ≤ 16 MiB resident, ≤ 0.5 % of one core.
///
/// Run as root, the bench runs the agent as its systemd unit does: as a user that neither owns
/// its binary nor may write it (`fleetcast` where the package made it, else `nobody`), through
/// `setpriv`. That matters to the figures: the kernel frees the page cache of a file only for a
/// process that owns it or may write it (see `StartupPages`), so an agent run as root would show
/// less than a vehicle's.
func runFootprintBenchmark(arguments: [String]) async {
    let seconds = intOption(arguments, "--seconds", 60)
    let agent = agentExecutable(arguments)
    guard FileManager.default.isExecutableFile(atPath: agent) else {
        print("footprint: no fleetcast-agent at \(agent) (build it next to the bench, or pass --agent PATH)")
        return
    }
    print("footprint: agent \(agent), \(mebibytes(fileSize(agent))) MiB on disk; load average \(loadAverage())")
    let user = AgentUser.unprivileged()
    print("footprint: the agent runs as \(user.map { "\($0.name) (uid \($0.uid))" } ?? "this user (uid \(geteuid()))")")
    let deb = stringOption(arguments, "--deb", "")
    if !deb.isEmpty { print("footprint: package \(deb), \(mebibytes(fileSize(deb))) MiB") }
    for source in ["sim", "serial"] {
        do {
            let result = try await measureFootprint(agent: agent, source: source, seconds: seconds, user: user)
            print(
                """
                footprint: \(source) at 10 Hz for \(seconds) s: RSS \(mebibytes(result.rss)) MiB (peak \(mebibytes(result.peak)) MiB; \
                own \(mebibytes(result.anonymous)) MiB, mapped files \(mebibytes(result.files)) MiB; \
                PSS \(mebibytes(result.proportional)) MiB), \
                CPU \(String(format: "%.2f", result.cpuPercent)) % of one core, \(result.fixes) fixes published \
                (goals ≤ 16 MiB, ≤ 0.5 %)
                """)
        } catch {
            print("footprint: \(source) failed: \(error)")
        }
    }
}

private struct Footprint {
    var rss: Int
    var peak: Int
    var anonymous: Int
    var files: Int
    var proportional: Int
    var cpuPercent: Double
    var fixes: Int
}

private func measureFootprint(agent: String, source: String, seconds: Int, user: AgentUser?) async throws -> Footprint {
    let directory = try makeTemporaryDirectory(prefix: "fleetcast-bench-footprint")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let broker = try await BenchBroker.start(inflight: 100)
    defer { Task { await broker.shutdown() } }
    let pty = source == "serial" ? try PseudoTerminal() : nil
    defer { pty?.close() }
    let configuration = "\(directory)/agent.yaml"
    try "log:\n  level: warning\n".write(toFile: configuration, atomically: true, encoding: .utf8)
    let state = "\(directory)/state"
    try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false)
    if let user {
        // Its configuration readable, its state directory and its device its own, as the package makes them.
        chmod(directory, 0o755)
        chmod(configuration, 0o644)
        chown(state, user.uid, user.gid)
        if let pty { chown(pty.path, user.uid, user.gid) }
    }
    let uri = pty.map { "serial:\($0.path)?baud=115200" } ?? "sim:?rate=10"
    let arguments = [
        "run", "--source", uri, "--vehicle", "fp", "--broker", broker.url, "--state-dir", state, "--config", configuration,
    ]
    // setpriv execs the agent: the pid measured is the agent's.
    let (executable, commandLine) = user.map { ("/usr/bin/setpriv", $0.setprivArguments + [agent] + arguments) } ?? (agent, arguments)
    let process = try TestProcess(
        executable, commandLine, directory: directory, name: "agent-\(source)", environment: agentEveryFixEnvironment)
    // What arrives, counted by a client we did not write.
    let counter = try TestProcess(
        "/usr/bin/mosquitto_sub",
        [
            "-h", "127.0.0.1", "-p", "\(broker.port)", "-t", "fleet/fp/fix", "-q", "1",
        ], directory: directory, name: "sub-\(source)")

    // The receiver, for serial: one epoch every 100 ms on a fixed schedule, written from this
    // task (the pseudo-terminal is not shared). The first 5 s are a warm-up (connected, store
    // open, steady state); CPU time is measured over the `seconds` after it.
    let clock = ContinuousClock()
    let start = clock.now
    let warmupEpochs = 50
    let epochs = SyntheticDrive.epochs(
        count: warmupEpochs + seconds * 10, start: UTCTimestamp(millisecondsSince1970: 1_715_673_000_000), rateHz: 10)
    var cpuStart = 0
    var wallStart = start
    for (k, epoch) in epochs.enumerated() {
        try await clock.sleep(until: start.advanced(by: .milliseconds(100 * k)), tolerance: .zero)
        if k == warmupEpochs {
            cpuStart = cpuTicks(process.pid)
            wallStart = clock.now
        }
        pty?.write(SyntheticDrive.bytes(epoch))
    }
    try await clock.sleep(until: start.advanced(by: .milliseconds(100 * epochs.count)), tolerance: .zero)
    let cpuEnd = cpuTicks(process.pid)
    let wall = wallStart.duration(to: clock.now)
    let (rss, peak, anonymous, files) = residentMemory(process.pid)
    let proportional = proportionalSetSize(process.pid)
    process.send(SIGTERM)
    _ = await process.waitForExit()
    try await Task.sleep(for: .milliseconds(500))
    let fixes = counter.standardOutput.split(separator: "\n").count
    counter.send(SIGTERM)
    _ = await counter.waitForExit()
    let hz = Double(sysconf(Int32(_SC_CLK_TCK)))
    let wallSeconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
    return Footprint(
        rss: rss, peak: peak, anonymous: anonymous, files: files, proportional: proportional,
        cpuPercent: Double(cpuEnd - cpuStart) / hz / wallSeconds * 100,
        fixes: fixes)
}

/// `utime + stime` of `pid`, in clock ticks.
private func cpuTicks(_ pid: pid_t) -> Int {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return 0 }
    // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return 0 }
    return user + system
}

/// `VmRSS`, `VmHWM`, `RssAnon` and `RssFile` of `pid`, in bytes.
private func residentMemory(_ pid: pid_t) -> (rss: Int, peak: Int, anonymous: Int, files: Int) {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return (0, 0, 0, 0) }
    func kilobytes(_ key: String) -> Int {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key) }) else { return 0 }
        return (Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0) * 1024
    }
    return (kilobytes("VmRSS:"), kilobytes("VmHWM:"), kilobytes("RssAnon:"), kilobytes("RssFile:"))
}

/// `Pss` of `pid` (`/proc/PID/smaps_rollup`), in bytes; 0 where the kernel has no rollup.
private func proportionalSetSize(_ pid: pid_t) -> Int {
    guard let rollup = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8),
        let line = rollup.split(separator: "\n").first(where: { $0.hasPrefix("Pss:") }),
        let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    else { return 0 }
    return kilobytes * 1024
}

private func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
}

private func mebibytes(_ bytes: Int) -> String {
    String(format: "%.1f", Double(bytes) / 1_048_576)
}

/// The user the bench runs the agent as when it runs as root: the package's `fleetcast`, or
/// `nobody`.
private struct AgentUser {
    var name: String
    var uid: uid_t
    var gid: gid_t

    /// `nil` when the bench is not root (the agent then runs as the bench's user).
    static func unprivileged() -> AgentUser? {
        guard geteuid() == 0 else { return nil }
        for name in ["fleetcast", "nobody"] {
            if let entry = getpwnam(name) { return AgentUser(name: name, uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid) }
        }
        return nil
    }

    /// `setpriv`'s arguments to become this user, with its groups (the package's `fleetcast` is
    /// in `dialout`, the group the unit's `SupplementaryGroups=` gives it).
    var setprivArguments: [String] { ["--reuid=\(uid)", "--regid=\(gid)", "--init-groups"] }
}
