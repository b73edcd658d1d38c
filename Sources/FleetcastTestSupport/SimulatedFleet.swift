import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Starts the built `fleetcast-agent` on its simulated receiver (`sim:` at `rate` Hz) for
/// `vehicle`, publishing to `broker`, its outbox in `directory/state-{vehicle}`.
public func startSimulatedAgent(
    _ vehicle: String, broker: TestBroker, directory: String, rate: Int = 10, environment: [String: String] = [:]
) throws -> TestProcess {
    try TestProcess(
        builtProduct("fleetcast-agent"),
        [
            "run", "--source", "sim:?rate=\(rate)", "--vehicle", vehicle, "--broker", broker.url,
            "--state-dir", "\(directory)/state-\(vehicle)",
        ], directory: directory, name: "agent-\(vehicle)-\(UUID().uuidString.prefix(8))", environment: environment)
}

extension TestProcess {
    /// Sends SIGTERM to the process alone (as systemd's stop does to a service's main
    /// process) and waits at most `timeout` for it to exit; returns its
    /// ``Termination/status`` and how long it took after the signal.
    public func terminate(timeout: Duration = .seconds(30)) async throws -> (status: Int32, elapsed: Duration) {
        let clock = ContinuousClock()
        let signalled = clock.now
        send(SIGTERM)
        let status = try await waitForExit(timeout: timeout)
        return (status, clock.now - signalled)
    }
}
