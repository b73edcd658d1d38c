import FleetcastTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The child processes the MQTT, agent and fleet-watch tests rely on: they must start with a
/// clean signal mask, stop when asked, and every wait on them must end.
@Suite(.timeLimit(.minutes(1))) struct TestProcessTests {
    @Test func childStartsWithNoSignalBlockedOrIgnoredWhateverTheSpawningThreadBlocks() async throws {
        try await withDirectory { directory in
            let sleeper = try startWithSignalsBlocked { try TestProcess("/bin/sleep", ["60"], directory: directory, name: "sleep") }
            let status = try String(contentsOfFile: "/proc/\(sleeper.pid)/status", encoding: .utf8)
            #expect(signalSet("SigBlk", in: status) == 0, "\(status)")
            // The test runner ignores SIGPIPE; the child must not. (glibc's posix_spawn leaves
            // its two internal real-time signals, 32 and 33, ignored: only 1…31 count.)
            #expect(signalSet("SigIgn", in: status).map { $0 & standardSignals } == 0, "\(status)")
            #expect(getpgid(sleeper.pid) == sleeper.pid, "the child leads its own process group")
            await sleeper.stop()
        }
    }

    @Test func stopEndsTheChildWithSIGTERMWithinTheGrace() async throws {
        try await withDirectory { directory in
            let sleeper = try startWithSignalsBlocked { try TestProcess("/bin/sleep", ["60"], directory: directory, name: "sleep") }
            let status = await sleeper.stop(grace: .seconds(30))
            // Ended by SIGTERM, not by the SIGKILL fallback after the grace. (A duration check
            // would say the same, and fail on a loaded machine.)
            #expect(sleeper.termination == .signalled(SIGTERM), "SIGTERM should end it before the SIGKILL fallback")
            #expect(status == 128 + SIGTERM)
            #expect(!sleeper.isRunning)
        }
    }

    @Test func stopEndsWhatTheChildStartedToo() async throws {
        try await withDirectory { directory in
            let shell = try TestProcess("/bin/sh", ["-c", "sleep 60 & echo $!; wait"], directory: directory, name: "sh")
            try await waitUntil("the shell to print its background pid") { shell.standardOutput.hasSuffix("\n") }
            let grandchild = try #require(Int32(shell.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(isAlive(grandchild))
            await shell.stop(grace: .seconds(5))
            #expect(shell.termination == .signalled(SIGTERM))
            try await waitUntil("the shell's sleep \(grandchild) to end") { !isAlive(grandchild) }
        }
    }

    @Test func waitForExitReturnsTheExitCode() async throws {
        try await withDirectory { directory in
            let shell = try TestProcess("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"], directory: directory, name: "sh")
            #expect(try await shell.waitForExit(timeout: .seconds(10)) == 3)
            #expect(shell.termination == .exited(3))
            #expect(shell.standardOutput == "out\n")
            #expect(shell.standardError == "err\n")
        }
    }

    @Test func boundedWaitsOnARunningChildEndAndLeaveItRunning() async throws {
        try await withDirectory { directory in
            let sleeper = try TestProcess("/bin/sleep", ["60"], directory: directory, name: "sleep")
            let error = await #expect(throws: TestSupportError.self) { try await sleeper.waitForExit(timeout: .milliseconds(200)) }
            guard case .timedOut = error else {
                Issue.record("expected a timeout, got \(String(describing: error))")
                return
            }
            // A plain wait honours cancellation, so withTimeout around it is bounded too.
            await #expect(throws: TestSupportError.self) {
                try await withTimeout(.milliseconds(200), "sleep to exit") { await sleeper.waitForExit() }
            }
            #expect(sleeper.isRunning)
            await sleeper.stop()
        }
    }

    @Test func aToolThatOverrunsIsStoppedAndReported() async throws {
        try await withDirectory { directory in
            let error = await #expect(throws: TestSupportError.self) {
                try await TestBroker.runTool("/bin/sleep", ["60"], in: directory, timeout: .milliseconds(300))
            }
            guard case .timedOut(let what, _) = error else {
                Issue.record("expected a timeout, got \(String(describing: error))")
                return
            }
            #expect(what.contains("/bin/sleep 60"))
        }
    }

    @Test func aMissingExecutableIsAnError() async throws {
        try await withDirectory { directory in
            #expect(throws: TestSupportError.self) {
                try TestProcess("/nonexistent/fleetcast-tool", [], directory: directory, name: "missing")
            }
        }
    }

    @Test func droppingARunningChildKillsIt() async throws {
        try await withDirectory { directory in
            let pid = try startAndDropSleeper(in: directory)
            try await waitUntil("the dropped sleep \(pid) to be killed") { !isAlive(pid) }
        }
    }

    @Test func mosquittoSubTimesOutByItself() async throws {
        try await withBroker { broker in
            // Started directly: `MosquittoCLI.subscribe` waits for the SUBACK in the broker's
            // log, which under load may come after a one-second `-W` has already ended it.
            let clock = ContinuousClock()
            let start = clock.now
            let process = try TestProcess(
                "/usr/bin/mosquitto_sub",
                [
                    "-h", "127.0.0.1", "-p", "\(broker.port)", "-t", "idle/#", "-C", "1", "-W", "1", "-v",
                ], directory: broker.directory, name: "mosquitto_sub-idle")
            _ = try await process.waitForExit(timeout: .seconds(10))
            #expect(start.duration(to: clock.now) < .seconds(9), "-W 1 should end it after about a second (bound loose for sanitizer runs)")
            #expect(process.standardOutput.isEmpty)
            let termination = process.termination
            #expect(
                termination != .signalled(SIGTERM) && termination != .signalled(SIGKILL),
                "it exited by itself: \(String(describing: termination))")
        }
    }

    @Test func messagesReturnsWhatArrivedWhenTheSubscriberOverruns() async throws {
        try await withBroker { broker in
            let subscriber = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/+/fix", count: 2, timeoutSeconds: 30)
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-1/fix", message: "one")
            try await waitUntil("the first message") { subscriber.messagesSoFar == ["fleet/van-1/fix one"] }
            let clock = ContinuousClock()
            let start = clock.now
            let lines = await subscriber.messages(timeout: .seconds(1))
            #expect(start.duration(to: clock.now) < .seconds(9), "1 s, then at most 2 s to stop it (bound loose for sanitizer runs)")
            #expect(lines == ["fleet/van-1/fix one"])
            #expect(!subscriber.process.isRunning)
        }
    }

    @Test func aTestCanStopTheSubscriberOnceItsMessageArrived() async throws {
        try await withBroker { broker in
            let subscriber = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/#", count: 10, timeoutSeconds: 30)
            for message in ["a", "b"] {
                try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-2/status", message: message)
            }
            try await waitUntil("both messages") { subscriber.messagesSoFar.count == 2 }
            #expect(subscriber.messagesSoFar == ["fleet/van-2/status a", "fleet/van-2/status b"])
            await subscriber.stop()
            #expect(!subscriber.process.isRunning)
        }
    }
}

