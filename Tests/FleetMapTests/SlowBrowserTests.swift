import FleetMap
import FleetWatch
import FleetcastTestSupport
import Foundation
import GNSS
import InMemoryLogging
import Logging
import MQTT
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A browser that stops reading, over real HTTP: the server (in process, against a real
/// mosquitto) drops it and logs it with its address, and a browser that reads keeps its updates.
@Suite(.serialized, .tags(.loadsTheMachine), .oneMachineLoadAtATime) struct SlowBrowserTests {
    /// A client of `/events` that sends its request and then never reads, with a tiny receive
    /// buffer so the server's writes back up after a few kilobytes.
    final class StalledClient {
        let fd: Int32
        let localPort: Int

        /// A client that sends `GET path` and then reads nothing (`path` nil: sends nothing at all).
        init(port: Int, path: String? = "/events") throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.fd = fd
            guard fd >= 0 else { throw TestSupportError.system("socket", errno) }
            var small: Int32 = 2048
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            guard FreePort.connectLoopback(fd, port: port) == 0 else {
                _ = Glibc.close(fd)
                throw TestSupportError.system("connect", errno)
            }
            var local = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            localPort = Int(UInt16(bigEndian: local.sin_port))
            guard let path else { return }
            let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n\r\n".utf8)
            guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else {
                _ = Glibc.close(fd)
                throw TestSupportError.system("send", errno)
            }
        }

        func close() { _ = Glibc.close(fd) }

        /// Reads (and discards) what the server sent until it closes the connection: true once
        /// `recv` sees its end (or a reset), false if it is still open after `timeout`.
        func readUntilClosed(timeout: Duration) async throws -> Bool {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var buffer = [UInt8](repeating: 0, count: 65536)
            do {
                // Each look reads all that has arrived, then says whether the end came with it.
                try await waitUntil("the server to close the connection", timeout: timeout, interval: .milliseconds(20)) {
                    while true {
                        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                        if n == 0 || (n < 0 && errno == ECONNRESET) { return true }
                        if n < 0 { return false }
                    }
                }
                return true
            } catch TestSupportError.timedOut {
                return false
            }
        }
    }

    /// Whether the socket listening on `port` has no connection waiting to be accepted: the
    /// `rx_queue` of its LISTEN line in `/proc/net/tcp` (IPv4) or `tcp6` is its accept queue.
    static func acceptQueueIsEmpty(port: Int) -> Bool {
        let hexPort = ":" + String(port, radix: 16, uppercase: true).leftPadded(to: 4)
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                // sl local_address rem_address st tx_queue:rx_queue …; st 0A is LISTEN.
                let fields = line.split(separator: " ")
                guard fields.count > 4, fields[1].hasSuffix(hexPort), fields[3] == "0A" else { continue }
                let queues = fields[4].split(separator: ":")
                return queues.count == 2 && Int(queues[1], radix: 16) == 0
            }
        }
        return false
    }

    /// `FleetMapServer` in this process with `options` (port 0, no tiles), subscribed to
    /// `broker`; returns the serving task and its port once it listens and has subscribed.
    static func startServer(
        _ broker: TestBroker, options: FleetMapServer.Options, logger: Logger, memory: InMemoryLogHandler
    ) async throws -> (Task<Void, any Error>, Int) {
        let mqtt = MQTTConfiguration(
            broker: BrokerURL(host: broker.host, port: broker.port), clientID: "serve-\(UUID().uuidString.prefix(8))")
        let server = try FleetMapServer(
            subscriber: try FleetSubscriber(configuration: mqtt, logger: logger), options: options, logger: logger)
        let listening = Locked<Int?>(nil)
        let serving = Task { try await server.run { port in listening.withLock { $0 = port } } }
        do {
            try await waitUntil("the server to listen") { listening.withLock { $0 } != nil }
            try await waitUntil("the subscription", timeout: .seconds(15)) {
                memory.entries.contains { $0.message.description == "Subscribed to the fleet" }
            }
        } catch {
            serving.cancel()
            throw error
        }
        return (serving, try #require(listening.withLock { $0 }))
    }

    @Test func aBrowserThatStopsReadingIsDroppedAndLoggedWhileAReadingOneKeepsItsUpdates() async throws {
        try await withBroker { broker in
            let memory = InMemoryLogHandler()
            var logger = Logger(label: "test") { _ in memory }
            logger.logLevel = .info
            let mqtt = MQTTConfiguration(
                broker: BrokerURL(host: broker.host, port: broker.port), clientID: "serve-\(UUID().uuidString.prefix(8))")
            let server = try FleetMapServer(
                subscriber: try FleetSubscriber(configuration: mqtt, logger: logger),
                options: FleetMapServer.Options(
                    port: 0, tiles: nil, flushInterval: .milliseconds(100), maximumPending: 1_000_000, maximumStalledFlushes: 30),
                logger: logger)
            let listening = Locked<Int?>(nil)
            let serving = Task { try await server.run { port in listening.withLock { $0 = port } } }
            let publisher = try MQTTClient(
                configuration: MQTTConfiguration(
                    broker: BrokerURL(host: broker.host, port: broker.port), clientID: "fleet-\(UUID().uuidString.prefix(8))"),
                logger: Logger(label: "publisher"))
            try await publisher.connect()
            // 2,000 vehicles moving, each update event hundreds of kilobytes, up to four rounds a
            // second (a pause of 250 ms after each): every flush still finds the stalled
            // browser's queue full, and the machine keeps a core for the suites beside this one.
            let publishing = Task {
                try await MovingFleet.publish(
                    vehicles: 2000, pausing: .milliseconds(250),
                    time: { UTCTimestamp(millisecondsSince1970: 1_790_000_000_000 + Int64($0) * 100) }
                ) { try await publisher.publish(topic: $0, payload: $1, qos: .atMostOnce) }
            }
            var stalled: StalledClient?
            var reader: TestProcess?
            do {
                try await waitUntil("the server to listen") { listening.withLock { $0 } != nil }
                let port = try #require(listening.withLock { $0 })
                try await waitUntil("the subscription", timeout: .seconds(15)) {
                    memory.entries.contains { $0.message.description == "Subscribed to the fleet" }
                }
                let fast = try TestProcess(
                    "/usr/bin/curl", ["-sS", "-N", "--max-time", "180", "http://127.0.0.1:\(port)/events"], directory: broker.directory,
                    name: "reader")
                reader = fast
                // The stalled browser connects once the server holds the whole fleet: its snapshot
                // alone (2,000 vehicles with their trails, about a megabyte) is more than the
                // connection's buffers take, whatever rate the publisher manages beside the other
                // suites (at a trickle of updates, the kernel took a minute of them unread).
                try await waitUntil("the reader to see the last vehicle", timeout: .seconds(60), interval: .milliseconds(50)) {
                    fast.standardOutput.contains(#""id":"v1999""#)
                }
                let slow = try StalledClient(port: port)
                stalled = slow
                do {
                    try await waitUntil("the stalled browser dropped", timeout: .seconds(60), interval: .milliseconds(50)) {
                        memory.entries.contains { $0.message.description == "Dropped a slow browser" }
                    }
                } catch {
                    // What the server said meanwhile, and how far the reading browser got: whether
                    // the writes never blocked, the write time-out closed the connection first, or
                    // the fleet's updates never reached the feed.
                    let said = memory.entries.suffix(12).map { "\($0.level) \($0.message) \($0.metadata)" }
                    let updates = fast.standardOutput.components(separatedBy: "event: update").count - 1
                    Issue.record("no drop in 60 s; curl read \(updates) updates; the server's last log entries: \(said)")
                    throw error
                }
                // The stalled browser, named by its address, for being stalled (3 s without
                // taking an update: headroom for curl on a busy machine, which must never be dropped).
                let drops = memory.entries.filter { $0.message.description == "Dropped a slow browser" }
                #expect(drops.allSatisfy { $0.metadata["http.peer"]?.description == "127.0.0.1:\(slow.localPort)" }, "\(drops)")
                #expect(drops.first?.metadata["map.reason"]?.description == "stalled")
                // The reader goes on receiving updates after the drop.
                let updatesAtDrop = fast.standardOutput.components(separatedBy: "event: update").count
                try await waitUntil("more updates for the reading browser", timeout: .seconds(30), interval: .milliseconds(50)) {
                    fast.standardOutput.components(separatedBy: "event: update").count >= updatesAtDrop + 3
                }
                let dropsAfter = memory.entries.filter { $0.message.description == "Dropped a slow browser" }
                #expect(dropsAfter.count == 1, "only the stalled browser, once: \(dropsAfter)")
                // Dropped means gone: the server closed its connection (its response was blocked
                // in a write), so it holds neither the connection nor what it had queued.
                #expect(try await slow.readUntilClosed(timeout: .seconds(30)), "the dropped browser's connection is closed")
            } catch {
                publishing.cancel()
                stalled?.close()
                await reader?.stop(grace: .seconds(1))
                serving.cancel()
                throw error
            }
            publishing.cancel()
            _ = await publishing.result
            stalled?.close()
            await reader?.stop(grace: .seconds(1))
            serving.cancel()
            _ = try await withTimeout(.seconds(15), "the server to stop") { await serving.result }
            await publisher.shutdown(flushTimeout: .zero)
        }
    }

    @Test func connectionsAreCountedAndIdleOnesClosed() async throws {
        try await withBroker { broker in
            let memory = InMemoryLogHandler()
            var logger = Logger(label: "test") { _ in memory }
            logger.logLevel = .info
            let (serving, port) = try await Self.startServer(
                broker, options: FleetMapServer.Options(port: 0, tiles: nil, maximumConnections: 2, idleTimeout: .seconds(3)),
                logger: logger, memory: memory)
            defer { serving.cancel() }
            // Two connections that never send a request take the server's two places.
            let idle = try (0..<2).map { _ in try StalledClient(port: port, path: nil) }
            defer { for client in idle { client.close() } }
            // Both connected (each `connect` returned): once none waits in the accept queue, the
            // server has taken both.
            try await waitUntil("the server to accept both connections", timeout: .seconds(10)) { Self.acceptQueueIsEmpty(port: port) }
            let url = "http://127.0.0.1:\(port)/api/vehicles"
            let (waited, _) = try await FleetMapServeTests.curl(["--max-time", "1", url], directory: broker.directory)
            #expect(waited == 28, "a third connection waits while two are open (curl timed out)")
            // The idle timeout frees both places; then the next request is served.
            for client in idle { #expect(try await client.readUntilClosed(timeout: .seconds(20)), "an idle connection is closed") }
            let (status, body) = try await FleetMapServeTests.curl(["--max-time", "10", url], directory: broker.directory)
            #expect(status == 0 && body.contains(#""vehicles""#), "\(body)")
        }
    }
}

extension String {
    /// The string with zeros in front, to `width` characters.
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
