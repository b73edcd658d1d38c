import FleetcastTestSupport
import Foundation
import GNSS
import MQTT

/// `fleetcast-bench e2e [--fixes N] [--runs R] [--inflight N] [--counter-qos 0|1] [--agent PATH] [--bridge PATH]
/// [--python PATH] [--save-recording PATH]`
///
/// End-to-end throughput, NMEA file to subscriber, of the real agent binary against a Python
/// bridge written the usual way (`deploy/bench/nmea_bridge.py`: pynmea2 + paho-mqtt).
///
/// Starts a mosquitto on a free loopback port and writes a recording of N (default 30,000)
/// distinct 10 Hz epochs from ``NMEASentenceGenerator`` — RMC, GGA, GSA, VTG and GST, no heading
/// sentence, so both sides publish exactly one fix per epoch and nothing else. Each run
/// subscribes (our `MQTTClient`, QoS `--counter-qos`, default 1) to the vehicle's fix topic, then starts
/// `fleetcast-agent run --source replay:FILE?speed=max …` (or the bridge) and stops the clock
/// when the last fix has arrived and the process has exited: fixes/s. Both publish at QoS 1,
/// retained, with `--inflight` (default 100) messages awaiting PUBACK at once. R runs each
/// (default 5), alternating; prints every run, the median and best, and the ratio of medians;
/// and the CPU time each process used per fix (user plus system, from `wait4(2)`: its start,
/// the replay and its stop), with the ratio of those medians.
/// `--save-recording PATH` also writes the recording to PATH, to rerun either side by hand.
func runEndToEndBenchmark(arguments: [String]) async {
    let fixes = intOption(arguments, "--fixes", 30_000)
    let runs = intOption(arguments, "--runs", 5)
    let inflight = intOption(arguments, "--inflight", 100)
    let agent = agentExecutable(arguments)
    let bridge = stringOption(arguments, "--bridge", "deploy/bench/nmea_bridge.py")
    let python = stringOption(arguments, "--python", "python3")
    let counterQoS: MQTTQoS = stringOption(arguments, "--counter-qos", "1") == "0" ? .atMostOnce : .atLeastOnce
    let fm = FileManager.default

    guard fm.isExecutableFile(atPath: agent) else {
        print("e2e: no fleetcast-agent at \(agent) (build it next to the bench, or pass --agent PATH)")
        return
    }
    let pythonReady = pythonHasModules(python)
    if !pythonReady {
        print("e2e: \(python) lacks paho-mqtt or pynmea2 (pip install paho-mqtt pynmea2); Python bridge skipped")
    } else if !fm.fileExists(atPath: bridge) {
        print("e2e: no bridge script at \(bridge) (run from the package root or pass --bridge PATH)")
        return
    }

    let directory: String
    do {
        directory = try makeTemporaryDirectory(prefix: "fleetcast-bench-e2e")
    } catch {
        print("e2e: cannot make a temporary directory: \(error)")
        return
    }
    defer { try? fm.removeItem(atPath: directory) }

    guard let start = UTCTimestamp(year: 2026, month: 3, day: 2, hour: 8, minute: 0, second: 0) else { return }
    let epochs = SyntheticDrive.epochs(count: fixes, start: start, rateHz: 10)
    let recording = SyntheticDrive.recording(epochs, kinds: ["RMC", "GGA", "GSA", "VTG", "GST"])
    let file = "\(directory)/drive.nmea"
    guard fm.createFile(atPath: file, contents: Data(recording)) else {
        print("e2e: cannot write \(file)")
        return
    }
    if let i = arguments.firstIndex(of: "--save-recording"), i + 1 < arguments.count {
        if !fm.createFile(atPath: arguments[i + 1], contents: Data(recording)) {
            print("e2e: cannot write \(arguments[i + 1])")
        }
    }
    let configuration = "\(directory)/agent.yaml"
    do {
        try "broker:\n  maxInflight: \(inflight)\nlog:\n  level: warning\n"
            .write(toFile: configuration, atomically: true, encoding: .utf8)
    } catch {
        print("e2e: cannot write \(configuration): \(error)")
        return
    }

    let broker: BenchBroker
    do {
        broker = try await BenchBroker.start(inflight: inflight)
    } catch {
        print("e2e: cannot start mosquitto: \(error)")
        return
    }
    print("e2e: load average \(loadAverage()) (1, 5, 15 min)")
    print(
        "e2e: \(fixes) epochs at 10 Hz (RMC GGA GSA VTG GST), \(fixed(Double(recording.count) / 1_048_576, 1)) MiB; broker mosquitto on \(broker.url)"
    )
    print("e2e: agent \(agent); QoS 1 retained, \(inflight) in flight; counter: MQTTClient QoS \(counterQoS.rawValue) subscription")

    var ours: [Double] = []
    var theirs: [Double] = []
    var ourCPU: [Double] = []
    var theirCPU: [Double] = []
    var allArrived = true
    for run in 1...runs {
        let vehicle = "bench-\(run)"
        let state = "\(directory)/state-\(run)"
        try? fm.createDirectory(atPath: state, withIntermediateDirectories: true)
        let agentArguments = [
            "run", "--source", "replay:\(file)?speed=max", "--vehicle", vehicle, "--broker", broker.url,
            "--state-dir", state, "--config", configuration,
        ]
        if let result = await report(
            "fleetcast-agent", run: run, expected: fixes, executable: agent, arguments: agentArguments,
            name: "agent-\(run)", directory: directory, broker: broker, topic: "fleet/\(vehicle)/fix", counterQoS: counterQoS)
        {
            ours.append(result.rate)
            if let cpu = result.cpuPerFix { ourCPU.append(cpu) }
            allArrived = allArrived && result.complete
        }
        guard pythonReady else { continue }
        let pyVehicle = "py-\(run)"
        let bridgeArguments = [python, bridge, "127.0.0.1", String(broker.port), file, pyVehicle, String(inflight)]
        if let result = await report(
            "python bridge  ", run: run, expected: fixes, executable: "/usr/bin/env", arguments: bridgeArguments,
            name: "bridge-\(run)", directory: directory, broker: broker, topic: "fleet/\(pyVehicle)/fix", counterQoS: counterQoS)
        {
            theirs.append(result.rate)
            if let cpu = result.cpuPerFix { theirCPU.append(cpu) }
            allArrived = allArrived && result.complete
        }
    }
    await broker.shutdown()

    print("e2e: fleetcast-agent median \(Int(median(ours))) fixes/s, best \(Int(ours.max() ?? 0)) (\(ours.count) runs)")
    if !theirs.isEmpty {
        print("e2e: python bridge   median \(Int(median(theirs))) fixes/s, best \(Int(theirs.max() ?? 0)) (\(theirs.count) runs)")
        print("e2e: ratio of medians \(fixed(median(ours) / max(median(theirs), 1e-9), 1))x (goal >= 5x)")
    }
    if !ourCPU.isEmpty {
        print("e2e: CPU per fix, fleetcast-agent median \(fixed(median(ourCPU), 1)) us (\(ourCPU.count) runs)")
    }
    if !ourCPU.isEmpty, !theirCPU.isEmpty {
        print("e2e: CPU per fix, python bridge   median \(fixed(median(theirCPU), 1)) us (\(theirCPU.count) runs)")
        print("e2e: CPU per fix, python bridge / fleetcast-agent: \(fixed(median(theirCPU) / max(median(ourCPU), 1e-9), 1))x (goal >= 5x)")
    }
    print("e2e: every fix arrived in every run: \(allArrived ? "yes" : "NO")")
    print("e2e: load average \(loadAverage()) (1, 5, 15 min)")
}

