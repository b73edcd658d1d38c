import FleetcastTestSupport

/// Waits (20 s at most) until `fleet-watch serve`, just started as `server`, says it serves the
/// live map; stops it and throws when it exits or does not get there.
func waitUntilServeListens(_ server: TestProcess) async throws {
    do {
        try await waitUntil("fleet-watch serve to listen", timeout: .seconds(20), interval: .milliseconds(50)) {
            if !server.isRunning { throw TestSupportError.processFailed(server.commandLine, status: -1, output: server.standardError) }
            return server.standardError.contains("Serving the live map")
        }
    } catch {
        await server.stop()
        throw error
    }
}
