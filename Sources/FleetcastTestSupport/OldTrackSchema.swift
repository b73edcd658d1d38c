/// The track tables as an earlier fleet-watch left them, without rows: what the migration
/// tests and `fleetcast-bench record` start from. Version 1 keyed fixes and headings by
/// vehicle and seq; version 2 added the run to the key; version 3 gave each fix the heading
/// of its instant. (Version 4 made them partitioned, as `TrackSchema` does now.)
public enum OldTrackSchema {
    /// The SQL that makes version `version` (1, 2 or 3) of the schema, its schema table saying
    /// so (every version up to it applied).
    public static func sql(version: Int) -> String {
        precondition((1...3).contains(version), "no old track schema \(version)")
        let run = version >= 2 ? ", run bigint NOT NULL DEFAULT 0" : ""
        let fixesHeading = version >= 3 ? ", heading double precision,\n    mag_heading double precision, heading_source text" : ""
        func key(_ table: String) -> String {
            version >= 2 ? "CONSTRAINT \(table)_pkey PRIMARY KEY (vehicle, run, seq)" : "PRIMARY KEY (vehicle, seq)"
        }
        return """
            CREATE TABLE fleetcast_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
            INSERT INTO fleetcast_schema (version) VALUES \((1...version).map { "(\($0))" }.joined(separator: ", "));
            CREATE TABLE fleetcast_fixes (vehicle text NOT NULL, seq bigint NOT NULL, time timestamptz NOT NULL,
                lat double precision NOT NULL, lon double precision NOT NULL, alt_hae double precision, alt_msl double precision,
                speed double precision, track double precision, climb double precision, mode smallint NOT NULL, sats smallint,
                hdop double precision, eph double precision, epv double precision, backlog boolean NOT NULL,
                received_at timestamptz NOT NULL DEFAULT now()\(run)\(fixesHeading), \(key("fleetcast_fixes")));
            CREATE INDEX fleetcast_fixes_vehicle_time ON fleetcast_fixes (vehicle, time);
            CREATE TABLE fleetcast_headings (vehicle text NOT NULL, seq bigint NOT NULL, time timestamptz,
                heading double precision, mag_heading double precision, source text, backlog boolean NOT NULL,
                received_at timestamptz NOT NULL DEFAULT now()\(run), \(key("fleetcast_headings")));
            CREATE INDEX fleetcast_headings_vehicle_time ON fleetcast_headings (vehicle, time);

            """
    }
}