/// Runs one measurement and prints its line; returns fixes/s, the process's CPU time per fix
/// (microseconds), and whether every fix arrived with a zero exit status, or nil when the run
/// could not be made.
private func report(
    _ label: String, run: Int, expected: Int, executable: String, arguments: [String], name: String,
    directory: String, broker: BenchBroker, topic: String, counterQoS: MQTTQoS
) async -> (rate: Double, cpuPerFix: Double?, complete: Bool)? {
    do {
        let result = try await BenchRun.measure(
            executable: executable, arguments: arguments, name: name, directory: directory,
            broker: broker, topic: topic, counterQoS: counterQoS, expected: expected, timeout: .seconds(300))
        let counted = result.counter.distinct
        let rate = Double(counted) / result.seconds
        let status = result.exitStatus.map { "exit \($0)" } ?? "killed after 300 s"
        let duplicates = result.counter.messages - counted
        let cpuPerFix = result.cpuTime.map { ($0.user + $0.system).seconds * 1e6 / Double(max(1, expected)) }
        let cpu = result.cpuTime.map {
            "; CPU \(fixed($0.user.seconds, 2)) s user + \(fixed($0.system.seconds, 2)) s system = \(fixed(cpuPerFix ?? 0, 1)) us per fix"
        }
        print(
            "e2e: run \(run) \(label) \(counted)/\(expected) fixes (\(duplicates) duplicates) in \(fixed(result.seconds, 3)) s = \(Int(rate)) fixes/s, \(status)\(cpu ?? "")"
        )
        let complete = counted == expected && result.exitStatus == 0
        if !complete { print("e2e:   output: \(result.output)") }
        return (rate, cpuPerFix, complete)
    } catch {
        print("e2e: run \(run) \(label) failed: \(error)")
        return nil
    }
}

/// True when `python` can import paho-mqtt and pynmea2.
private func pythonHasModules(_ python: String) -> Bool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [python, "-c", "import paho.mqtt.client, pynmea2"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
}
