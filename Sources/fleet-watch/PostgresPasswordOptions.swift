import ArgumentParser
import FleetHistory
import FleetHistoryCore
import FleetcastCore
import Foundation
import Logging
import MQTT

/// `--postgres-password-file`, and the one rule every command that reaches PostgreSQL follows
/// (`record`, `history`, `gaps` through ``PostgresOptions``, `serve --postgres`): the password is
/// never in the URL, where every user of the machine can read it (`ps`, `/proc/PID/cmdline`).
/// It comes from, first found first:
/// 1. the first line of `--postgres-password-file` (as `--password-file` is read for the broker);
/// 2. `PGPASSWORD` (what the units' secrets file, `/etc/fleetcast/fleet-watch.secrets`, sets);
/// 3. a libpq password file: the one `PGPASSFILE` names, or `~/.pgpass` (``PostgresPassFile``).
///
/// An empty `PGPASSWORD` or `PGPASSFILE` counts as not set, as with libpq.
struct PostgresPasswordOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "File whose first line is the PostgreSQL password (else PGPASSWORD, else the password file PGPASSFILE or ~/.pgpass); never in the URL.",
            valueName: "path"))
    var postgresPasswordFile: String?

    /// Refuses a `--postgres` URL with a password (shown redacted), or one that is not a
    /// PostgreSQL location; a usage error, before anything connects.
    static func check(url: String, option: String = "--postgres") throws {
        if URLComponents(string: url)?.percentEncodedPassword != nil {
            throw ValidationError(
                """
                \(option) \(BrokerURL.redactingPassword(url)): a password does not belong in the URL, where every user \
                of this machine can read it; give it in PGPASSWORD (the unit's secrets file, \
                /etc/fleetcast/fleet-watch.secrets), in a file named by --postgres-password-file, or in a libpq \
                password file (PGPASSFILE, or ~/.pgpass)
                """)
        }
        do { _ = try PostgresLocation(parsing: url) } catch { throw ValidationError("\(option): \(error.description)") }
    }

    /// The database of `url` (checked by ``check(url:option:)``) with its password from where
    /// the type's documentation says; warns through `logger` about a password file others can
    /// read, or one that libpq would not use either.
    func location(url: String, environment: [String: String], logger: Logger) throws -> PostgresLocation {
        try Self.check(url: url)
        var location = try PostgresLocation(parsing: url)
        if let postgresPasswordFile {
            if FilePermissions.isReadableByOthers(postgresPasswordFile) {
                logger.warning(
                    "The PostgreSQL password file can be read by every user of this machine; make it readable by fleet-watch's user only (chmod 0600)",
                    metadata: ["file": "\(postgresPasswordFile)"])
            }
            let password: String?
            do { password = try PasswordFile.read(postgresPasswordFile) } catch {
                throw ValidationError("--postgres-password-file: \(error)")
            }
            guard let password else { throw ValidationError("cannot read --postgres-password-file \(postgresPasswordFile): no such file") }
            guard !password.isEmpty else {
                throw ValidationError("--postgres-password-file \(postgresPasswordFile): its first line, the password, is empty")
            }
            location.password = password
        } else if let password = environment["PGPASSWORD"], !password.isEmpty {
            location.password = password
        } else if let path = Self.passFilePath(environment) {
            do {
                location.password = try PostgresPassFile.read(path)?.password(for: location)
            } catch {
                // As libpq: the file is not used, and the connection goes without a password.
                logger.warning(
                    "The PostgreSQL password file is not used, as libpq would not use it",
                    metadata: ["file": "\(path)", "reason": "\(error.reason)"])
            }
        }
        return location
    }

    /// The libpq password file: `PGPASSFILE`, or `.pgpass` in `HOME`; `nil` without either.
    static func passFilePath(_ environment: [String: String]) -> String? {
        if let path = environment["PGPASSFILE"], !path.isEmpty { return path }
        guard let home = environment["HOME"], !home.isEmpty else { return nil }
        return (home.hasSuffix("/") ? home : home + "/") + ".pgpass"
    }
}
