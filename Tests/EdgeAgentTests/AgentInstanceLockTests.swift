import EdgeAgent
import FleetProtocol
import FleetcastTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The lock that says an agent runs for a vehicle: what `check` asks before it connects, and
/// what keeps a second agent for the same vehicle from starting (under a broker that binds the
/// client id to the user, two would take the connection from each other).
@Suite("One agent per vehicle and state directory")
struct AgentInstanceLockTests {
    @Test("free without a lock file or after the holder lets go; held while an agent holds it")
    func probe() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let vehicle = VehicleID("van-7")!
        #expect(AgentInstanceLock.probe(directory: dir.path, vehicle: vehicle) == .free, "no lock file: no agent")
        // Held for the closure's length; let go when the lock is released after it.
        func whileHeld() {
            guard case .acquired(let lock) = AgentInstanceLock.acquire(directory: dir.path, vehicle: vehicle) else {
                Issue.record("the lock could not be taken")
                return
            }
            withExtendedLifetime(lock) {
                #expect(lock.path == "\(dir.path)/van-7.lock")
                #expect(AgentInstanceLock.probe(directory: dir.path, vehicle: vehicle) == .held(path: lock.path))
                if case .heldByAnother = AgentInstanceLock.acquire(directory: dir.path, vehicle: vehicle) {
                } else {
                    Issue.record("a second holder")
                }
                #expect(AgentInstanceLock.probe(directory: dir.path, vehicle: VehicleID("van-8")!) == .free, "another vehicle's")
            }
        }
        whileHeld()
        #expect(AgentInstanceLock.probe(directory: dir.path, vehicle: vehicle) == .free, "let go")
    }

    @Test("a second `fleetcast-agent run` for the same vehicle and state directory refuses to start (78) and says why; the first runs on")
    func secondAgentRefused() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let work = try makeTemporaryDirectory(prefix: "agent-lock")
        let arguments = [
            "run", "--source", "sim:?rate=1", "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:\(broker.port)",
            "--state-dir", "\(work)/state",
        ]
        let first = try TestProcess(builtProduct("fleetcast-agent"), arguments, directory: work, name: "first")
        defer { first.send(SIGKILL) }
        try await waitUntil("the first agent running", timeout: .seconds(20)) { first.standardError.contains("MQTT connected") }
        let second = try TestProcess(builtProduct("fleetcast-agent"), arguments, directory: work, name: "second")
        #expect(try await second.waitForExit(timeout: .seconds(20)) == 78)
        #expect(
            second.standardError.contains("another fleetcast-agent runs for v1") && second.standardError.contains("\(work)/state/v1.lock"),
            "\(second.standardError)")
        #expect(first.isRunning)
        first.send(SIGTERM)
        #expect(try await first.waitForExit(timeout: .seconds(20)) == 0)
    }
}
