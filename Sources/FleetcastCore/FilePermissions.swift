#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Who may read a file: the one check of secrets and history on disk. A password file others
/// can read, or an outbox of a vehicle's whereabouts readable by every user of the machine,
/// is a leak; these say so, and keep what Fleetcast creates its user's alone.
public enum FilePermissions {
    /// Whether users other than the owner and the group can read `path` (its mode has the
    /// "others" read bit); `false` when it cannot be examined.
    public static func isReadableByOthers(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        return info.st_mode & S_IROTH != 0
    }

    /// Takes group and others' permissions away from `path` (0700 for a directory, 0600 for a
    /// file), when this process owns it and they have any; returns whether `path` is then
    /// private. A missing path is not an error (false).
    @discardableResult
    public static func makePrivate(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        let loose = info.st_mode & (S_IRWXG | S_IRWXO)
        guard loose != 0 else { return true }
        guard info.st_uid == geteuid() else { return false }
        return chmod(path, info.st_mode & 0o7777 & ~(S_IRWXG | S_IRWXO)) == 0
    }
}
