import FleetcastTestSupport
import Foundation
import GNSS
import GNSSSources
import Testing

#if canImport(Glibc)
import FleetcastCore
import Glibc
#endif

/// A pseudo-terminal pair made by socat: `gps` is the receiver's port the source opens,
/// `feed` the far side where the test writes what the receiver would send. Stopping socat
/// is unplugging the receiver (both links disappear and reads fail); starting it again with
/// the same links is plugging it back in.
final class PseudoTerminalPair {
    let directory: String
    var gps: String { directory + "/gps" }
    var feed: String { directory + "/feed" }
    private var socat: TestProcess?

    init(directory: String) {
        self.directory = directory
    }

    /// Starts socat and waits (bounded) until both links exist.
    func plug() async throws {
        socat = try TestProcess(
            "/usr/bin/socat",
            [
                "pty,raw,echo=0,link=\(gps)", "pty,raw,echo=0,link=\(feed)",
            ], directory: directory, name: "socat")
        // socat makes the links right after it starts; there is no event to await.
        try await waitUntil("socat to create the pty links", timeout: .seconds(5), interval: .milliseconds(10)) {
            FileManager.default.fileExists(atPath: gps) && FileManager.default.fileExists(atPath: feed)
        }
    }

    /// Stops socat: the receiver is gone.
    func unplug() async {
        await socat?.stop(grace: .seconds(3))
        socat = nil
    }

    /// Writes bytes into the far side at `feed`, as the receiver would, failing after `timeout` if they do not fit.
    ///
    /// The descriptor is non-blocking: when nobody reads the receiver's port the pty and
    /// socat's buffers fill up (some 34 KB), and a blocking `write` would then never return —
    /// a test task stuck in a system call cannot be cancelled and holds a thread of the
    /// cooperative pool. What does not fit in `timeout` is dropped, as on a real line.
    static func send(_ bytes: [UInt8], to feed: String, timeout: Duration = .seconds(2)) async throws {
        let fd = open(feed, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK)
        try #require(fd >= 0, "open \(feed): \(String(cString: strerror(errno)))")
        defer { close(fd) }
        var offset = 0
        do {
            // Each look writes what fits; the line is full until the source (or socat) reads,
            // which this side cannot await without blocking a thread.
            try await waitUntil("\(feed) to take the bytes", timeout: timeout, interval: .milliseconds(10)) {
                while offset < bytes.count {
                    let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                    if n > 0 {
                        offset += n
                        continue
                    }
                    let code = errno
                    if n < 0, code == EINTR { continue }
                    guard n < 0, code == EAGAIN || code == EWOULDBLOCK else {
                        throw FeedError(feed: feed, reason: String(cString: strerror(code)))
                    }
                    return false
                }
                return true
            }
        } catch TestSupportError.timedOut {
            throw FeedError(feed: feed, reason: "\(bytes.count - offset) of \(bytes.count) bytes not taken in \(timeout)")
        }
    }

    /// A write into the far side failed or did not fit in time.
    struct FeedError: Error, CustomStringConvertible {
        let feed: String
        let reason: String
        var description: String { "write \(feed): \(reason)" }
    }
}

/// NMEA epochs of a vehicle, starting at `time`, one per second.
func nmeaEpochs(count: Int, from startMs: Int64, latitude: Double) -> [UInt8] {
    var bytes: [UInt8] = []
    for i in 0..<count {
        bytes += NMEASentenceGenerator.bytes(
            for: .init(
                time: UTCTimestamp(millisecondsSince1970: startMs + Int64(i) * 1000),
                latitude: latitude + Double(i) * 1e-4, longitude: 4.9, speed: 11, track: 0, heading: 0))
    }
    return bytes
}

/// Starts a receiver that talks whether or not anyone listens: every `interval` it writes
/// `prefix` and one epoch (a new second each time) into `feed`, until cancelled. What does
/// not fit within half a second is dropped, so the task always ends soon after `cancel()`.
func startReceiver(
    feed: String, latitude: Double, from startMs: Int64, prefix: [UInt8] = [], interval: Duration = .milliseconds(50)
) -> Task<Void, Never> {
    Task {
        var t = startMs
        while !Task.isCancelled {
            try? await PseudoTerminalPair.send(
                prefix + nmeaEpochs(count: 1, from: t, latitude: latitude), to: feed, timeout: .milliseconds(500))
            t += 1000
            try? await Task.sleep(for: interval)
        }
    }
}

