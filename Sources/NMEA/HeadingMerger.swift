import GNSS

/// Merges the heading sentences of one instant (THS, HDT, HDG, HDM) into one `Heading`.
///
/// Receivers often say the same heading twice: a dual-antenna receiver in THS and HDT, a
/// magnetic compass in HDG and HDM. Heading sentences carry no time, so an *instant* is a
/// run of heading sentences of different kinds within one receiver cycle (the cycle's time
/// is the heading's time). It ends when a kind already in it comes again (the sensor's
/// next reading: a 10 Hz compass next to a 1 Hz GNSS gives ten instants a cycle), when the
/// cycle ends, or at the end of input.
///
/// **Values**: the true heading comes from THS, else HDT, else HDG when it gives the
/// variation (magnetic + variation); the magnetic heading from HDG (sensor + deviation),
/// else HDM; deviation and variation from HDG. **Precedence** when THS and HDT disagree:
/// THS wins, because it carries a mode indicator and is dropped by the parser when the
/// receiver marks it invalid (`V`), whereas HDT cannot say it is invalid. **`source`**
/// names the sentence that gave the true heading (`THS`, `HDT` or `HDG`); without a true
/// heading, the one that gave the magnetic heading (`HDG`, else `HDM`).
///
/// **Emission**: as the epoch assembler learns the cycle ender, the merger learns which
/// kinds make up an instant (those of the last instant that ended). Once the current
/// instant has all of them it is emitted at once, without waiting for the cycle to end;
/// until then it is emitted when it ends. A sentence that adds to an instant already
/// emitted (a kind the receiver did not send before) emits the corrected heading, with the
/// same time.
struct HeadingMerger {
    /// The kinds in the current instant, one bit each (``NMEASentenceKind/bit``).
    private var kinds: UInt32 = 0
    /// The kinds of the last instant that ended: the current one is complete with them.
    private var expected: UInt32 = 0
    private var ths: Double?, hdt: Double?
    private var hdg: HeadingSentence?, hdm: Double?
    /// The heading emitted for the current instant, if any.
    private var emitted: Heading?

    /// Whether a sentence of this kind starts a new instant (the current one has it already).
    func isRepeat(_ kind: NMEASentenceKind) -> Bool {
        kinds & kind.bit != 0
    }

    /// Whether the current instant has every kind the receiver sent in the last one
    /// (never before an instant has ended: until then, which kinds come is unknown).
    var isComplete: Bool {
        expected != 0 && kinds & expected == expected
    }

    /// Adds a heading sentence to the current instant.
    mutating func add(_ kind: NMEASentenceKind, _ h: HeadingSentence) {
        kinds |= kind.bit
        switch kind {
        case .ths: ths = h.trueHeading
        case .hdt: hdt = h.trueHeading
        case .hdg: hdg = h
        default: hdm = h.magneticHeading
        }
    }

    /// The merged heading of the current instant if it differs from what was emitted for
    /// it (`nil`: nothing new to say); records it as emitted.
    mutating func take(time: UTCTimestamp?) -> Heading? {
        guard kinds != 0 else { return nil }
        let trueHeading: Double?
        let source: HeadingSource
        if let ths {
            (trueHeading, source) = (ths, .ths)
        } else if let hdt {
            (trueHeading, source) = (hdt, .hdt)
        } else if let hdg {
            (trueHeading, source) = (hdg.trueHeading, .hdg)
        } else {
            (trueHeading, source) = (nil, .hdm)
        }
        let heading = Heading(
            time: time, trueHeading: trueHeading, magneticHeading: hdg?.magneticHeading ?? hdm,
            magneticDeviation: hdg?.deviation, magneticVariation: hdg?.variation, source: source
        )
        guard heading != emitted else { return nil }
        emitted = heading
        return heading
    }

    /// Ends the current instant: its kinds become the ones the next instant waits for.
    mutating func end() {
        guard kinds != 0 else { return }
        expected = kinds
        kinds = 0
        ths = nil
        hdt = nil
        hdg = nil
        hdm = nil
        emitted = nil
    }
}
