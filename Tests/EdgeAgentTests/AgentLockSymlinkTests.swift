import EdgeAgent
import FleetProtocol
import FleetcastTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The agent's lock file is opened without following symbolic links: a link in its place
/// (which could make the agent create or lock a file elsewhere) is refused, and the agent does
/// not start.
@Suite("The instance lock follows no symbolic link")
struct AgentLockSymlinkTests {
    @Test("a link in the lock file's place, dangling or not, is refused and its target left alone")
    func linkRefused() throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-lock-link")
        defer { directory.remove() }
        let vehicle = VehicleID("van-7")!
        let lockPath = AgentInstanceLock.path(directory: directory.path, vehicle: vehicle)

        // Dangling: following it would create the target.
        let target = directory.file("elsewhere")
        try FileManager.default.createSymbolicLink(atPath: lockPath, withDestinationPath: target)
        guard case .refused(let path, let reason) = AgentInstanceLock.acquire(directory: directory.path, vehicle: vehicle) else {
            Issue.record("a dangling link was followed")
            return
        }
        #expect(path == lockPath)
        #expect(reason.contains("it is a symbolic link"), "\(reason)")
        #expect(!FileManager.default.fileExists(atPath: target), "the link's target was created")
        #expect(
            AgentInstanceLock.probe(directory: directory.path, vehicle: vehicle)
                == .unknown(path: lockPath, reason: AgentInstanceLock.symbolicLinkReason))

        // To an existing file: following it would lock (and keep open) someone else's file.
        try directory.createFile("elsewhere", "not a lock\n", mode: 0o644)
        guard case .refused = AgentInstanceLock.acquire(directory: directory.path, vehicle: vehicle) else {
            Issue.record("a link to a file was followed")
            return
        }
        #expect(directory.contents("elsewhere") == "not a lock\n")

        // Not a regular file: a FIFO in its place neither hangs nor passes.
        try FileManager.default.removeItem(atPath: lockPath)
        try #require(mkfifo(lockPath, 0o600) == 0)
        guard case .refused(_, let fifoReason) = AgentInstanceLock.acquire(directory: directory.path, vehicle: vehicle) else {
            Issue.record("a FIFO was taken for a lock file")
            return
        }
        #expect(fifoReason.contains("not a regular file"))
        #expect(AgentInstanceLock.probe(directory: directory.path, vehicle: vehicle) != .free)

        // A plain file is still the lock.
        try FileManager.default.removeItem(atPath: lockPath)
        guard case .acquired(let lock) = AgentInstanceLock.acquire(directory: directory.path, vehicle: vehicle) else {
            Issue.record("the lock could not be taken")
            return
        }
        withExtendedLifetime(lock) {
            #expect(AgentInstanceLock.probe(directory: directory.path, vehicle: vehicle) == .held(path: lockPath))
        }
    }

    @Test("`fleetcast-agent run` with a link for its lock file refuses to start (78) and says why")
    func agentRefusesToStart() async throws {
        let work = try TemporaryDirectory(prefix: "fleetcast-lock-link-agent")
        defer { work.remove() }
        let state = work.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let target = work.file("victim")
        try FileManager.default.createSymbolicLink(atPath: "\(state)/v1.lock", withDestinationPath: target)
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            ["run", "--source", "sim:?rate=1", "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:1", "--state-dir", state],
            directory: work.path, name: "agent")
        #expect(try await agent.waitForExit(timeout: .seconds(20)) == 78)
        #expect(
            agent.standardError.contains("cannot take the agent's lock file \(state)/v1.lock: it is a symbolic link"),
            "\(agent.standardError)")
        #expect(!FileManager.default.fileExists(atPath: target), "the link's target was created")
    }
}
