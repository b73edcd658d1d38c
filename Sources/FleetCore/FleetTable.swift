import FleetProtocol
import GNSS

/// Renders a ``FleetState`` as a text table: vehicle, state, age, lat, lon, speed (km/h),
/// heading, sats, mode, gaps — plain for pipes and `--once`, or ANSI for a terminal redrawn
/// in place.
///
/// The state column says `online`, `offline`, `stale` (nothing new for longer than
/// ``staleAfter``; offline vehicles stay `offline`) or `-` (no status yet). The age column is
/// the shown fix's age by its own time (``VehicleSnapshot/fixAge(now:)``), or, without a fix,
/// the time since the vehicle's last message; gaps count only numbers that can be missing
/// (``VehicleSnapshot/gaps``).
public struct FleetTable: Sendable {
    /// How long without a new message before a vehicle is marked stale.
    public var staleAfter: Duration

    /// The column titles, in order.
    public static let columns = ["VEHICLE", "STATE", "AGE", "LAT", "LON", "KM/H", "HDG", "SATS", "MODE", "GAPS"]

    /// A renderer marking vehicles stale after `staleAfter` (default 150 s: the agent's
    /// default heartbeat while moving is 2 minutes; parked vehicles only after `VehicleSnapshot.parkedStaleAfter`, 75 minutes).
    public init(staleAfter: Duration = .seconds(150)) {
        self.staleAfter = staleAfter
    }

    /// The cells of one vehicle's row at `now`, in ``columns`` order. Angles in degrees
    /// (lat/lon to 6 decimals, heading to 1), speed in km/h, age in seconds/minutes/hours.
    public func cells(_ v: VehicleSnapshot, now: UTCTimestamp) -> [String] {
        let state: String
        if v.online == false {
            state = "offline"
        } else if v.isStale(now: now, after: staleAfter) {
            state = "stale"
        } else {
            state = v.online == true ? "online" : "-"
        }
        let headingDegrees = v.heading?.trueHeading ?? v.heading?.magneticHeading
        return [
            v.vehicle.rawValue, state, Self.format(age: v.fixAge(now: now) ?? v.age(now: now)),
            v.fix.map { Self.fixed($0.latitude, 6) } ?? "-",
            v.fix.map { Self.fixed($0.longitude, 6) } ?? "-",
            v.fix?.speed.map { Self.fixed($0 * 3.6, 1) } ?? "-",
            headingDegrees.map { Self.fixed($0, 1) } ?? "-",
            v.fix?.satellitesUsed.map(String.init) ?? "-",
            v.fix.map { $0.mode == .threeD ? "3D" : "2D" } ?? "-",
            String(v.gaps),
        ]
    }

    /// The table as plain text lines: a header, one row per vehicle (sorted by id, at most
    /// `maxRows`, then a `… N more` line), and a summary line.
    public func render(_ state: FleetState, now: UTCTimestamp, maxRows: Int = .max) -> String {
        lines(state, now: now, maxRows: maxRows).map { $0.text }.joined(separator: "\n") + "\n"
    }

    /// The table for a terminal: cursor home, each line cleared to its end, stale rows dim,
    /// offline rows red, the rest of the screen cleared — a redraw in place without flicker.
    public func renderANSI(_ state: FleetState, now: UTCTimestamp, maxRows: Int = .max) -> String {
        var out = "\u{1B}[H"
        for line in lines(state, now: now, maxRows: maxRows) {
            switch line.style {
            case .header: out += "\u{1B}[1m" + line.text + "\u{1B}[0m"
            case .stale: out += "\u{1B}[2m" + line.text + "\u{1B}[0m"
            case .offline: out += "\u{1B}[31m" + line.text + "\u{1B}[0m"
            case .normal: out += line.text
            }
            out += "\u{1B}[K\n"
        }
        return out + "\u{1B}[J"
    }

    private enum Style { case header, normal, stale, offline }

    private func lines(_ state: FleetState, now: UTCTimestamp, maxRows: Int) -> [(text: String, style: Style)] {
        let all = state.vehicles
        let shown = all.prefix(max(0, maxRows))
        let rows = shown.map { cells($0, now: now) }
        var widths = Self.columns.map(\.count)
        for row in rows {
            for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, cell in
                let pad = String(repeating: " ", count: widths[i] - cell.count)
                return i == 0 || i == 1 || i == 8 ? cell + pad : pad + cell  // text left, numbers right
            }.joined(separator: "  ")
        }
        var out: [(String, Style)] = [(line(Self.columns), .header)]
        for row in rows {
            out.append((line(row), row[1] == "offline" ? .offline : row[1] == "stale" ? .stale : .normal))
        }
        if all.count > shown.count { out.append(("… \(all.count - shown.count) more", .normal)) }
        out.append(("\(all.count) vehicles, \(state.malformedCount) malformed messages", .normal))
        return out
    }

    package static func format(age: Duration) -> String {
        let s = age.components.seconds
        if s < 120 { return "\(s)s" }
        if s < 7200 { return "\(s / 60)m" }
        if s < 172_800 { return "\(s / 3600)h" }
        return "\(s / 86400)d"
    }

    /// `value` with `decimals` decimals (rounded half away from zero), no exponent.
    package static func fixed(_ value: Double, _ decimals: Int) -> String {
        guard value.isFinite else { return "-" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        guard scaled < 9e15 else { return String(value) }
        let n = Int64(scaled)
        let unit = Int64(scale)
        let whole = n / unit, frac = n % unit
        var text = (value < 0 && n != 0 ? "-" : "") + String(whole)
        if decimals > 0 {
            let f = String(frac)
            text += "." + String(repeating: "0", count: decimals - f.count) + f
        }
        return text
    }
}
