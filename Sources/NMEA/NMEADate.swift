/// A calendar date (UTC) as a receiver reported it in RMC or ZDA.
public struct NMEADate: Sendable, Hashable {
    /// Full Gregorian year.
    public var year: Int
    /// Month, 1...12.
    public var month: Int
    /// Day of the month, 1...31.
    public var day: Int

    /// A date from its parts (not range-checked; see ``UTCTimestamp`` for that).
    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }
}
