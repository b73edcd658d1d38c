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
    public init(to targetPort: Int) async throws {
        directory = try makeTemporaryDirectory(prefix: "fleetcast-proxy")
        port = try FreePort.next()
        process = try TestProcess("/usr/bin/socat", [
            "TCP-LISTEN:\(port),bind=127.0.0.1,reuseaddr,fork", "TCP:127.0.0.1:\(targetPort)",
        ], directory: directory, name: "socat")
        let port = self.port
        let process = self.process
        try await waitUntil("socat to listen on \(port)") {
            if !process.isRunning { throw TestSupportError.processFailed(process.commandLine, status: -1, output: process.standardError) }
            return FreePort.isAccepting(port)
        }
    }

    deinit {
        process.send(SIGKILL)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Kills socat and every forked child (its process group is not separate, so kill the
    /// children by parent id first), cutting the connections abruptly.
    public func kill() async {
        let children = (try? String(contentsOfFile: "/proc/\(process.pid)/task/\(process.pid)/children", encoding: .utf8)) ?? ""
        for child in children.split(separator: " ").compactMap({ Int32($0) }) { Foundation.kill(child, SIGKILL) }
        process.send(SIGKILL)
        _ = await process.waitForExit()
    }
}
