import FleetHistoryCore

extension PostgresPassFile {
    /// The password of the first entry for `location`'s host, port, database and user;
    /// `nil` when no entry is.
    public func password(for location: PostgresLocation) -> String? {
        entries.first {
            $0.matches(hostname: location.host, port: location.port, database: location.database, username: location.user)
        }?.password
    }
}
