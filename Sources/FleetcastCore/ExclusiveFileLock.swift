#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive `flock(2)` on a file, held for as long as the value lives (the kernel lets go
/// when the process ends, however it ends, `kill -9` included): how one process says that it
/// runs as something (an agent for a vehicle, a recorder under a client id).
///
/// The file is created (0600) when missing and opened without following a symbolic link
/// (`O_NOFOLLOW`; `O_NONBLOCK`, so a FIFO put there cannot hang it): a link in its place,
/// dangling or not, is ``Acquisition/refused(path:reason:)``, and so is anything but a regular
/// file (checked with `fstat` on the descriptor opened).
public final class ExclusiveFileLock: Sendable {
    /// What ``acquire(path:)`` found.
    public typealias Acquisition = FileLockAcquisition<ExclusiveFileLock>

    /// The open lock file's descriptor; closed (and the lock let go) on deinit.
    private let descriptor: Int32
    /// The lock file.
    public let path: String

    private init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { close(descriptor) }

    /// Why a symbolic link in the lock file's place is refused.
    public static let symbolicLinkReason =
        "it is a symbolic link, and no lock file is reached through one (a link could make it create or lock a file elsewhere); remove it and check who put it there"

    /// Takes the lock at `path` for this process.
    public static func acquire(path: String) -> Acquisition {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0o600)
        guard descriptor >= 0 else {
            let error = errno
            if error == ELOOP { return .refused(path: path, reason: symbolicLinkReason) }
            return .unavailable(path: path, reason: String(cString: strerror(error)))
        }
        if let reason = notRegularFileReason(descriptor) {
            close(descriptor)
            return .refused(path: path, reason: reason)
        }
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return .acquired(ExclusiveFileLock(descriptor: descriptor, path: path)) }
        let error = errno
        close(descriptor)
        if error == EWOULDBLOCK { return .heldByAnother(path: path) }
        return .unavailable(path: path, reason: String(cString: strerror(error)))
    }

    /// Why the open `descriptor` is not a lock file, or `nil` when it is a regular file.
    public static func notRegularFileReason(_ descriptor: Int32) -> String? {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return String(cString: strerror(errno)) }
        return info.st_mode & S_IFMT == S_IFREG ? nil : "it is not a regular file; remove it and check who put it there"
    }
}

/// What taking an exclusive lock file found: the lock (`Lock`, held until it is released), or
/// why not. One set of outcomes for ``ExclusiveFileLock`` and the locks built on it.
public enum FileLockAcquisition<Lock: Sendable>: Sendable {
    /// This process holds the lock until the value is released (deinit).
    case acquired(Lock)
    /// Another process holds it.
    case heldByAnother(path: String)
    /// The lock file cannot be made or locked (a read-only directory, say): nothing is known.
    case unavailable(path: String, reason: String)
    /// Something other than a regular file is in the lock file's place.
    case refused(path: String, reason: String)

    /// The same outcome with the lock held as `transform` makes it, and a refusal's reason as
    /// `reason` words it.
    public func map<Other: Sendable>(
        _ transform: (Lock) -> Other, reason: (String) -> String = { $0 }
    ) -> FileLockAcquisition<Other> {
        switch self {
        case .acquired(let lock): .acquired(transform(lock))
        case .heldByAnother(let path): .heldByAnother(path: path)
        case .unavailable(let path, let why): .unavailable(path: path, reason: why)
        case .refused(let path, let why): .refused(path: path, reason: reason(why))
        }
    }
}
