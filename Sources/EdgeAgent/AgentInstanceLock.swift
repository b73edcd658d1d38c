import FleetProtocol
import FleetcastCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Says that an agent runs for a vehicle: `run` holds an exclusive `flock(2)` on
/// `{stateDir}/{vehicle}.lock` for as long as it runs (the kernel lets go when the process ends,
/// however it ends, `kill -9` included), and `check` asks whether someone holds it before it
/// connects to the broker.
///
/// Under a broker that makes the client id the user name (`use_username_as_clientid`, the
/// shipped `deploy/mosquitto` configurations) a vehicle has one connection at a time: a second
/// login as the vehicle (a second agent, or `check`) closes the running agent's connection, and
/// its last will marks the vehicle `offline`. This lock is how a second one knows not to.
public final class AgentInstanceLock: Sendable {
    /// The lock file's path for `vehicle` in `directory`: `{directory}/{vehicle}.lock`.
    public static func path(directory: String, vehicle: VehicleID) -> String {
        (directory.hasSuffix("/") ? String(directory.dropLast()) : directory) + "/\(vehicle.rawValue).lock"
    }

    /// What ``acquire(directory:vehicle:)`` found: the lock, or that another process holds
    /// it (an agent runs for this vehicle), that it cannot be known (a read-only state
    /// directory, say), or that something other than a regular file is in its place (a
    /// symbolic link, which could point the agent at a file of someone else's: it must not run).
    public typealias Acquisition = FileLockAcquisition<AgentInstanceLock>

    /// The lock held (``ExclusiveFileLock``); let go on deinit.
    private let lock: ExclusiveFileLock
    /// The lock file.
    public var path: String { lock.path }

    private init(_ lock: ExclusiveFileLock) {
        self.lock = lock
    }

    /// Takes the lock for this process, creating the file (0600) when it is missing.
    ///
    /// The file is opened without following a symbolic link (`O_NOFOLLOW`; `O_NONBLOCK`, so a
    /// FIFO put there cannot hang it): a link in its place, dangling or not, is ``Acquisition/refused(path:reason:)``,
    /// and so is anything but a regular file (checked with `fstat` on the descriptor opened).
    public static func acquire(directory: String, vehicle: VehicleID) -> Acquisition {
        ExclusiveFileLock.acquire(path: path(directory: directory, vehicle: vehicle)).map(AgentInstanceLock.init) {
            $0 == ExclusiveFileLock.symbolicLinkReason ? symbolicLinkReason : $0
        }
    }

    /// What ``probe(directory:vehicle:)`` found.
    public enum Probe: Sendable, Equatable {
        /// Nobody holds the lock (or there is no lock file): no agent runs with this state
        /// directory for this vehicle.
        case free
        /// Another process holds it: an agent runs.
        case held(path: String)
        /// The lock file is there but cannot be opened (another user's, say): nothing is known.
        case unknown(path: String, reason: String)
    }

    /// Whether another process holds the lock (an agent runs for `vehicle`), without keeping it
    /// and without creating the file. Like ``acquire(directory:vehicle:)``, it follows no
    /// symbolic link: one in the lock file's place is ``Probe/unknown(path:reason:)``, saying so.
    public static func probe(directory: String, vehicle: VehicleID) -> Probe {
        let path = path(directory: directory, vehicle: vehicle)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else {
            let error = errno
            if error == ELOOP { return .unknown(path: path, reason: symbolicLinkReason) }
            return error == ENOENT ? .free : .unknown(path: path, reason: String(cString: strerror(error)))
        }
        defer { close(descriptor) }
        if let reason = notRegularFileReason(descriptor) { return .unknown(path: path, reason: reason) }
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 {
            _ = flock(descriptor, LOCK_UN)
            return .free
        }
        let error = errno
        return error == EWOULDBLOCK ? .held(path: path) : .unknown(path: path, reason: String(cString: strerror(error)))
    }

    /// Why a symbolic link in the lock file's place is refused.
    package static let symbolicLinkReason =
        "it is a symbolic link, and the agent follows none to its lock file (a link could make it create or lock a file elsewhere); remove it and check who put it there"

    /// Why the open `descriptor` is not a lock file, or `nil` when it is a regular file.
    private static func notRegularFileReason(_ descriptor: Int32) -> String? {
        ExclusiveFileLock.notRegularFileReason(descriptor)
    }
}

/// Something other than a regular file is in the place of the vehicle's
/// ``AgentInstanceLock`` (a symbolic link, say): the agent does not start.
public struct AgentLockFileRefused: Error, Sendable, CustomStringConvertible {
    /// The lock file's path.
    public let path: String
    /// Why it was refused.
    public let reason: String

    public var description: String {
        "cannot take the agent's lock file \(path): \(reason)"
    }
}

/// Another agent holds the vehicle's ``AgentInstanceLock``: it runs with the same state
/// directory for the same vehicle.
public struct AgentAlreadyRunning: Error, Sendable, CustomStringConvertible {
    /// The vehicle.
    public let vehicle: VehicleID
    /// The lock file the other agent holds.
    public let path: String

    public var description: String {
        """
        another fleetcast-agent runs for \(vehicle) (it holds \(path)); two would take the broker \
        connection from each other (the broker's client id is the vehicle's user name): stop it \
        first (systemctl stop fleetcast-agent)
        """
    }
}
