import GNSS

/// Joins the heading of each instant into that instant's fix, so that one message carries
/// both (``GNSS/Fix/heading``), as a plain value with no clocks.
///
/// A source reports a receiver cycle's fix and heading as two events, in the order its
/// sentences come: HDT after the cycle's last fix sentence gives the fix first, a heading
/// sentence early in the cycle gives the heading first. An *instant* is a time: a heading
/// belongs to the fix with its time (NMEA headings carry the cycle's time, gpsd's ATT its own).
///
/// **Holding.** The joiner learns whether the source pairs them: once a fix and a heading of
/// the same time have been seen, the first of the next instant (fix or heading) is held for its
/// partner. Before anything is known (the run's first instant) the first event is held too, so
/// that the first instant is one message, not a heading alone and then its fix. What is held is
/// let go, alone, by the next event that is not its partner (the next cycle's fix, a heading of
/// another time, a source state), by ``release()`` (the publisher's tick, once it has been held
/// ``maximumHold``; the finish), never dropped. A source that stops pairing (a compass
/// unplugged) costs one fix held for one cycle, after which nothing is held. A source without
/// headings has its first fix held for one cycle (or ``maximumHold``), then none.
///
/// **Alone.** A heading whose instant's fix went out already (a 10 Hz compass beside a 1 Hz
/// receiver: the nine other readings of the cycle), a heading without time, and a heading while
/// no fix comes (the fix lost) go out on their own. A second fix of the same time (a corrected
/// fix) replaces the held one, which is counted (``superseded``).
///
/// The publisher's tick (its sync loop, once per sync interval: 1 s by default) lets go of what
/// has been held ``maximumHold``: a source that falls silent right after a fix holds it at most
/// that long plus one interval.
package struct InstantJoiner: Sendable {
    /// What to publish: a fix (with its heading, when joined), or a heading alone.
    package enum Output: Sendable, Equatable {
        case fix(Fix)
        case heading(Heading)
    }

    /// The longest a fix or heading waits for its partner before the publisher's tick lets it go.
    package static let maximumHold: Duration = .milliseconds(500)

    /// What waits for its partner, and since when.
    package private(set) var held: Output?
    private(set) var heldSince: ContinuousClock.Instant?
    /// The last instant paired a fix and a heading: the next one is expected to pair too
    /// (`nil`: not known yet, as at the start; the first event waits for its partner).
    package private(set) var pairing: Bool?
    /// Times of the last fix and heading let go (alone or joined).
    private var lastFixTime: UTCTimestamp?
    private var lastHeadingTime: UTCTimestamp?
    /// Fixes that went out with their heading.
    package private(set) var joined: UInt64 = 0
    /// Held fixes replaced by a corrected fix of the same time before they went out (counted
    /// as skipped: the policy skips such a duplicate that comes after its fix went out).
    package private(set) var superseded: UInt64 = 0

    /// A joiner holding nothing.
    package init() {}

    /// A fix from the source (with a position): what to publish now, oldest first.
    package mutating func fix(_ fix: Fix, at now: ContinuousClock.Instant) -> [Output] {
        var out: [Output] = []
        switch held {
        case .heading(let heading) where heading.time == fix.time:
            held = nil
            return [join(fix, heading)]
        case .fix(let previous) where previous.time == fix.time:
            held = .fix(fix)  // a corrected fix of the same time: it replaces the held one
            superseded += 1
            return []
        case .fix, .heading:
            pairing = false  // its partner did not come before the next instant
            out += release()
        case nil: break
        }
        if lastHeadingTime == fix.time {
            // Its heading went out first and alone: they pair, the next instant will be held.
            pairing = true
        } else if pairing != false {
            hold(.fix(fix), at: now)
            return out
        }
        lastFixTime = fix.time
        out.append(.fix(fix))
        return out
    }

    /// A heading from the source: what to publish now, oldest first.
    package mutating func heading(_ heading: Heading, at now: ContinuousClock.Instant) -> [Output] {
        var out: [Output] = []
        switch held {
        case .fix(let fix) where heading.time == fix.time:
            held = nil
            return [join(fix, heading)]
        case .fix:
            pairing = false
            out += release()
        case .heading(let previous):
            // Another reading of the instant goes on waiting for the fix; one of a later instant
            // says the earlier's fix did not come.
            if previous.time != heading.time { pairing = false }
            out += release()
        case nil: break
        }
        guard let time = heading.time else { return out + [.heading(heading)] }
        if lastFixTime == time {
            // Its fix went out already: alone, and the next instant's fix waits for its heading.
            pairing = true
        } else if pairing != false {
            hold(.heading(heading), at: now)
            return out
        }
        lastHeadingTime = time
        out.append(.heading(heading))
        return out
    }

    /// Lets go of what is held (a source state, a fix without a position, the finish). Held
    /// before anything was known, its partner did not come first: the source is taken not to
    /// pair, until an instant shows it does.
    package mutating func release() -> [Output] {
        guard let output = held else { return [] }
        if pairing == nil { pairing = false }
        held = nil
        heldSince = nil
        switch output {
        case .fix(let fix): lastFixTime = fix.time
        case .heading(let heading): lastHeadingTime = heading.time
        }
        return [output]
    }

    /// Lets go of what has been held at least ``maximumHold`` by `now` (the publisher's tick).
    package mutating func releaseOverdue(at now: ContinuousClock.Instant) -> [Output] {
        guard let heldSince, now - heldSince >= Self.maximumHold else { return [] }
        pairing = false  // a partner that late is not waited for again until one comes
        return release()
    }

    private mutating func hold(_ output: Output, at now: ContinuousClock.Instant) {
        held = output
        heldSince = now
    }

    private mutating func join(_ fix: Fix, _ heading: Heading) -> Output {
        heldSince = nil
        pairing = true
        joined += 1
        lastFixTime = fix.time
        lastHeadingTime = fix.time
        var fix = fix
        fix.heading = heading
        return .fix(fix)
    }
}
