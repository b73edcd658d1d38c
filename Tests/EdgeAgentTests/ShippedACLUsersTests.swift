import FleetcastTestSupport
import Foundation
import Testing

/// The shipped files agree with one another: every user name a shipped fleet unit's settings or
/// the broker's own files tell an operator to use has a block in `deploy/mosquitto/fleetcast.acl`.
/// mosquitto accepts a subscription of a user it has no block for and then delivers it nothing,
/// so a missing block is a recorder that logs "Subscribed" and writes no row.
@Suite struct ShippedACLUsersTests {
    /// The `user NAME` lines of the ACL.
    static func aclUsers() throws -> Set<String> {
        let acl = try String(contentsOfFile: RepositoryPath.of("deploy/mosquitto/fleetcast.acl"), encoding: .utf8)
        return Set(
            acl.split(separator: "\n").compactMap { line -> String? in
                let words = line.split(separator: " ")
                return words.count == 2 && words[0] == "user" ? String(words[1]) : nil
            })
    }

    /// The user names (`word+word`) named in a file: `mqtts://watch+recorder@…`, `user watch+map`.
    static func userNames(in path: String) throws -> Set<String> {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var names = Set<String>()
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_+")
        for word in text.split(whereSeparator: { !allowed.contains($0) }) where word.contains("+") {
            let parts = word.split(separator: "+", omittingEmptySubsequences: false)
            if parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.first!.isLetter }) { names.insert(String(word)) }
        }
        return names
    }

    @Test func everyUserNameTheShippedFilesNameHasAnACLBlock() throws {
        let users = try Self.aclUsers()
        let fleet = RepositoryPath.of("deploy/fleet")
        let files = try FileManager.default.contentsOfDirectory(atPath: fleet).filter { $0.hasSuffix(".conf") }.map { "\(fleet)/\($0)" }
        #expect(files.count >= 4)
        var named = Set<String>()
        for file in files + [RepositoryPath.of("deploy/mosquitto/fleetcast.conf")] { named.formUnion(try Self.userNames(in: file)) }
        #expect(named.isSuperset(of: ["watch+recorder", "watch+map"]), "\(named)")
        let missing = named.subtracting(users)
        #expect(missing.isEmpty, "user names the shipped files tell an operator to use, without an ACL block: \(missing.sorted())")
    }
}
