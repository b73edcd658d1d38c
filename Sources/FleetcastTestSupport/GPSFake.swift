import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Debian's gpsd, started by `gpsfake` on a loopback port and fed a recording of a receiver
/// (NMEA 0183 or binary) in a loop through a pseudo-terminal. `stop()` ends gpsfake and its
/// gpsd together, as one process group, and `start()` may follow it on the same port.
///
/// Every start runs with a fresh `TMPDIR` of its own. gpsfake names gpsd's control socket
/// `$TMPDIR/gpsfake-<its pid>.sock`, and gpsd 3.22 leaves that file behind when it stops.
/// Pids are recycled (pid_max is 32768 on the CI machine, and a CI run starts more processes
/// than that), so in a shared `/tmp` a later gpsfake can find an old socket under its own
/// name. It takes the socket for the new gpsd's, sends its pseudo-terminal to it, fails without
/// a word, and gpsd runs without a device: it answers `?WATCH` with `"devices":[]` and then
/// says nothing. A test then sees a gpsd that is silent for no reason.
public final class GPSFake: Sendable {
    /// The loopback port gpsd listens on.
    public let port: Int
    /// The recording gpsfake replays.
    public let recording: String
    /// gpsfake's pause between sentences (its `-c`), in seconds.
    public let secondsBetweenSentences: Double
    private let directory: String
    private let state = Locked(State())

    private struct State {
        enum Phase {
            case stopped
            /// Between `start()`'s check and its spawn, or during `stop()`: neither may begin.
            case busy
            case running(TestProcess)
        }
        var phase = Phase.stopped
        /// The last gpsfake started; kept after it is stopped, for its stderr.
        var last: TestProcess?
        var starts = 0
    }

    /// A gpsfake for `recording` on 127.0.0.1:`port`, pausing `secondsBetweenSentences`
    /// between sentences, with its files (temp dirs, stdout, stderr) under `directory`. Not
    /// started yet.
    public init(port: Int, recording: String, secondsBetweenSentences: Double, directory: String) {
        self.port = port
        self.recording = recording
        self.secondsBetweenSentences = secondsBetweenSentences
        self.directory = directory
    }

    /// Starts gpsfake, which starts its gpsd; gpsd accepts connections a moment later (the
    /// caller waits for that, or retries as a gpsd client does). Throws when it cannot be run,
    /// or when it runs already or is being stopped (two gpsds cannot listen on one port).
    public func start() throws {
        let start = state.withLock { state -> Int? in
            guard case .stopped = state.phase else { return nil }
            state.phase = .busy
            state.starts += 1
            return state.starts
        }
        guard let start else { throw TestSupportError.system("GPSFake.start() while gpsfake runs", EBUSY) }
        let run = "\(directory)/gpsfake-\(start)"
        do {
            try FileManager.default.createDirectory(atPath: run, withIntermediateDirectories: true)
            // -q quiet, -P gpsd's port, -c the pause between sentences; it loops by default.
            let process = try TestProcess(
                "/usr/bin/gpsfake", ["-q", "-P", "\(port)", "-c", "\(secondsBetweenSentences)", recording],
                directory: run, name: "gpsfake", environment: ["TMPDIR": run])
            state.withLock { state in (state.phase, state.last) = (.running(process), process) }
        } catch {
            state.withLock { $0.phase = .stopped }
            throw error
        }
    }

    /// Starts gpsfake and waits until its gpsd has the recording's pseudo-terminal open
    /// (`gpspipe -w` shows a non-empty `DEVICES` list). On a loaded machine gpsfake now and then
    /// starts a gpsd it never hands the device to (it says nothing; seen in CI after a restart:
    /// the client then finds a gpsd with no receiver, rightly). Such a start is stopped and made
    /// again, up to `attempts` times; the last failure throws.
    public func startServing(attempts: Int = 3, timeout: Duration = .seconds(20)) async throws {
        for attempt in 1...max(1, attempts) {
            try start()
            do {
                try await waitUntil("gpsd on \(port) with its device open", timeout: timeout, interval: .milliseconds(250)) {
                    await hasDevice()
                }
                return
            } catch  where attempt < attempts {
                await stop()
            }
        }
    }

    /// Whether gpsd answers with a device open: the `DEVICES` line `gpspipe -w` prints lists one.
    public func hasDevice() async -> Bool {
        guard FreePort.isAccepting(port),
            let pipe = try? TestProcess(
                "/usr/bin/gpspipe", ["-w", "-n", "3", "127.0.0.1:\(port)"], directory: directory, name: "gpspipe-\(port)")
        else { return false }
        _ = try? await pipe.waitForExitOrStop(timeout: .seconds(3), grace: .milliseconds(200))
        return pipe.standardOutput.contains(#""class":"DEVICES","devices":[{"#)
    }

    /// Stops gpsfake and its gpsd (the whole process group: SIGTERM, SIGKILL after 3 s), and
    /// waits (at most 5 s) until the port refuses connections, so that a restart on the same
    /// port finds it free. Does nothing unless it runs.
    public func stop() async {
        let process = state.withLock { state -> TestProcess? in
            guard case .running(let process) = state.phase else { return nil }
            state.phase = .busy
            return process
        }
        guard let process else { return }
        _ = await process.stop(grace: .seconds(3))
        // A killed gpsd closes its socket as it exits; there is no event to await for that.
        // Past the bound it gives up silently: the caller's next step says what is wrong.
        try? await waitUntil("gpsd's port to close", timeout: .seconds(5), interval: .milliseconds(20)) {
            !FreePort.isAccepting(port)
        }
        state.withLock { $0.phase = .stopped }
    }

    /// What the running (or last) gpsfake and its gpsd wrote to stderr, for failure messages.
    public var standardError: String {
        state.withLock { $0.last }?.standardError ?? ""
    }
}
