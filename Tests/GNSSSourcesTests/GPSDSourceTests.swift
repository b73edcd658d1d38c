import FleetcastTestSupport
import Foundation
import GNSS
import GNSSSources
import InMemoryLogging
import Logging
import NMEA
import Synchronization
import Testing

#if canImport(Glibc)
import FleetcastCore
import Glibc
#endif

extension LiveSourceTests {
    @Suite struct GPSDSourceTests {
        @Test func fixesFromRealGpsdAndReconnectAfterGpsdRestarts() async throws {
            let port = try FreePort.next()
            let recording = try fixturePath("firefly-II.log")
            var decoder = NMEADecoder()
            let recorded = decoder.decode(try [UInt8](Data(contentsOf: URL(fileURLWithPath: recording)))).fixes
            #expect(recorded.count >= 20)
            let directory = try TemporaryDirectory(prefix: "fake-gpsd")
            defer { directory.remove() }
            // 0.02 s between sentences: the 20-epoch recording in about 1.5 s, looping.
            let gpsd = GPSFake(port: port, recording: recording, secondsBetweenSentences: 0.02, directory: directory.path)
            try await gpsd.startServing()
            let log = InMemoryLogHandler()
            var logger = Logger(label: "test") { _ in log }
            logger.logLevel = .trace
            let source = try GNSSSourceDescriptor(parsing: "gpsd://127.0.0.1:\(port)")
                .makeSource(logger: logger, backoff: testBackoff)
            let recorder = EventRecorder(source)
            do {
                // gpsfake needs a moment to start gpsd: the source retries until it answers.
                let first = try await recorder.waitFor("fixes from gpsd", timeout: .seconds(30)) { $0.fixes.count >= 3 }
                // Every fix is at one of the recording's positions (Los Gatos, CA), through
                // gpsd's TPV.
                for fix in first.fixes {
                    let known = recorded.contains {
                        abs($0.latitude - fix.latitude) < 1e-8 && abs($0.longitude - fix.longitude) < 1e-8
                    }
                    #expect(known, "\(fix.latitude), \(fix.longitude) is not in the recording")
                    #expect(fix.mode == .twoD)
                }
                #expect(first.states.contains(.streaming))

                // gpsd goes away: reported as reconnecting, naming the address; the stream stays.
                await gpsd.stop()
                let lost = try await recorder.waitFor("reconnecting after gpsd stopped") {
                    $0.reconnectReasons.contains { $0.contains("127.0.0.1:\(port)") }
                }
                #expect(!recorder.finished)
                // Losing a gpsd that was streaming is what a user sees at the default level.
                let losses = log.entries.filter { $0.message.description == "Lost gpsd connection" }
                #expect(losses.first?.level == .info, "\(losses.map(\.level))")
                let countAtLoss = lost.count
                // While it is down, connecting is refused and retried.
                try await recorder.waitFor("a refused retry") {
                    $0.reconnectReasons.contains { $0.contains("Connection refused") }
                }

                // gpsd is back on the same port: fixes resume in the same iteration.
                try await gpsd.startServing()
                let resumed = try await recorder.waitFor("fixes after gpsd restarted", timeout: .seconds(30)) {
                    $0.dropFirst(countAtLoss).compactMap(\.fix).count >= 2
                }
                #expect(resumed.dropFirst(countAtLoss).contains(.state(.streaming)))
            } catch {
                await recorder.stop()
                await gpsd.stop()
                let said = gpsd.standardError
                if !said.isEmpty { Issue.record("gpsfake and its gpsd wrote: \(said)") }
                throw error
            }
            await recorder.stop()
            await gpsd.stop()
        }

