import Foundation

/// A real mosquitto with its dynamic-security plugin, for tests whose broker must *refuse* a
/// subscription and change its mind while clients are connected. (mosquitto's `acl_file` only
/// filters what it delivers: it grants every SUBSCRIBE. The plugin checks subscriptions, answers
/// a refused one with SUBACK 0x87 (MQTT 5) or 0x80 (3.1.1), and disconnects the clients of a
/// role it changes, so they reconnect under the new rules.)
///
/// Each user gets a role of the same name; rules are changed with ``control(_:)``, which runs
/// `mosquitto_ctrl … dynsec` as the plugin's administrator.
public struct DynamicSecurityBroker: Sendable {
    /// The broker: plain MQTT on 127.0.0.1, no anonymous access.
    public let broker: TestBroker
    /// The plugin's rule file lives here (the broker rewrites it on every change).
    private let stateDirectory: String
    private static let administrator = "fleetcast-admin"
    private static let administratorPassword = "admin-secret"

    private init(broker: TestBroker, stateDirectory: String) {
        self.broker = broker
        self.stateDirectory = stateDirectory
    }

    /// The plugin shipped with Debian's mosquitto package, for this machine's architecture.
    public static var pluginPath: String? {
        let libraries = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib")) ?? []
        return (["/usr/lib"] + libraries.map { "/usr/lib/\($0)" })
            .map { "\($0)/mosquitto_dynamic_security.so" }
            .first { FileManager.default.fileExists(atPath: $0) }
    }

    /// Starts mosquitto with the plugin and an empty rule set (only the administrator).
    public static func start() async throws -> DynamicSecurityBroker {
        guard let plugin = pluginPath else {
            throw TestSupportError.processFailed(
                "mosquitto_dynamic_security.so", status: -1, output: "not installed (Debian package mosquitto)")
        }
        let stateDirectory = try makeTemporaryDirectory(prefix: "fleetcast-dynsec")
        let rules = "\(stateDirectory)/dynamic-security.json"
        try await TestBroker.runTool(
            "/usr/bin/mosquitto_ctrl", ["dynsec", "init", rules, administrator, administratorPassword], in: stateDirectory)
        let broker: TestBroker
        do {
            broker = try await start(rules: rules, plugin: plugin)
        } catch {
            try? FileManager.default.removeItem(atPath: stateDirectory)
            throw error
        }
        return DynamicSecurityBroker(broker: broker, stateDirectory: stateDirectory)
    }

    private static func start(rules: String, plugin: String) async throws -> TestBroker {
        try await TestBroker.start(tls: false) { port, _ in
            """
            user root
            persistence false
            log_dest stderr
            log_type all
            listener \(port) 127.0.0.1
            allow_anonymous false
            plugin \(plugin)
            plugin_opt_config_file \(rules)

            """
        }
    }

    /// Runs `mosquitto_ctrl dynsec <arguments>` against the broker as its administrator.
    public func control(_ arguments: [String]) async throws {
        try await TestBroker.runTool(
            "/usr/bin/mosquitto_ctrl",
            ["-h", "127.0.0.1", "-p", "\(broker.port)", "-u", Self.administrator, "-P", Self.administratorPassword, "dynsec"] + arguments,
            in: broker.directory)
    }

    /// Adds user `name` (password `password`) with a role of the same name that may subscribe
    /// to `subscribe` and publish to `publish` (topic filters).
    public func addUser(_ name: String, password: String, subscribe: [String], publish: [String] = []) async throws {
        try await control(["createRole", name])
        for filter in subscribe { try await control(["addRoleACL", name, "subscribePattern", filter, "allow"]) }
        for filter in publish { try await control(["addRoleACL", name, "publishClientSend", filter, "allow"]) }
        try await control(["createClient", name, "-p", password])
        try await control(["addClientRole", name, name])
    }

    /// Stops the broker and removes its files.
    public func shutdown() async {
        await broker.shutdown()
        try? FileManager.default.removeItem(atPath: stateDirectory)
    }
}
