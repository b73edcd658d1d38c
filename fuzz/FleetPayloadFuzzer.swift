// libFuzzer harness: received contract payloads → FleetPayload.decodeFix, decodeHeading,
// decodeStatus and decodeBacklog, each with and without the topic's vehicle.
import FleetProtocol
import GNSS

func checkStatusRoundTrip(_ status: VehicleStatus) {
    let first = FleetPayload.encode(status)
    do {
        let back = try FleetPayload.decodeStatus(first, vehicle: nil)
        check(back == status, "a status changed in a round trip: \(status) → \(back)")
        check(FleetPayload.encode(back) == first, "re-encoding a decoded status changed its bytes")
    } catch {
        check(false, "an encoded status does not decode: \(error) in \(String(decoding: first, as: UTF8.self))")
    }
}

func checkBacklog(_ batch: FleetPayload.DecodedBacklog, payloadCount: Int) {
    check(batch.events.count + batch.refused.count <= FleetPayload.maximumBacklogEvents, "more events than a batch may hold")
    let indices = batch.refused.map(\.index)
    check(zip(indices, indices.dropFirst()).allSatisfy { $0 < $1 } && indices.allSatisfy { $0 >= 0 },
          "refused indices not rising: \(indices)")
    check(indices.allSatisfy { $0 < batch.events.count + batch.refused.count }, "a refused index past the batch")

    // The batch a writer makes from the decoded events decodes to the same events (to the
    // payload's precision), nothing refused.
    var writer = FleetPayload.BacklogWriter(vehicle: batch.vehicle, maximumBytes: FleetPayload.maximumPayloadBytes)
    var expected: [FleetPayload.BacklogEvent] = []
    for event in batch.events {
        let appended: Bool
        let decodedAlone: FleetPayload.BacklogEvent
        switch event {
        case .fix(let d):
            check(d.vehicle == batch.vehicle, "a backlog fix of another vehicle")
            appended = writer.append(kind: .fix, payload: FleetPayload.encode(d.fix, vehicle: d.vehicle.rawValue, seq: d.seq))
            decodedAlone = .fix(checkFixRoundTrip(d.fix, vehicle: d.vehicle, seq: d.seq))
        case .heading(let d):
            check(d.vehicle == batch.vehicle, "a backlog heading of another vehicle")
            appended = writer.append(kind: .heading, payload: FleetPayload.encode(d.heading, vehicle: d.vehicle.rawValue, seq: d.seq))
            decodedAlone = .heading(checkHeadingRoundTrip(d.heading, vehicle: d.vehicle, seq: d.seq))
        }
        if !appended { break }
        expected.append(decodedAlone)
    }
    let rewritten = writer.finish()
    check(rewritten.count <= FleetPayload.maximumPayloadBytes, "a writer's batch over its limit")
    do {
        let back = try FleetPayload.decodeBacklog(rewritten, vehicle: batch.vehicle)
        check(back.refused.isEmpty, "a written batch has refused events: \(back.refused)")
        check(back.events == expected, "a written batch decodes to other events")
        let backNil = try FleetPayload.decodeBacklog(rewritten, vehicle: nil)
        check(backNil == back, "a written batch decodes differently without the topic's vehicle")
    } catch {
        check(false, "a written batch does not decode: \(error)")
    }
}

/// The most key comparisons a payload may cost: each of the 64 members allowed against those
/// before it, short keys (at most 16 bytes) compared byte for byte, long ones by hash and by
/// bytes only for a real duplicate (which ends the parse). A superlinear check (thousands of
/// keys compared pairwise) fails it.
func checkLinearDuplicateCheck(_ payload: [UInt8]) {
    let comparisons = FleetPayload.duplicateKeyCheckComparisons(payload)
    check(
        comparisons <= 64 * 63 / 2 * 17 + payload.count,
        "the duplicate-key check made \(comparisons) comparisons for \(payload.count) bytes")
    _ = wideChecked
}

/// Once per run: 2,001 distinct keys are refused at the cap, never compared pairwise.
let wideChecked: Void = {
    var wide = Array("{".utf8)
    for i in 0..<2_000 { wide += Array("\"k\(i)\":1,".utf8) }
    wide += Array("\"z\":1}".utf8)
    let comparisons = FleetPayload.duplicateKeyCheckComparisons(wide)
    check(comparisons <= 64 * 63 / 2 * 17, "a payload of 2,001 keys made \(comparisons) comparisons")
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFleetPayload(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let payload = Array(UnsafeBufferPointer(start: data, count: size))
    checkLinearDuplicateCheck(payload)
    for vehicle in [nil, fuzzVehicle] {
        if let d = try? FleetPayload.decodeFix(payload, vehicle: vehicle) {
            checkSaneFix(d.fix)
            check(vehicle == nil || d.vehicle == vehicle, "decodeFix changed the topic's vehicle")
            checkFixRoundTrip(d.fix, vehicle: d.vehicle, seq: d.seq)
        }
        if let d = try? FleetPayload.decodeHeading(payload, vehicle: vehicle) {
            checkSaneHeading(d.heading)
            check(vehicle == nil || d.vehicle == vehicle, "decodeHeading changed the topic's vehicle")
            checkHeadingRoundTrip(d.heading, vehicle: d.vehicle, seq: d.seq)
        }
        if let s = try? FleetPayload.decodeStatus(payload, vehicle: vehicle) {
            check(vehicle == nil || s.vehicle == vehicle, "decodeStatus changed the topic's vehicle")
            checkStatusRoundTrip(s)
        }
        if let b = try? FleetPayload.decodeBacklog(payload, vehicle: vehicle) {
            check(vehicle == nil || b.vehicle == vehicle, "decodeBacklog changed the topic's vehicle")
            checkBacklog(b, payloadCount: size)
        }
    }
    return 0
}
