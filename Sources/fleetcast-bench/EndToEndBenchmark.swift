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
///
/// `fleetcast-bench cpu [--fixes N] [--runs R] [--cfloor FILE.c] …` is the same measurement on
/// a drive with a heading (RMC, GGA, GSA, VTG and HDT; default 20,000 epochs, 3 runs), with a
/// third contender: the C floor of a libmosquitto bridge (`--cfloor`, default
/// `../shared/tools/cfloor.c`, built with `cc -O2 … -lmosquitto`: strtok, snprintf, QoS 1 with 64
/// in flight, no outbox, no heading). It prints CPU per fix of the three, side by side, and the
/// two ratios the README quotes: the agent against the floor (goal at most 2x) and the Python
/// bridge against the agent (goal at least 5x).
func runEndToEndBenchmark(arguments: [String], cpuMode: Bool = false) async {
    let tag = cpuMode ? "cpu" : "e2e"
    let fixes = intOption(arguments, "--fixes", cpuMode ? 20_000 : 30_000)
    let runs = intOption(arguments, "--runs", cpuMode ? 3 : 5)
    let inflight = intOption(arguments, "--inflight", 100)
    let agent = agentExecutable(arguments)
    let bridge = stringOption(arguments, "--bridge", "deploy/bench/nmea_bridge.py")
    let python = stringOption(arguments, "--python", "python3")
    let counterQoS: MQTTQoS = stringOption(arguments, "--counter-qos", "1") == "0" ? .atMostOnce : .atLeastOnce
    let fm = FileManager.default

    guard fm.isExecutableFile(atPath: agent) else {
        print("\(tag): no fleetcast-agent at \(agent) (build it next to the bench, or pass --agent PATH)")
        return
    }
    let pythonReady = pythonHasModules(python)
    if !pythonReady {
        print("\(tag): \(python) lacks paho-mqtt or pynmea2 (pip install paho-mqtt pynmea2); Python bridge skipped")
    } else if !fm.fileExists(atPath: bridge) {
        print("\(tag): no bridge script at \(bridge) (run from the package root or pass --bridge PATH)")
        return
    }

    let directory: String
    do {
        directory = try makeTemporaryDirectory(prefix: "fleetcast-bench-\(tag)")
    } catch {
        print("\(tag): cannot make a temporary directory: \(error)")
        return
    }
    defer { try? fm.removeItem(atPath: directory) }

    var cfloor: String?
    if cpuMode {
        let source = stringOption(arguments, "--cfloor", "../shared/tools/cfloor.c")
        cfloor = buildCFloor(source: source, directory: directory)
        if cfloor == nil { print("cpu: the C floor could not be built from \(source) (pass --cfloor FILE.c); left out") }
    }

    guard let start = UTCTimestamp(year: 2026, month: 3, day: 2, hour: 8, minute: 0, second: 0) else { return }
    let epochs = SyntheticDrive.epochs(count: fixes, start: start, rateHz: 10)
    let kinds: Set<String> = cpuMode ? ["RMC", "GGA", "GSA", "VTG", "HDT"] : ["RMC", "GGA", "GSA", "VTG", "GST"]
    let recording = SyntheticDrive.recording(epochs, kinds: kinds)
    let file = "\(directory)/drive.nmea"
    guard fm.createFile(atPath: file, contents: Data(recording)) else {
        print("\(tag): cannot write \(file)")
        return
    }
    if let i = arguments.firstIndex(of: "--save-recording"), i + 1 < arguments.count {
        if !fm.createFile(atPath: arguments[i + 1], contents: Data(recording)) {
            print("\(tag): cannot write \(arguments[i + 1])")
        }
    }
    let configuration = "\(directory)/agent.yaml"
    do {
        try "broker:\n  maxInflight: \(inflight)\nlog:\n  level: warning\n"
            .write(toFile: configuration, atomically: true, encoding: .utf8)
    } catch {
        print("\(tag): cannot write \(configuration): \(error)")
        return
    }

    let broker: BenchBroker
    do {
        broker = try await BenchBroker.start(inflight: inflight)
    } catch {
        print("\(tag): cannot start mosquitto: \(error)")
        return
    }
    print("\(tag): load average \(loadAverage()) (1, 5, 15 min)")
    print(
        "\(tag): \(fixes) epochs at 10 Hz (\(cpuMode ? "RMC GGA GSA VTG HDT" : "RMC GGA GSA VTG GST")), \(fixed(Double(recording.count) / 1_048_576, 1)) MiB; broker mosquitto on \(broker.url)"
    )
    print("\(tag): agent \(agent); QoS 1 retained, \(inflight) in flight; counter: MQTTClient QoS \(counterQoS.rawValue) subscription")

    /// One program measured: its label, how to start it for a run, and the topic it publishes fixes on.
    struct Contender {
        var label: String
        var start: (Int) -> (executable: String, arguments: [String], topic: String)
        var rates: [Double] = []
        var cpu: [Double] = []
    }
    var contenders = [
        Contender(label: "fleetcast-agent") { run in
            let vehicle = "bench-\(run)"
            let state = "\(directory)/state-\(run)"
            try? fm.createDirectory(atPath: state, withIntermediateDirectories: true)
            return (
                agent,
                [
                    "run", "--source", "replay:\(file)?speed=max", "--vehicle", vehicle, "--broker", broker.url,
                    "--state-dir", state, "--config", configuration,
                ], "fleet/\(vehicle)/fix"
            )
        }
    ]
    if pythonReady {
        contenders.append(
            Contender(label: "python bridge  ") { run in
                (
                    "/usr/bin/env", [python, bridge, "127.0.0.1", String(broker.port), file, "py-\(run)", String(inflight)],
                    "fleet/py-\(run)/fix"
                )
            })
    }
    if let cfloor {
        contenders.append(Contender(label: "C floor        ") { _ in (cfloor, [file, String(broker.port)], "fleet/cfloor/fix") })
    }
    var allArrived = true
    for run in 1...runs {
        for index in contenders.indices {
            let (executable, programArguments, topic) = contenders[index].start(run)
            if let result = await report(
                contenders[index].label, tag: tag, run: run, expected: fixes, executable: executable, arguments: programArguments,
                name: "\(index)-\(run)", directory: directory, broker: broker, topic: topic, counterQoS: counterQoS)
            {
                contenders[index].rates.append(result.rate)
                if let cpu = result.cpuPerFix { contenders[index].cpu.append(cpu) }
                allArrived = allArrived && result.complete
            }
        }
    }
    await broker.shutdown()

    for contender in contenders {
        let rates = contender.rates
        print("\(tag): \(contender.label) median \(Int(median(rates))) fixes/s, best \(Int(rates.max() ?? 0)) (\(rates.count) runs)")
    }
    if contenders.count > 1, contenders[0].label == "fleetcast-agent", contenders[1].label.hasPrefix("python") {
        print("\(tag): ratio of medians \(fixed(median(contenders[0].rates) / max(median(contenders[1].rates), 1e-9), 1))x (goal >= 5x)")
    }
    for contender in contenders where !contender.cpu.isEmpty {
        print("\(tag): CPU per fix, \(contender.label) median \(fixed(median(contender.cpu), 1)) us (\(contender.cpu.count) runs)")
    }
    let ours = contenders[0].cpu
    if let python = contenders.first(where: { $0.label.hasPrefix("python") })?.cpu, !python.isEmpty, !ours.isEmpty {
        print("\(tag): CPU per fix, python bridge / fleetcast-agent: \(fixed(median(python) / max(median(ours), 1e-9), 1))x (goal >= 5x)")
    }
    if let floor = contenders.first(where: { $0.label.hasPrefix("C floor") })?.cpu, !floor.isEmpty, !ours.isEmpty {
        print("\(tag): CPU per fix, fleetcast-agent / C floor: \(fixed(median(ours) / max(median(floor), 1e-9), 2))x (goal <= 2x)")
    }
    print("\(tag): every fix arrived in every run: \(allArrived ? "yes" : "NO")")
    print("\(tag): load average \(loadAverage()) (1, 5, 15 min)")
}

/// Builds the C floor (`cc -O2 SOURCE -lmosquitto`) into `directory`; its path, or nil.
private func buildCFloor(source: String, directory: String) -> String? {
    guard FileManager.default.fileExists(atPath: source) else { return nil }
    let output = "\(directory)/cfloor"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["cc", "-O2", "-o", output, source, "-lmosquitto"]
    do { try process.run() } catch { return nil }
    process.waitUntilExit()
    return process.terminationStatus == 0 ? output : nil
}

/// Runs one measurement and prints its line; returns fixes/s, the process's CPU time per fix
/// (microseconds), and whether every fix arrived with a zero exit status, or nil when the run
/// could not be made.
private func report(
    _ label: String, tag: String, run: Int, expected: Int, executable: String, arguments: [String], name: String,
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
            "\(tag): run \(run) \(label) \(counted)/\(expected) fixes (\(duplicates) duplicates) in \(fixed(result.seconds, 3)) s = \(Int(rate)) fixes/s, \(status)\(cpu ?? "")"
        )
        let complete = counted == expected && result.exitStatus == 0
        if !complete { print("\(tag):   output: \(result.output)") }
        return (rate, cpuPerFix, complete)
    } catch {
        print("\(tag): run \(run) \(label) failed: \(error)")
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
