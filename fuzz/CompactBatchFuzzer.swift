// libFuzzer harness: compact batches (the `…/batch` topic's binary layout) →
// FleetPayload.decodeCompactBatch, with and without the topic's vehicle.
import FleetProtocol
import GNSS

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCompactBatch(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let payload = Array(UnsafeBufferPointer(start: data, count: size))
    for vehicle in [nil, fuzzVehicle] {
        guard let batch = try? FleetPayload.decodeCompactBatch(payload, vehicle: vehicle) else { continue }
        check(vehicle == nil || batch.vehicle == vehicle, "decodeCompactBatch changed the topic's vehicle")
        check(batch.events.count + batch.refused.count <= FleetPayload.maximumBacklogEvents, "more events than a batch may hold")
        let indices = batch.refused.map(\.index)
        check(zip(indices, indices.dropFirst()).allSatisfy { $0 < $1 }, "refused indices not rising: \(indices)")
        // The batch a writer makes from the decoded events decodes to the same events, exactly
        // (the compact encoding carries what the JSON form does), in the same run.
        let run = batch.events.first?.number?.run ?? 0
        var writer = FleetPayload.CompactBatchWriter(vehicle: batch.vehicle, run: run, maximumBytes: FleetPayload.maximumPayloadBytes)
        var written: [FleetPayload.BacklogEvent] = []
        for event in batch.events {
            check(event.number?.run ?? 0 == run, "one compact batch with two runs")
            let appended: Bool
            switch event {
            case .fix(let d):
                checkSaneFix(d.fix)
                appended = writer.append(d.fix, seq: d.seq ?? 0)
            case .heading(let d):
                checkSaneHeading(d.heading)
                appended = writer.append(d.heading, seq: d.seq ?? 0)
            }
            if !appended { break }
            written.append(event)
        }
        do {
            let back = try FleetPayload.decodeCompactBatch(writer.finish(), vehicle: batch.vehicle)
            check(back.refused.isEmpty, "a written compact batch has refused events: \(back.refused)")
            check(back.events == written, "a written compact batch decodes to other events")
            let sniffed = try FleetPayload.decodeBatch(writer.finish(), vehicle: nil)
            check(sniffed == back, "decodeBatch reads a compact batch differently")
        } catch {
            check(false, "a written compact batch does not decode: \(error)")
        }
    }
    return 0
}
