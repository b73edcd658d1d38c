import FleetcastCore
import Foundation
import Logging

/// The default MQTT client id of `fleet-watch record`: `fleet-watch-record-{host}[-{group}]`
/// for the first recorder of that name on the host, `…-2`, `…-3` for the next ones running at
/// the same time. Each instance holds an exclusive lock on its own file in the state directory
/// (`{dir}/record-{id}.lock`) for as long as it runs, so two recorders of one share group on
/// one host never take each other's session over (they did, about once a second), and a
/// restarted one takes a free id of the same few again: the sessions the broker keeps for them
/// stay in use. Without a usable directory the first id is used, and that is said once.
enum RecorderInstance {
    /// The most recorders of one name on one host.
    static let maximumInstances = 32

    /// Where the lock files go: `--state-dir`, systemd's `$STATE_DIRECTORY` (the unit's
    /// `StateDirectory=`), `$XDG_STATE_HOME/fleetcast` or `~/.local/state/fleetcast`.
    static func directory(_ option: String?) -> String? {
        if let option { return option }
        let environment = ProcessInfo.processInfo.environment
        if let state = environment["STATE_DIRECTORY"]?.split(separator: ":").first, !state.isEmpty { return String(state) }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") { return xdg + "/fleetcast" }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.local/state/fleetcast" }
        return nil
    }

    /// The client id of the first free instance of `base` in `directory`, and the lock that
    /// keeps it this process's (hold it while recording).
    static func claim(base: String, directory: String?, logger: Logger) -> (clientID: String, lock: ExclusiveFileLock?) {
        guard let directory else {
            logger.warning(
                "No state directory for the recorder's client id: two recorders of one group on this host would take each other's session over; give each its own --client-id or --state-dir",
                metadata: ["mqtt.client_id": "\(base)"])
            return (base, nil)
        }
        try? FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let name = String(
            base.unicodeScalars.map {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-") ? Character($0) : "_"
            }.prefix(160))
        var problem: (path: String, reason: String)?
        for instance in 1...maximumInstances {
            let id = instance == 1 ? base : "\(base)-\(instance)"
            let suffix = instance == 1 ? "" : "-\(instance)"
            switch ExclusiveFileLock.acquire(path: "\(directory)/record-\(name)\(suffix).lock") {
            case .acquired(let lock): return (id, lock)
            case .heldByAnother: continue
            case .unavailable(let path, let reason), .refused(let path, let reason):
                problem = (path, reason)
            }
            break
        }
        logger.warning(
            "No instance lock for the recorder's client id; using the first: two recorders of one group on this host would take each other's session over",
            metadata: [
                "mqtt.client_id": "\(base)", "path": "\(problem?.path ?? directory)",
                "error": "\(problem?.reason ?? "\(maximumInstances) recorders of this name already run")",
            ])
        return (base, nil)
    }
}