        /// gpsfake names gpsd's control socket after its own pid in `$TMPDIR`, and gpsd leaves
        /// it behind: in a shared `/tmp`, a gpsfake with a recycled pid took an old one for its
        /// gpsd's and started gpsd without a device (silent; seen in CI). Each start of
        /// `GPSFake` has a directory of its own for it.
        @Test func gpsfakeKeepsItsControlSocketInADirectoryOfItsOwnPerStart() async throws {
            let port = try FreePort.next()
            let directory = try TemporaryDirectory(prefix: "fake-gpsd")
            defer { directory.remove() }
            let gpsd = GPSFake(
                port: port, recording: try fixturePath("firefly-II.log"), secondsBetweenSentences: 0.02, directory: directory.path)
            func sockets(_ run: Int) -> [String] {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.file("gpsfake-\(run)"))) ?? []
                return names.filter { $0.hasPrefix("gpsfake-") && $0.hasSuffix(".sock") }
            }
            for run in 1...2 {
                try gpsd.start()
                try await waitUntil("gpsd to listen on \(port)", timeout: .seconds(20)) { FreePort.isAccepting(port) }
                #expect(sockets(run).count == 1, "run \(run)'s directory holds \(sockets(run))")
                await gpsd.stop()
            }
        }

        @Test func aSilentGpsdIsReconnectedNotWaitedOnForever() async throws {
            // gpsd accepts and says who it is, then streams nothing (seen right after a restart).
            let server = try ScriptedTCPServer(reply: [
                Array(#"{"class":"VERSION","release":"3.25","proto_major":3,"proto_minor":15}"#.utf8) + [10]
            ])
            let recorder = EventRecorder(
                GPSDSource(
                    host: "127.0.0.1", port: server.port, logger: quietLogger, backoff: testBackoff,
                    idleTimeout: .milliseconds(300)))
            let events = try await recorder.waitFor("a reconnect after the silence") {
                $0.reconnectReasons.contains { $0.contains("nothing received") }
            }
            await recorder.stop()
            server.close()
            let reason = events.reconnectReasons.first ?? ""
            #expect(reason.contains("127.0.0.1:\(server.port)"), "\(reason)")
            // It never listed its devices: nothing is said about them.
            #expect(!reason.contains("receiver"), "\(reason)")
        }

        /// Debian's gpsd started without a device (a receiver unplugged, or never given to
        /// gpsd) answers the watch with an empty device list, then says nothing. The reason
        /// names that and where to look; the retries are not one info line each.
        @Test(arguments: [nil, "/dev/ttyFLEETCAST0"])
        func aGpsdWithoutAReceiverIsNamedAsSuchAndItsRetriesAreNotLoggedAtInfo(device: String?) async throws {
            let port = try FreePort.next()
            let directory = try TemporaryDirectory(prefix: "gpsd-no-receiver")
            defer { directory.remove() }
            // A shared-memory key of its own, made from the port as gpsfake makes its gpsds' (with
            // another prefix), so that it shares no segment with the gpsds running beside it.
            let gpsd = try TestProcess(
                "/usr/sbin/gpsd", ["-N", "-S", "\(port)", "-F", directory.file("gpsd.sock")], directory: directory.path,
                name: "gpsd", environment: ["GPSD_SHM_KEY": "0x4771" + String(port, radix: 16, uppercase: true)])
            try await waitUntil("gpsd to listen on \(port)", timeout: .seconds(20)) { FreePort.isAccepting(port) }
            let log = InMemoryLogHandler()
            var logger = Logger(label: "test") { _ in log }
            logger.logLevel = .trace
            let recorder = EventRecorder(
                GPSDSource(
                    host: "127.0.0.1", port: port, device: device, logger: logger, backoff: testBackoff,
                    idleTimeout: .milliseconds(300)))
            let events = try await recorder.waitFor("three reconnects after the silence") {
                $0.reconnectReasons.count { $0.contains("nothing received") } >= 3
            }
            await recorder.stop()
            _ = await gpsd.stop()
            let reason = try #require(events.reconnectReasons.first { $0.contains("nothing received") })
            #expect(reason.contains("127.0.0.1:\(port)"), "\(reason)")
            // Without a device named, its empty device list says it; with one, its answer to the watch.
            let said = device.map { #"gpsd answered the watch with "No such device as \#($0)""# } ?? "gpsd has no receiver open"
            #expect(reason.contains(said), "\(reason)")
            #expect(reason.contains("/etc/default/gpsd"), "\(reason)")
            #expect(events.fixes.isEmpty)
            let losses = log.entries.filter { $0.message.description == "Lost gpsd connection" }
            #expect(losses.count >= 3)
            #expect(losses.allSatisfy { $0.level == .debug }, "\(losses.map(\.level))")
        }

        @Test func watchNamesTheDeviceAndBadLinesAreSkipped() async throws {
            let server = try ScriptedTCPServer(reply: [
                Array(#"{"class":"VERSION","release":"3.25","proto_major":3,"proto_minor":15}"#.utf8) + [10],
                [UInt8](repeating: UInt8(ascii: "x"), count: 100_000) + [10],
                Array("{not json\n".utf8),
                Array(#"{"class":"TPV","mode":"3","lat":"x"}"#.utf8) + [10],
                Array(#"{"class":"TPV","mode":3,"time":"2024-05-01T12:00:00.000Z","lat":51.5,"lon":-0.12,"altHAE":70.5}"#.utf8) + [10],
            ])
            let recorder = EventRecorder(
                GPSDSource(
                    host: "127.0.0.1", port: server.port, device: "/dev/ttyACM0", logger: quietLogger, backoff: testBackoff))
            let events = try await recorder.waitFor("the good fix after the bad lines") { !$0.fixes.isEmpty }
            await recorder.stop()
            server.close()
            let fix = try #require(events.fixes.first)
            #expect(fix.latitude == 51.5 && fix.longitude == -0.12 && fix.altitudeHAE == 70.5 && fix.mode == .threeD)
            let stillConnected = !events.contains { $0.isReconnecting }
            #expect(stillConnected, "bad lines do not drop the connection")
            #expect(server.received == #"?WATCH={"enable":true,"json":true,"device":"/dev/ttyACM0"}"# + "\n")
        }
    }
}

/// A one-connection TCP server on 127.0.0.1 that records the client's first line and
/// answers with scripted bytes, then keeps the connection open until closed. It runs on its
/// own thread (blocking calls must not occupy Swift's cooperative pool).
final class ScriptedTCPServer: Sendable {
    let port: Int
    private let listener: Int32
    private let state = Mutex<(received: String, connection: Int32)>(("", -1))

    /// What the client sent before the reply.
    var received: String { state.withLock { $0.received } }

    init(reply: [[UInt8]]) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
                bind(fd, p, len) == 0 && listen(fd, 1) == 0 && getsockname(fd, p, &len) == 0
            }
        }
        guard ok else {
            Glibc.close(fd)
            throw TestSupportError.system("listen on 127.0.0.1", errno)
        }
        listener = fd
        port = Int(UInt16(bigEndian: addr.sin_port))
        Thread.detachNewThread { [self] in
            let c = accept(fd, nil, nil)
            guard c >= 0 else { return }
            state.withLock { $0.connection = c }
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while read(c, &byte, 1) == 1 {
                line.append(byte)
                if byte == 10 { break }
            }
            state.withLock { $0.received = String(decoding: line, as: UTF8.self) }
            for chunk in reply {
                _ = chunk.withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
            }
        }
    }

    /// Closes the listener and the connection (shut down first, which wakes the server
    /// thread if it is still blocked in `accept` or `read`).
    func close() {
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
        let c = state.withLock { s in
            defer { s.connection = -1 }
            return s.connection
        }
        if c >= 0 {
            shutdown(c, Int32(SHUT_RDWR))
            Glibc.close(c)
        }
    }
}
