import Foundation

/// The checkout's own files (fixtures, the sample configuration, the shipped broker files) for
/// tests, found from the calling test's source file (links resolved, should the checkout be
/// reached through one).
public enum RepositoryPath {
    /// The absolute path of `relative` (e.g. `config/agent.yaml`) in the checkout holding the
    /// caller's source file: the nearest folder above it, links resolved, with a `Package.swift`.
    public static func of(_ relative: String, from filePath: String = #filePath) -> String {
        var directory = URL(fileURLWithPath: filePath).resolvingSymlinksInPath().deletingLastPathComponent()
        while directory.path != "/" {
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) {
                return directory.appendingPathComponent(relative).path
            }
            directory = directory.deletingLastPathComponent()
        }
        return relative
    }
}

/// The environment of an agent started by a test or a benchmark that counts every fix: the
/// default reporting policy thins a vehicle's fixes for its cellular link.
public let agentEveryFixEnvironment = ["FLEETCAST_REPORT_EVERY_FIX": "1"]