/// Runs `body` in a fresh temp directory, removed afterwards.
private func withDirectory(_ body: (String) async throws -> Void) async throws {
    let directory = try makeTemporaryDirectory(prefix: "fleetcast-process-test")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try await body(directory)
}

/// Starts a process from this thread with SIGTERM and SIGALRM blocked (as a Swift
/// cooperative or Dispatch thread may have them), so the test sees whether the child
/// inherits the mask.
private func startWithSignalsBlocked(_ start: () throws -> TestProcess) throws -> TestProcess {
    var blocked = sigset_t()
    sigemptyset(&blocked)
    sigaddset(&blocked, SIGTERM)
    sigaddset(&blocked, SIGALRM)
    var previous = sigset_t()
    pthread_sigmask(SIG_BLOCK, &blocked, &previous)
    defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
    return try start()
}

/// Starts `sleep 60` and drops the only reference to it; returns its pid.
private func startAndDropSleeper(in directory: String) throws -> Int32 {
    let sleeper = try TestProcess("/bin/sleep", ["60"], directory: directory, name: "dropped-sleep")
    #expect(sleeper.isRunning)
    return sleeper.pid
}

/// Signals 1…31 in a `/proc` signal set (bit n - 1 is signal n).
private let standardSignals: UInt64 = 0x7fff_ffff

/// A signal set line (`SigBlk:`, `SigIgn:`…) of a `/proc/PID/status` text, as a bit mask.
private func signalSet(_ name: String, in status: String) -> UInt64? {
    status.split(separator: "\n").first { $0.hasPrefix("\(name):") }
        .flatMap { UInt64($0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces), radix: 16) }
}

/// True when `pid` exists and is not a zombie (an orphan's zombie lingers when PID 1 does not
/// reap it).
private func isAlive(_ pid: Int32) -> Bool {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return false }
    return !status.contains("State:\tZ")
}