extension LiveSourceTests {
    @Suite struct SerialSourceTests {
        @Test func fixesFlowAndSurviveUnplugAndReplug() async throws {
            let dir = try TemporaryDirectory()
            defer { dir.remove() }
            let pty = PseudoTerminalPair(directory: dir.path)
            try await pty.plug()
            let source = try GNSSSourceDescriptor(parsing: "serial:\(pty.gps)?baud=115200")
                .makeSource(logger: quietLogger, backoff: testBackoff)
            let recorder = EventRecorder(source)
            var receiver: Task<Void, Never>?
            do {
                // The source opens the port asynchronously: keep sending until fixes come out.
                receiver = startReceiver(feed: pty.feed, latitude: 52.0, from: 1_700_000_000_000)
                let first = try await recorder.waitFor("fixes from the pty") { $0.fixes.count >= 3 }
                receiver?.cancel()
                if let receiver { try await awaitEnd(of: receiver, "the receiver task to stop") }
                #expect(first.states.prefix(2) == [.connecting, .streaming])
                #expect(first.fixes.allSatisfy { abs($0.latitude - 52.0) < 1e-6 && abs($0.longitude - 4.9) < 1e-6 })

                // Unplug: the source says so, naming the device, and keeps the stream open.
                await pty.unplug()
                let lost = try await recorder.waitFor("reconnecting after unplug") { $0.contains(where: \.isReconnecting) }
                let reason = try #require(lost.reconnectReasons.first)
                #expect(reason.contains(pty.gps))
                #expect(!recorder.finished)
                // While it is away, reopening fails with ENOENT and is retried with backoff.
                try await recorder.waitFor("a retry that finds no device") {
                    $0.reconnectReasons.contains { $0.contains("No such file or directory") }
                }

                // Replug with the same path: fixes resume in the same iteration.
                try await pty.plug()
                let fixesBefore = recorder.events.fixes.count
                receiver = startReceiver(feed: pty.feed, latitude: 53.0, from: 1_700_000_100_000)
                let resumed = try await recorder.waitFor("fixes after replug") {
                    $0.fixes.dropFirst(fixesBefore).contains { abs($0.latitude - 53.0) < 1e-6 }
                }
                receiver?.cancel()
                if let receiver { try await awaitEnd(of: receiver, "the receiver task to stop") }
                let lastLoss = resumed.lastIndex { $0.isReconnecting }
                let tail = resumed.suffix(from: try #require(lastLoss))
                #expect(tail.contains(.state(.streaming)))
            } catch {
                receiver?.cancel()
                await recorder.stop()
                await pty.unplug()
                throw error
            }
            await recorder.stop()
            await pty.unplug()
        }

        @Test func corruptBytesAreSkippedNotFatal() async throws {
            let dir = try TemporaryDirectory()
            defer { dir.remove() }
            let pty = PseudoTerminalPair(directory: dir.path)
            try await pty.plug()
            let recorder = EventRecorder(SerialSource(path: pty.gps, baud: 4800, logger: quietLogger, backoff: testBackoff))
            let garbage: [UInt8] = Array("$GPRMC,garbage*00\r\n\u{0}\u{FF}noise$$$\r\n".utf8) + [0xFF, 0x00, 0x0A]
            let receiver = startReceiver(feed: pty.feed, latitude: 10.0, from: 1_700_000_000_000, prefix: garbage)
            do {
                let events = try await recorder.waitFor("fixes between the noise") { $0.fixes.count >= 3 }
                receiver.cancel()
                try await awaitEnd(of: receiver, "the receiver task to stop")
                let reconnected = events.contains { $0.isReconnecting }
                #expect(!reconnected)
            } catch {
                receiver.cancel()
                await recorder.stop()
                await pty.unplug()
                throw error
            }
            await recorder.stop()
            await pty.unplug()
        }
    }
}
