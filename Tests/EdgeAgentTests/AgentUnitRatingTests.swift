import FleetcastTestSupport
import Foundation
import Testing

/// The agent unit's comment says what `systemd-analyze security --offline=yes` rates it; with
/// the systemd the comment names, the rating is what it says.
@Suite("The agent unit's security rating")
struct AgentUnitRatingTests {
    @Test("the rating in deploy/fleetcast-agent.service's comment is systemd-analyze's")
    func ratingInCommentIsCurrent() async throws {
        let unit = RepositoryPath.of("deploy/fleetcast-agent.service")
        let text = try String(contentsOfFile: unit, encoding: .utf8)
        let comment = text.split(separator: "\n").prefix { $0.hasPrefix("#") }.map { $0.dropFirst(2) }.joined(separator: " ")
        let claim = try #require(
            comment.firstMatch(of: /rates it (\d+\.\d) OK with systemd (\d+)/), "the comment names the rating and the systemd: \(comment)")
        let (rating, version) = (String(claim.output.1), String(claim.output.2))

        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else { return }
        let work = try TemporaryDirectory(prefix: "fleetcast-unit-rating")
        defer { work.remove() }
        let versionCheck = try TestProcess("/usr/bin/systemd-analyze", ["--version"], directory: work.path, name: "version")
        #expect(try await versionCheck.waitForExit(timeout: .seconds(30)) == 0)
        guard versionCheck.standardOutput.hasPrefix("systemd \(version) ") else { return }  // another systemd rates otherwise

        let analysis = try TestProcess(
            "/usr/bin/systemd-analyze", ["security", "--offline=yes", "--no-pager", unit], directory: work.path, name: "security")
        _ = try await analysis.waitForExit(timeout: .seconds(60))
        let output = analysis.standardOutput + analysis.standardError
        let measured = try #require(output.firstMatch(of: /Overall exposure level for fleetcast-agent\.service: (\d+\.\d)/), "\(output)")
        #expect(String(measured.output.1) == rating, "systemd \(version) rates it \(measured.output.1); the comment says \(rating)")
    }
}
