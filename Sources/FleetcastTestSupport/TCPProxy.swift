import Foundation

/// A `socat` TCP forwarder from a free loopback port to a target port. Killing it drops the
/// client's connection without any MQTT DISCONNECT — an unclean disconnect, as when a
/// vehicle loses its network.
public final class TCPProxy: Sendable {
    /// The port clients connect to.
    public let port: Int
    private let process: TestProcess
    private let directory: String

    /// Starts forwarding 127.0.0.1:`port` → 127.0.0.1:`targetPort`, waiting until it listens.
    /// `port` defaults to a free one; give the port of a killed proxy to restore a cut link.
    public init(port: Int? = nil, to targetPort: Int) async throws {
        directory = try makeTemporaryDirectory(prefix: "fleetcast-proxy")
        self.port = try port ?? FreePort.next()
        process = try TestProcess(
            "/usr/bin/socat",
            [
                "TCP-LISTEN:\(self.port),bind=127.0.0.1,reuseaddr,fork", "TCP:127.0.0.1:\(targetPort)",
            ], directory: directory, name: "socat")
        let port = self.port
        let process = self.process
        try await waitUntil("socat to listen on \(port)") {
            if !process.isRunning { throw TestSupportError.processFailed(process.commandLine, status: -1, output: process.standardError) }
            return FreePort.isAccepting(port)
        }
    }

    deinit {
        process.send(SIGKILL, toGroup: true)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Kills socat and every child it forked per connection (they share its process group),
    /// cutting the connections abruptly, and waits (at most 10 s) for socat to exit.
    public func kill() async {
        process.send(SIGKILL, toGroup: true)
        _ = try? await process.waitForExit(timeout: .seconds(10))
    }
}
