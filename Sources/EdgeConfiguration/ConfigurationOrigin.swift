/// Where a configuration value came from, as error messages name it.
public enum ConfigurationOrigin: Sendable, Equatable, CustomStringConvertible {
    /// The YAML file at this path.
    case file(String)
    /// The environment variable of this name (e.g. `FLEETCAST_QOS_FIX`).
    case environment(String)
    /// The command-line flag of this name (e.g. `--qos-fix`).
    case flag(String)
    /// Not given: the built-in default.
    case defaultValue

    /// `/etc/fleetcast/agent.yaml`, `environment variable FLEETCAST_X`, `flag --x`, `default`.
    public var description: String {
        switch self {
        case .file(let path): return path
        case .environment(let name): return "environment variable \(name)"
        case .flag(let name): return "flag \(name)"
        case .defaultValue: return "default"
        }
    }
}
